package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/migrations"
	"lectern/pgtest"
	"lectern/poll"
)

// latestOnDisk is the version of the newest file of migrations/sql: the
// version this binary's migrations reach.
func latestOnDisk(t *testing.T) int64 {
	t.Helper()
	entries, err := os.ReadDir("../../migrations/sql")
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		latest = max(latest, v)
	}
	return latest
}

// unmigratedURL is a database of its own with no migration applied (not
// even goose's version table), dropped when the test ends, and its URL.
func unmigratedURL(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	return pgtest.Unmigrated(t)
}

// serveOnce runs `lectern serve args...` on url until it returns or
// answers GET /readyz (then it is stopped): its error, and whether it
// served.
func serveOnce(t *testing.T, url string, args ...string) (served bool, err error) {
	t.Helper()
	free, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	port := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	_ = free.Close()
	cliEnv(t, url, map[string]string{"LECTERN_JWT_KEY": strings.Repeat("12", 32), "PORT": port})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() {
		cmd := root()
		cmd.SetArgs(append([]string{"serve"}, args...))
		cmd.SetOut(io.Discard)
		done <- cmd.ExecuteContext(ctx)
	}()
	returned := false
	poll.Must(t, 60*time.Second, "serve returns or answers /readyz", func() bool {
		select {
		case err = <-done:
			returned = true
			return true
		default:
		}
		res, gerr := http.Get("http://127.0.0.1:" + port + "/readyz")
		if gerr != nil {
			return false
		}
		_ = res.Body.Close()
		served = true
		return true
	})
	if !returned {
		stop()
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop when its context ended")
		}
	}
	return served, err
}

// A command that does not migrate (serve --migrate=false, and those that
// only read or repair: dead letters, export, seal, replay, copy, keys
// rotate) refuses a database that is not at this binary's latest
// migration, in one line naming both versions: an empty database, one
// migrated by an older lectern, and one migrated by a newer lectern (a
// rollback: the old binary would run on a schema it does not know). The
// commands that migrate (serve, migrate, users create) bring an older
// database up to date, and refuse a newer one. Nothing is written to a
// database refused: an empty one gets no version table.
func TestCommandsRefuseADatabaseAtAnotherMigration(t *testing.T) {
	ctx := context.Background()
	latest := latestOnDisk(t)
	noMigrate := [][]string{
		{"projections", "dead-letters", "list"},
		{"projections", "dead-letters", "skip", "accounts", "00000000-0000-0000-0000-000000000001"},
		{"events", "export", "-o", os.DevNull},
		{"events", "seal"},
		{"events", "copy", "--to", "esdb://127.0.0.1:1?tls=false"},
		{"replay", "accounts"},
	}
	rotate := map[string]string{"LECTERN_DATA_KEY": strings.Repeat("cd", 32), "LECTERN_DATA_KEY_PREVIOUS": cliDataKey}
	refused := func(t *testing.T, what string, err error, at int64) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error, want it refused", what)
			return
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("at migration %d", at)) || !strings.Contains(msg, fmt.Sprintf("latest is %d", latest)) ||
			strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want one line naming migration %d and this lectern's latest, %d", what, msg, at, latest)
		}
	}
	for _, c := range []struct {
		name    string
		at      int64
		prepare func(t *testing.T, pool *pgxpool.Pool)
	}{
		{"empty", 0, func(*testing.T, *pgxpool.Pool) {}},
		{"older", 26, func(t *testing.T, pool *pgxpool.Pool) {
			if err := migrations.UpTo(ctx, pool, 26); err != nil {
				t.Fatal(err)
			}
		}},
		{"newer", latest + 1, func(t *testing.T, pool *pgxpool.Pool) {
			if err := migrations.Up(ctx, pool); err != nil {
				t.Fatal(err)
			}
			// What a newer lectern's next migration leaves.
			if _, err := pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool, url := unmigratedURL(t)
			c.prepare(t, pool)
			served, err := serveOnce(t, url, "--migrate=false")
			if served {
				t.Errorf("serve --migrate=false served a database at migration %d (this lectern's latest is %d); it stopped with %v", c.at, latest, err)
			} else {
				refused(t, "serve --migrate=false", err, c.at)
			}
			for _, args := range noMigrate {
				_, err := cli(t, url, nil, args...)
				refused(t, "lectern "+strings.Join(args, " "), err, c.at)
			}
			_, err = cli(t, url, rotate, "keys", "rotate")
			refused(t, "lectern keys rotate", err, c.at)
			if c.at == 0 {
				var table *string
				if err := pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version')::text`).Scan(&table); err != nil || table != nil {
					t.Errorf("the refused commands left goose's version table in an empty database: %v, %v", table, err)
				}
			}
			if c.at > latest {
				_, err := cli(t, url, nil, "migrate")
				refused(t, "lectern migrate", err, c.at)
				_, err = cli(t, url, nil, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
				refused(t, "lectern users create", err, c.at)
				served, err := serveOnce(t, url)
				if served {
					t.Errorf("serve served a database at migration %d, newer than its latest %d; it stopped with %v", c.at, latest, err)
				} else {
					refused(t, "serve", err, c.at)
				}
				return
			}
			// Migrated (by migrate, or by serve itself), the database is
			// served without migrating.
			if c.at == 0 {
				runCLI(t, url, "migrate")
			} else if served, err := serveOnce(t, url); !served {
				t.Fatalf("serve on a database at migration %d did not migrate it and serve: %v", c.at, err)
			}
			if served, err := serveOnce(t, url, "--migrate=false"); !served {
				t.Errorf("serve --migrate=false on a database migrated to this lectern's latest did not serve: %v", err)
			}
			runCLI(t, url, "projections", "dead-letters", "list")
		})
	}
}
