package janitor_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lectern/janitor"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/ratelimit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// One run deletes exactly what has had its day, in every table, and counts it.
func TestRunOncePurgesWhatExpired(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t) // it reads whole tables: a database of its own, each run
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	for i, expires := range []time.Time{now.Add(-time.Minute), now.Add(time.Minute)} {
		exec(`INSERT INTO email_codes (token, email, code_hash, expires_at) VALUES ($1, 'a@example.com', 'h', $2)`, []string{"old", "fresh"}[i], expires)
		exec(`INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at) VALUES ($1, 1, $2, $3)`, []string{"old", "fresh"}[i], uuid.New(), expires)
		exec(`INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, created_at) VALUES (1, $1, 'r', 201, '{}', '', $2)`,
			[]string{"old", "fresh"}[i], expires.Add(-24*time.Hour))
		// The ids a key drew go with it (a foreign key's cascade).
		exec(`INSERT INTO idempotency_ids (user_id, key, sequence, seq_index, id) VALUES (1, $1, 'agent_ids', 0, $2)`,
			[]string{"old", "fresh"}[i], i+1)
	}
	// A reindex job finished just past its retention, and one just within it.
	exec(`INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, finished_at) VALUES
		(1, 1, 1, 'completed', $1, $1, $1), (2, 1, 1, 'failed', $2, $2, $2)`,
		now.Add(-janitor.DefaultJobRetention-time.Minute), now.Add(-janitor.DefaultJobRetention+time.Minute))
	exec(`INSERT INTO rate_buckets (bucket, tat, allowed) VALUES ('old', $1, true), ('fresh', $2, true)`, now.Add(-time.Minute), now.Add(time.Minute))
	exec(`INSERT INTO rate_windows (bucket, hits, idle_at, allowed) VALUES ('old', '{}', $1, true), ('fresh', '{}', $2, true)`, now.Add(-time.Minute), now.Add(time.Minute))
	// More idle token buckets than one DELETE takes: the purge goes on
	// past a full batch, and counts every row.
	exec(`INSERT INTO rate_buckets (bucket, tat, allowed) SELECT 'old-' || i, $1, true FROM generate_series(1, $2::int) AS i`,
		now.Add(-time.Hour), janitor.BatchSize)

	reg := prometheus.NewRegistry()
	clock := func() time.Time { return now }
	j, err := janitor.New(db, ratelimit.New(db, clock), clock, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := j.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"email_codes": 1, "refresh_tokens": 1, "idempotency_keys": 1, "knowledge_reindex_jobs": 1,
		"rate_buckets": 1 + janitor.BatchSize, "rate_windows": 1}
	if diff := cmp.Diff(want, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	for _, table := range []string{"email_codes", "refresh_tokens", "idempotency_keys", "idempotency_ids", "rate_buckets", "rate_windows"} {
		key := map[string]string{"email_codes": "token", "refresh_tokens": "token_hash", "idempotency_keys": "key",
			"idempotency_ids": "key", "rate_buckets": "bucket", "rate_windows": "bucket"}[table]
		var left []string
		rows, err := db.Query(ctx, "SELECT "+key+" FROM "+table+" ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			left = append(left, k)
		}
		if diff := cmp.Diff([]string{"fresh"}, left); diff != "" {
			t.Errorf("%s after the run (-want +got):\n%s", table, diff)
		}
	}
	var jobs []int64
	rows, err := db.Query(ctx, `SELECT job_id FROM knowledge_reindex_jobs ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, id)
	}
	if diff := cmp.Diff([]int64{2}, jobs); diff != "" {
		t.Errorf("knowledge_reindex_jobs after the run (-want +got):\n%s", diff)
	}
	for table, n := range want {
		if got := testutil.ToFloat64(j.Deleted(table)); got != float64(n) {
			t.Errorf("lectern_janitor_deleted_rows_total{table=%s} = %v, want %d", table, got, n)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "lectern_janitor_deleted_rows_total", "lectern_janitor_last_run_timestamp_seconds"); err != nil || n != 7 {
		t.Errorf("%d series registered (%v), want 7 (six tables and the last run)", n, err)
	}
}

// Run purges on its schedule until its context ends.
func TestRunOnItsSchedule(t *testing.T) {
	db := pgtest.Pool(t)
	j := newJanitor(t, db, time.Now())
	j.Every = 10 * time.Millisecond
	runPurgesAnExpiredCode(t, db, j, "sched", "the scheduled run")
}

// The first run comes FirstRun after the start, not a whole Every: a
// process restarted more often than Every still purges.
func TestFirstRunSoonAfterTheStart(t *testing.T) {
	db := pgtest.Pool(t)
	j := newJanitor(t, db, time.Now())
	if j.FirstRun != janitor.DefaultFirstRun || janitor.DefaultFirstRun >= janitor.DefaultEvery {
		t.Fatalf("first run %s after the start, then every %s: want the default, sooner than a period", j.FirstRun, j.Every)
	}
	j.Every = time.Hour
	j.FirstRun = 10 * time.Millisecond
	runPurgesAnExpiredCode(t, db, j, "first", "the first run")
}

// runPurgesAnExpiredCode runs j until it has purged an expired e-mail code
// of token, then stops it.
func runPurgesAnExpiredCode(t *testing.T, db *pgxpool.Pool, j *janitor.Janitor, token, which string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `INSERT INTO email_codes (token, email, code_hash, expires_at)
		VALUES ($1, $1 || '@example.com', 'h', now() - interval '1 hour')`, token); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { j.Run(ctx); close(done) }()
	poll.Must(t, 10*time.Second, which+" purges the expired code", func() bool {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM email_codes WHERE token = $1`, token).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	cancel()
	<-done
}

// A refresh-token family goes only whole: its expired, revoked token stays
// while a later token of the family is still valid, since that revoked row
// is what refuses the later token (commands.Identity.Refresh).
func TestRefreshFamiliesGoWhole(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	kept, gone := uuid.New(), uuid.New()
	for _, row := range []struct {
		hash    string
		family  uuid.UUID
		expires time.Time
	}{
		{"kept-revoked", kept, now.Add(-time.Minute)},
		{"kept-later", kept, now.Add(time.Hour)},
		{"gone-1", gone, now.Add(-time.Hour)},
		{"gone-2", gone, now.Add(-time.Minute)},
	} {
		if _, err := db.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at, revoked_at) VALUES ($1, 1, $2, $3, $4)`,
			row.hash, row.family, row.expires, now.Add(-2*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	clock := func() time.Time { return now }
	j, err := janitor.New(db, ratelimit.New(db, clock), clock, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := j.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deleted["refresh_tokens"] != 2 {
		t.Errorf("%d refresh tokens deleted, want 2 (the expired family)", deleted["refresh_tokens"])
	}
	var left []string
	rows, err := db.Query(ctx, `SELECT token_hash FROM refresh_tokens ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		left = append(left, h)
	}
	if diff := cmp.Diff([]string{"kept-later", "kept-revoked"}, left); diff != "" {
		t.Errorf("refresh tokens after the run (-want +got):\n%s", diff)
	}
}
