// Package migrations holds Lectern's numbered SQL migrations and applies them.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/*.sql
var files embed.FS

// Up applies every migration not yet applied. Concurrent callers (several
// replicas starting at once) are serialised by a PostgreSQL advisory lock.
// A database a newer binary migrated is refused (Check): goose finds
// nothing to do on it.
func Up(ctx context.Context, pool *pgxpool.Pool) error {
	if err := UpTo(ctx, pool, goose.MaxVersion); err != nil {
		return err
	}
	return Check(ctx, pool)
}

// Check refuses a database that is not at this binary's latest migration,
// before a command relies on its schema: one not migrated yet would answer
// with errors, or worse, on tables that are missing or not yet changed;
// one migrated by a newer binary (a rollback) has a schema this one does
// not know, and running on it is not supported (docs/operations.md,
// "Upgrading"). It only reads.
func Check(ctx context.Context, pool *pgxpool.Pool) error {
	latest, err := Latest()
	if err != nil {
		return err
	}
	current, err := Current(ctx, pool)
	if err != nil {
		return err
	}
	switch {
	case current < latest:
		return fmt.Errorf("the database is at migration %d and this lectern's latest is %d: "+
			"run `lectern migrate` first (or `lectern serve` without --migrate=false)", current, latest)
	case current > latest:
		return fmt.Errorf("the database is at migration %d and this lectern's latest is %d: a newer lectern migrated it, "+
			"and this one does not know its schema; run the newer version (or restore the backup taken before the upgrade)", current, latest)
	}
	return nil
}

// UpTo applies the migrations not yet applied up to version (a test of one
// migration's effect on the data before it).
func UpTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		return err
	}
	// Another replica's migration may run long (00028 builds its indexes
	// CONCURRENTLY, which waits for every open transaction): wait for it
	// up to an hour, probing every 5 s, not goose's default 5 minutes,
	// after which a replica started meanwhile would fail to start.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(5, 720))
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer func() { _ = db.Close() }()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := provider.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// Latest is the version of the newest migration this binary holds: the
// version Up brings a database to.
func Latest() (int64, error) {
	names, err := fs.Glob(files, "sql/*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, name := range names {
		v, err := goose.NumericComponent(path.Base(name))
		if err != nil {
			return 0, fmt.Errorf("migrations: %w", err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// Current is the version the database is migrated to: the highest in
// goose's version table, as goose reads it; 0 when the database has none
// (no migration was ever applied). Unlike goose's own reading, it only
// reads: it creates no version table.
func Current(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var version int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(version_id), 0) FROM goose_db_version`).Scan(&version); err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	return version, nil
}
