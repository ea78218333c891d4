// Package pgtest gives each test package a fresh, migrated PostgreSQL database:
// on the server named by DATABASE_URL when it is set, or else (`make test`,
// through scripts/with-postgres.sh) on a throwaway cluster of the package's
// own, so that no other package's open transaction holds back the log
// horizon (pg_snapshot_xmin) its projections read below.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/migrations"
)

var (
	mu     sync.Mutex
	shared *pgxpool.Pool
	dbName string
)

// URL returns DATABASE_URL, or the package's own cluster's, or fails the
// test with the way to get one.
func URL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	u, err := ownCluster()
	if err != nil {
		tb.Fatal(err)
	}
	if u == "" {
		tb.Fatal("DATABASE_URL is not set: run the tests with `make test`, which starts throwaway PostgreSQL clusters")
	}
	return u
}

// cluster is the test binary's own PostgreSQL cluster, when it has one.
var cluster struct {
	once     sync.Once
	url, dir string
	script   string
	err      error
}

// ownCluster starts, once per test binary, a cluster under
// LECTERN_TEST_PG_DIR with the script LECTERN_PG_SH (scripts/pg.sh), as
// scripts/with-postgres.sh asks; "" when it does not.
func ownCluster() (string, error) {
	root, script := os.Getenv("LECTERN_TEST_PG_DIR"), os.Getenv("LECTERN_PG_SH")
	if root == "" || script == "" {
		return "", nil
	}
	cluster.once.Do(func() {
		dir, err := os.MkdirTemp(root, "pkg-")
		if err == nil {
			err = os.Chmod(dir, 0o755) // the cluster's owner (postgres, under root) must reach it
		}
		if err != nil {
			cluster.err = fmt.Errorf("pgtest: cluster directory: %w", err)
			return
		}
		closeInheritedOnExec()
		cmd := exec.Command(script, "start", filepath.Join(dir, "pg"))
		// A throwaway cluster need not survive a crash.
		cmd.Env = append(os.Environ(), "LECTERN_PG_FSYNC=off", "LECTERN_PG_SYNC_COMMIT=off")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			cluster.err = fmt.Errorf("pgtest: %s start: %w", script, err)
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		cluster.url, cluster.dir, cluster.script = lines[len(lines)-1], dir, script
	})
	return cluster.url, cluster.err
}

// stopCluster stops the binary's own cluster, if it started one.
func stopCluster() {
	if cluster.dir == "" {
		return
	}
	_ = exec.Command(cluster.script, "stop", filepath.Join(cluster.dir, "pg")).Run()
	_ = os.RemoveAll(cluster.dir)
	cluster.dir = ""
}

// Pool returns the test package's migrated database, created on first use.
// Tests may share it: they only ever see rows they created, since ids come
// from sequences. Call Cleanup from TestMain to drop it.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		return shared
	}
	pool, name, err := NewDatabase(context.Background(), URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	shared, dbName = pool, name
	return shared
}

// ConsistencyWait is how long a test's service waits for its read models
// before it answers a write. The log's visibility horizon (pg_snapshot_xmin)
// is the cluster's. Under make test (scripts/with-postgres.sh --per-package)
// each test package has a cluster of its own, but its tests share it, many
// of them in parallel: one test's open transaction (held on purpose, or a
// slow batch under load) can hold another's read models back past the
// service's 2 s default. When DATABASE_URL is set, every test package uses
// that one server, and other packages' transactions hold it back as well.
const ConsistencyWait = 10 * time.Second

// Fresh returns a database of its own for one test, dropped when it ends.
func Fresh(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, name, err := NewDatabase(context.Background(), URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		pool.Close()
		_ = drop(context.Background(), URL(tb), name)
	})
	return pool
}

// FreshURL is Fresh with the database's connection URL, for a child
// process (DATABASE_URL must be a postgres:// URL).
func FreshURL(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	pool := Fresh(tb)
	return pool, databaseURL(tb, pool.Config().ConnConfig.Database)
}

// databaseURL is DATABASE_URL with the database name in its place.
func databaseURL(tb testing.TB, name string) string {
	tb.Helper()
	u, err := url.Parse(URL(tb))
	if err != nil {
		tb.Fatalf("pgtest: DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Main is a package's TestMain that needs nothing else: it runs the tests,
// then Cleanup.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup drops the package's shared database and stops its own cluster;
// call it from TestMain after m.Run (Main does).
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.Close()
		if u := os.Getenv("DATABASE_URL"); u != "" {
			_ = drop(context.Background(), u, dbName)
		}
		shared = nil
	}
	stopCluster() // its databases go with it
}

// NewDatabase creates a uniquely named database next to the one in baseURL,
// migrates it and returns a pool on it.
func NewDatabase(ctx context.Context, baseURL string) (*pgxpool.Pool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pool, name, err := createDatabase(ctx, baseURL, "lectern_test_")
	if err != nil {
		return nil, "", err
	}
	if err := migrations.Up(ctx, pool); err != nil {
		pool.Close()
		return nil, "", err
	}
	return pool, name, nil
}

// Unmigrated is a database of its own for one test with no migration
// applied (not even goose's version table), dropped when it ends, and its
// connection URL: for tests of migrations and of what meets a database
// not migrated.
func Unmigrated(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	pool, name, err := createDatabase(context.Background(), URL(tb), "lectern_empty_")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		pool.Close()
		_ = drop(context.Background(), URL(tb), name)
	})
	return pool, databaseURL(tb, name)
}

// createDatabase creates a database named prefix and a random suffix next
// to the one in baseURL and returns a pool on it.
func createDatabase(ctx context.Context, baseURL, prefix string) (*pgxpool.Pool, string, error) {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := prefix + hex.EncodeToString(suffix)

	admin, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return nil, "", fmt.Errorf("pgtest: connect %s: %w", baseURL, err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, "", fmt.Errorf("pgtest: create database: %w", err)
	}

	cfg, err := pgxpool.ParseConfig(baseURL)
	if err != nil {
		return nil, "", err
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	return pool, name, nil
}

func drop(ctx context.Context, baseURL, name string) error {
	admin, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return err
	}
	defer func() { _ = admin.Close(ctx) }()
	_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// Querier is what Explain needs: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Explain returns the plan PostgreSQL chooses for sql with args (or for an
// EXECUTE of a prepared statement), one line per plan node, for tests that
// hold a query to reading an index rather than a whole table.
func Explain(tb testing.TB, db Querier, sql string, args ...any) string {
	tb.Helper()
	rows, err := db.Query(context.Background(), "EXPLAIN "+sql, args...)
	if err != nil {
		tb.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
