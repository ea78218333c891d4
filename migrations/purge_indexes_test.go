package migrations_test

import (
	"context"
	"testing"

	"lectern/migrations"
)

// A database at 00027 whose 00028 was interrupted (an invalid index left
// by a failed CREATE INDEX CONCURRENTLY) upgrades: the re-run drops it and
// builds it again; every index valid, the latest migration applied.
func TestAnInterruptedIndexBuildIsBuiltAgain(t *testing.T) {
	ctx := context.Background()
	pool := emptyDatabase(t)
	if err := migrations.UpTo(ctx, pool, 27); err != nil {
		t.Fatal(err)
	}
	// Leave an invalid index named as 00028's: a unique build over duplicates fails half-way.
	if _, err := pool.Exec(ctx, `INSERT INTO email_codes (token, email, code_hash, expires_at)
		VALUES ('a', 'x@example.com', 'h', now()), ('b', 'x@example.com', 'h', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY email_codes_expires_at ON email_codes (email)`); err == nil {
		t.Fatal("want the unique build to fail")
	}
	var valid bool
	if err := pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'email_codes_expires_at'::regclass`).Scan(&valid); err != nil || valid {
		t.Fatalf("want an invalid index left: %v %v", valid, err)
	}
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname IN ('email_codes_expires_at', 'refresh_tokens_expires_at', 'idempotency_keys_created_at', 'knowledge_reindex_jobs_finished')`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var name, def string
		var ok bool
		if err := rows.Scan(&name, &ok, &def); err != nil {
			t.Fatal(err)
		}
		n++
		t.Logf("%s valid=%v %s", name, ok, def)
		if !ok {
			t.Errorf("%s invalid after the upgrade", name)
		}
	}
	if n != 4 {
		t.Errorf("%d indexes, want 4", n)
	}
	cur, _ := migrations.Current(ctx, pool)
	latest, _ := migrations.Latest()
	if cur != latest {
		t.Errorf("at %d, want %d", cur, latest)
	}
}
