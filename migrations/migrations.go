// Package migrations holds Lectern's numbered SQL migrations and applies them.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/*.sql
var files embed.FS

// Up applies every migration not yet applied. Concurrent callers (several
// replicas starting at once) are serialised by a PostgreSQL advisory lock.
func Up(ctx context.Context, pool *pgxpool.Pool) error {
	return UpTo(ctx, pool, goose.MaxVersion)
}

// UpTo applies the migrations not yet applied up to version (a test of one
// migration's effect on the data before it).
func UpTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
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
