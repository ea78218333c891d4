package janitor_test

// What the operational tables keep after a janitor's run: what must go
// (rows that would otherwise pile up without bound under a realistic
// pattern) and what must stay.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"lectern/commands"
	"lectern/janitor"
	"lectern/pgtest"
	"lectern/ratelimit"
)

func newJanitor(t *testing.T, db *pgxpool.Pool, now time.Time) *janitor.Janitor {
	t.Helper()
	clock := func() time.Time { return now }
	j, err := janitor.New(db, ratelimit.New(db, clock), clock, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func execAll(t *testing.T, db *pgxpool.Pool, statements ...string) {
	t.Helper()
	for _, s := range statements {
		if _, err := db.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func count(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// A session whose client refreshes its access token every 15 minutes keeps
// its refresh-token family alive for good: each rotation stores a token
// valid RefreshTTL from then (commands.Identity.issueIn). The rotated
// tokens past their expiry are refused anyway (Refresh refuses an expired
// token before it looks for reuse), and the session check reads only the
// family's revoked rows: they must go at their expiry, or every live
// session adds 96 rows a day for as long as it lives. The unexpired rotated
// tokens stay (presenting one is reuse, which revokes the family), and so
// does a revoked family, whole, until its last token expired.
func TestRotatedTokensOfALiveSessionGo(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	const every = 15 * time.Minute
	start := now.Add(-30 * 24 * time.Hour)
	live, revoked := uuid.New(), uuid.New()
	var issued []time.Time
	for at := start; !at.After(now); at = at.Add(every) {
		issued = append(issued, at)
	}
	expired, revokedRows := 0, 0
	revokedAt := now.Add(-time.Hour)
	for k, at := range issued {
		var rotated *time.Time
		if k+1 < len(issued) {
			rotated = &issued[k+1]
		}
		if at.Add(commands.RefreshTTL).Before(now) {
			expired++
		}
		// The live family, and one refreshed alike until an hour ago, when
		// a reused token revoked every row of it.
		for _, family := range []uuid.UUID{live, revoked} {
			var revoke *time.Time
			if family == revoked {
				if at.After(revokedAt) {
					continue
				}
				revoke = &revokedAt
				revokedRows++
			}
			if _, err := db.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, user_id, family_id, created_at, expires_at, rotated_at, revoked_at)
				VALUES ($1, 1, $2, $3, $4, $5, $6)`, fmt.Sprintf("%s-%d", family, k), family, at, at.Add(commands.RefreshTTL), rotated, revoke); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The race Refresh's comment describes: a revoked token, expired, and
	// the token its rotation issued while the family was being revoked,
	// unrevoked and valid. The revoked row is what refuses that token.
	raced := uuid.New()
	if _, err := db.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at, rotated_at, revoked_at)
		VALUES ('raced-revoked', 1, $1, $2, $3, $3), ('raced-later', 1, $1, $4, NULL, NULL)`,
		raced, now.Add(-time.Minute), now.Add(-14*24*time.Hour), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	deleted, err := newJanitor(t, db, now).RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tokens issued to the live session over 30 days, %d of them expired; %d deleted", len(issued), expired, deleted["refresh_tokens"])
	if got := count(t, db, `SELECT count(*) FROM refresh_tokens WHERE family_id = $1 AND expires_at < $2`, live, now); got != 0 {
		t.Errorf("%d expired, rotated tokens of a live session left after the run, want 0 (%d deleted)", got, deleted["refresh_tokens"])
	}
	if got, want := count(t, db, `SELECT count(*) FROM refresh_tokens WHERE family_id = $1`, live), len(issued)-expired; got != want {
		t.Errorf("live session: %d tokens left, want its %d unexpired ones", got, want)
	}
	if got := count(t, db, `SELECT count(*) FROM refresh_tokens WHERE family_id = $1 AND rotated_at IS NULL AND revoked_at IS NULL`, live); got != 1 {
		t.Errorf("live session: %d current tokens, want 1", got)
	}
	if got := count(t, db, `SELECT count(*) FROM refresh_tokens WHERE family_id = $1`, revoked); got != revokedRows {
		t.Errorf("revoked family: %d rows left, want all %d (it goes whole once its last token expired)", got, revokedRows)
	}
	if got := count(t, db, `SELECT count(*) FROM refresh_tokens WHERE family_id = $1`, raced); got != 2 {
		t.Errorf("raced family: %d rows left, want 2 (its revoked row refuses its valid token)", got)
	}
	if deleted["refresh_tokens"] != int64(expired) {
		t.Errorf("%d refresh tokens deleted, want %d", deleted["refresh_tokens"], expired)
	}
}

// A purge never waits for a row another transaction holds (a stuck session
// idle in its transaction, an operator's SELECT ... FOR UPDATE): waiting,
// its DELETE would hold every row it had deleted so far (up to BatchSize)
// locked, and the run, and every table after it, would wait as long. The
// held row goes at a later run.
func TestAPurgeSkipsRowsOthersHold(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	const n = 200
	execAll(t, db,
		fmt.Sprintf(`INSERT INTO email_codes (token, email, code_hash, expires_at)
			SELECT 'code-' || i, 'a@example.com', 'h', '2026-11-24 11:00Z' FROM generate_series(1, %d) i`, n),
		fmt.Sprintf(`INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at)
			SELECT 'token-' || i, 1, gen_random_uuid(), '2026-11-24 11:00Z' FROM generate_series(1, %d) i`, n),
		fmt.Sprintf(`INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, created_at)
			SELECT 1, 'key-' || i, 'r', 201, '{}', '', '2026-11-22 12:00Z' FROM generate_series(1, %d) i`, n),
	)
	held := map[string]string{"email_codes": "token = 'code-7'", "refresh_tokens": "token_hash = 'token-7'", "idempotency_keys": "key = 'key-7'"}
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	for table, where := range held {
		if _, err := holder.Exec(ctx, `SELECT 1 FROM `+table+` WHERE `+where+` FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
	}

	j := newJanitor(t, db, now)
	type result struct {
		deleted map[string]int64
		err     error
	}
	done := make(chan result, 1)
	go func() {
		d, err := j.RunOnce(ctx)
		done <- result{d, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		// Which of the rows the run selected does it hold while it waits?
		locked := 0
		for table, key := range map[string]string{"email_codes": "token", "refresh_tokens": "token_hash", "idempotency_keys": "key"} {
			rows, err := db.Query(ctx, `SELECT `+key+` FROM `+table)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				_, err := db.Exec(ctx, `SELECT 1 FROM `+table+` WHERE `+key+` = $1 FOR UPDATE NOWAIT`, k)
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
					locked++
				}
			}
		}
		_ = holder.Rollback(ctx)
		res = <-done
		t.Fatalf("the run waited for a held row (5 s, then the holder gave up; %d rows locked meanwhile, the held ones and those the waiting DELETE had deleted): deleted %v, %v",
			locked, res.deleted, res.err)
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	for table, where := range held {
		if got := count(t, db, `SELECT count(*) FROM `+table); got != 1 {
			t.Errorf("%s: %d rows left, want the held one", table, got)
		}
		if got := count(t, db, `SELECT count(*) FROM `+table+` WHERE `+where); got != 1 {
			t.Errorf("%s: the held row went", table)
		}
		if res.deleted[table] != n-1 {
			t.Errorf("%s: %d deleted, want %d", table, res.deleted[table], n-1)
		}
	}
	// Once it is let go, the next run takes it.
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for table := range held {
		if got := count(t, db, `SELECT count(*) FROM `+table); got != 0 {
			t.Errorf("%s: %d rows left after the next run, want 0", table, got)
		}
	}
}

// A purge's statement is bounded in time: one that cannot run (its table
// locked by a long VACUUM FULL, an ALTER TABLE, an index built without
// CONCURRENTLY) fails the run after StatementTimeout, and the next run tries
// again, rather than leaving the janitor waiting without bound. The tables
// purged after it are purged in the same run.
func TestAPurgeWaitsAtMostItsStatementTimeout(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	execAll(t, db,
		`INSERT INTO email_codes (token, email, code_hash, expires_at) VALUES ('old', 'a@example.com', 'h', '2026-11-24 11:00Z')`,
		`INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, created_at) VALUES (1, 'old', 'r', 201, '{}', '', '2026-11-22 12:00Z')`,
		// Purged after the locked table.
		`INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, finished_at)
			VALUES (1, 1, 1, 'completed', '2026-01-01Z', '2026-01-01Z', '2026-01-01Z')`,
	)
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	j := newJanitor(t, db, now)
	j.StatementTimeout = 500 * time.Millisecond
	start := time.Now()
	done := make(chan error, 1)
	go func() { _, err := j.RunOnce(ctx); done <- err }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		_ = holder.Rollback(ctx)
		t.Fatalf("the run waited for the locked table for 10 s (then the holder gave up: %v)", <-done)
	}
	if err == nil {
		t.Fatal("the run succeeded with idempotency_keys locked")
	}
	t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if got := count(t, db, `SELECT count(*) FROM email_codes`); got != 0 {
		t.Errorf("email_codes, purged before the locked table: %d rows left", got)
	}
	if got := count(t, db, `SELECT count(*) FROM knowledge_reindex_jobs`); got != 0 {
		t.Errorf("knowledge_reindex_jobs, purged after the locked table: %d rows left (the run stopped at the locked table)", got)
	}
	if !strings.Contains(err.Error(), "idempotency_keys") {
		t.Errorf("the run's error does not name the locked table: %v", err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, db, `SELECT count(*) FROM idempotency_keys`); got != 0 {
		t.Errorf("idempotency_keys: %d rows left after the next run", got)
	}
}

// A backlog larger than a batch goes in one run, in batches, and two
// janitors running at once (two replicas) delete each row once.
func TestABacklogGoesOnceInBatches(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	n := 2*janitor.BatchSize + 500
	execAll(t, db,
		fmt.Sprintf(`INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, created_at)
			SELECT i %% 100, 'key-' || i, 'r', 201, '{}', '', '2026-11-22 12:00Z' FROM generate_series(1, %d) i`, n),
		fmt.Sprintf(`INSERT INTO idempotency_ids (user_id, key, sequence, seq_index, id)
			SELECT i %% 100, 'key-' || i, 'agent_ids', 0, i FROM generate_series(1, %d) i`, n),
		fmt.Sprintf(`INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at)
			SELECT 'token-' || i, 1, gen_random_uuid(), '2026-11-24 11:00Z' FROM generate_series(1, %d) i`, n),
		fmt.Sprintf(`INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, finished_at)
			SELECT i, i, 1, 'completed', '2026-01-01Z', '2026-01-01Z', '2026-01-01Z' FROM generate_series(1, %d) i`, n),
	)
	var wg sync.WaitGroup
	totals := make([]map[string]int64, 2)
	errs := make([]error, 2)
	for i := range 2 {
		j := newJanitor(t, db, now)
		wg.Add(1)
		go func() { defer wg.Done(); totals[i], errs[i] = j.RunOnce(ctx) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []string{"idempotency_keys", "refresh_tokens", "knowledge_reindex_jobs"} {
		if sum := totals[0][table] + totals[1][table]; sum != int64(n) {
			t.Errorf("%s: %d + %d deleted, want %d in all", table, totals[0][table], totals[1][table], n)
		}
	}
	for _, table := range []string{"idempotency_keys", "idempotency_ids", "refresh_tokens", "knowledge_reindex_jobs"} {
		if got := count(t, db, `SELECT count(*) FROM `+table); got != 0 {
			t.Errorf("%s: %d rows left", table, got)
		}
	}
}

// The janitor deletes only what the docs say it deletes: it keeps every row
// still of use, at the edges of their lifetimes (or retentions), and never
// touches the tables it does not purge.
func TestJanitorKeepsWhatItMust(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	live := uuid.New()
	for _, s := range []struct {
		sql  string
		args []any
	}{
		// A code that expires at this very moment is still valid until it.
		{`INSERT INTO email_codes (token, email, code_hash, expires_at) VALUES ('now', 'a@example.com', 'h', $1), ('later', 'a@example.com', 'h', $2)`,
			[]any{now, now.Add(commands.CodeTTL)}},
		// The current token of a session, a rotated one within its 14
		// days (presenting it is reuse: it must be found), a fresh one.
		{`INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at, rotated_at) VALUES
			('current', 1, $1, $2, NULL), ('rotated', 1, $1, $3, $4), ('edge', 1, gen_random_uuid(), $5, NULL)`,
			[]any{live, now.Add(commands.RefreshTTL), now.Add(time.Minute), now.Add(-time.Minute), now}},
		// A key within its 24 hours, a key in progress, and the ids it drew.
		{`INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, created_at, lease_until) VALUES
			(1, 'within', 'r', 201, '{}', '', $1, $1), (1, 'running', 'r', 0, '{}', '', $2, $3)`,
			[]any{now.Add(-janitor.IdempotencyTTL + time.Microsecond), now.Add(-time.Second), now.Add(5 * time.Second)}},
		{`INSERT INTO idempotency_ids (user_id, key, sequence, seq_index, id) VALUES (1, 'within', 'agent_ids', 0, 1), (1, 'running', 'agent_ids', 0, 2)`, nil},
		// Buckets and windows that still hold something.
		{`INSERT INTO rate_buckets (bucket, tat, allowed) VALUES ('busy', $1, true)`, []any{now.Add(time.Microsecond)}},
		{`INSERT INTO rate_windows (bucket, hits, idle_at, allowed) VALUES ('busy', ARRAY[$1::timestamptz], $2, true)`,
			[]any{now.Add(-time.Minute), now.Add(time.Microsecond)}},
		// Dead letters waiting for an operator, and answered ones.
		{`INSERT INTO projection_dead_letters (projection, event_id, event_type, stream_id, position, error, failures, status, first_failed_at, updated_at)
			SELECT 'accounts', gen_random_uuid(), 't', 's', '0', 'e', 5, s, $1, $1 FROM unnest(ARRAY['stopped', 'retry', 'skip', 'skipped', 'resolved']) s`,
			[]any{now.Add(-365 * 24 * time.Hour)}},
		// A document's blob and chunks, a year old.
		{`INSERT INTO document_blobs (owner_id, hash, size, content, sealed, created_at) VALUES (1, 'h', 1, 'x', false, $1)`, []any{now.Add(-365 * 24 * time.Hour)}},
		{`INSERT INTO knowledge_chunks (id, knowledge_id, ord, text, embedding, owner_id) VALUES (1, 1, 0, 't', '{1}', 1)`, nil},
		// Reindex jobs requested a year ago and not finished (queued, and
		// running on a lease that ran out: a worker takes it up again), and
		// finished ones within their retention, one at its very edge.
		{`INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, finished_at, lease_until) VALUES
			(1, 1, 1, 'queued', $1, NULL, NULL, NULL), (2, 1, 1, 'running', $1, $1, NULL, $1),
			(3, 1, 1, 'completed', $1, $1, $2, NULL), (4, 1, 1, 'failed', $1, $1, $3, NULL)`,
			[]any{now.Add(-365 * 24 * time.Hour), now.Add(-janitor.DefaultJobRetention), now.Add(-time.Hour)}},
		{`INSERT INTO unique_claims (scope, key, owner, claimed_at) VALUES ('user_email', 'a@example.com', 'user-1', $1)`, []any{now.Add(-365 * 24 * time.Hour)}},
		{`INSERT INTO credentials (user_id, password_hash, updated_at) VALUES (1, 'h', $1)`, []any{now.Add(-365 * 24 * time.Hour)}},
		{`INSERT INTO subject_keys (subject, wrapped, created_at) VALUES ('user-1', 'k', $1)`, []any{now.Add(-365 * 24 * time.Hour)}},
	} {
		if _, err := db.Exec(ctx, s.sql, s.args...); err != nil {
			t.Fatalf("%s: %v", s.sql, err)
		}
	}
	tables := []string{"email_codes", "refresh_tokens", "idempotency_keys", "idempotency_ids", "rate_buckets", "rate_windows",
		"projection_dead_letters", "document_blobs", "knowledge_chunks", "knowledge_reindex_jobs", "unique_claims", "credentials", "subject_keys"}
	before := map[string]int{}
	for _, table := range tables {
		before[table] = count(t, db, `SELECT count(*) FROM `+table)
	}
	deleted, err := newJanitor(t, db, now).RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for table, n := range deleted {
		if n != 0 {
			t.Errorf("%s: %d rows deleted, want none", table, n)
		}
	}
	for _, table := range tables {
		if got := count(t, db, `SELECT count(*) FROM `+table); got != before[table] {
			t.Errorf("%s: %d rows after the run, want the %d before it", table, got, before[table])
		}
	}
}

// The rate-limit prune (ratelimit.Limiter.Prune) waits for a bucket
// another transaction holds, as the janitor's own purges did: while it
// waits its DELETE holds every idle bucket it deleted so far, and a client
// coming back to one of them (a login, a join, a turn) waits as long.
func TestRateLimitPruneSkipsBucketsOthersHold(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	execAll(t, db, `INSERT INTO rate_buckets (bucket, tat, allowed) SELECT 'idle-' || i, '2026-11-24 11:00Z', true FROM generate_series(1, 200) i`)
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM rate_buckets WHERE bucket = 'idle-7' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := newJanitor(t, db, now).RunOnce(ctx); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		// A client's hit on another idle bucket, meanwhile.
		lim := ratelimit.New(db, func() time.Time { return now })
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		waited := 0
		for i := 1; i <= 200; i++ {
			if i == 7 {
				continue
			}
			if _, err := lim.Allow(hctx, fmt.Sprintf("idle-%d", i), ratelimit.Rate{N: 10, Per: time.Minute}); err != nil {
				waited++
				break
			}
		}
		cancel()
		_ = holder.Rollback(ctx)
		t.Fatalf("the run waited for a held rate bucket (5 s, then the holder gave up: %v); a hit on another idle bucket waited meanwhile: %v", <-done, waited > 0)
	}
}

// Finished reindex jobs go once their retention is over: nothing reads a
// job's row but its owner's GET of it, and every reindex ever asked for
// would otherwise stay. Jobs not finished stay however old they are (the
// queue's: a running one whose lease ran out is taken up again), and so do
// finished ones within the retention, which Janitor.JobRetention sets.
// Dead letters, finished or not, are an operator's to see: they stay.
func TestFinishedReindexJobsGoAfterTheirRetention(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	year := now.Add(-365 * 24 * time.Hour)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	for _, job := range []struct {
		id       int64
		status   string
		finished *time.Time
	}{
		{1, "completed", &year},
		{2, "failed", ago(janitor.DefaultJobRetention + time.Microsecond)},
		{3, "completed", ago(janitor.DefaultJobRetention - time.Minute)},
		{4, "queued", nil},
		{5, "running", nil},
		{6, "failed", ago(2 * time.Hour)},
	} {
		var started, lease *time.Time
		if job.status != "queued" {
			started = &year
		}
		if job.status == "running" {
			lease = &year // ran out long ago: a worker takes the job up again
		}
		if _, err := db.Exec(ctx, `INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, finished_at, lease_until)
			VALUES ($1, $1, 1, $2, $3, $4, $5, $6)`, job.id, job.status, year, started, job.finished, lease); err != nil {
			t.Fatal(err)
		}
	}
	execAll(t, db, `INSERT INTO projection_dead_letters (projection, event_id, event_type, stream_id, position, error, failures, status, first_failed_at, updated_at)
		SELECT 'accounts', gen_random_uuid(), 't', 's', '0', 'e', 5, s, '2025-01-01Z', '2025-01-01Z' FROM unnest(ARRAY['stopped', 'retry', 'skip', 'skipped', 'resolved']) s`)
	left := func() []int64 {
		t.Helper()
		rows, err := db.Query(ctx, `SELECT job_id FROM knowledge_reindex_jobs ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}

	deleted, err := newJanitor(t, db, now).RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deleted["knowledge_reindex_jobs"] != 2 {
		t.Errorf("%d reindex jobs deleted, want 2 (those finished before the retention)", deleted["knowledge_reindex_jobs"])
	}
	if got, want := fmt.Sprint(left()), "[3 4 5 6]"; got != want {
		t.Errorf("reindex jobs after the run: %s, want %s", got, want)
	}

	shorter := newJanitor(t, db, now)
	shorter.JobRetention = time.Hour
	if _, err := shorter.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(left()), "[4 5]"; got != want {
		t.Errorf("reindex jobs after a run with a retention of an hour: %s, want %s (the queue's)", got, want)
	}
	if got := count(t, db, `SELECT count(*) FROM projection_dead_letters`); got != 5 {
		t.Errorf("%d dead letters left, want all 5", got)
	}
}

// Each purge reads only what goes, through an index of what it purges by
// (migration 00028), rather than its whole table at every run: on tables
// big enough for the planner to prefer the index, most of whose rows are
// still of use (as a live service's are), each purge's DELETE, as the
// janitor runs it, scans that index and no table whole.
func TestPurgesReadTheirIndexes(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	// refresh_tokens bigger: below some 50 000 to 80 000 rows, the planner rightly
	// prefers reading the unexpired tokens once (a hashed subplan) to
	// looking up each revoked candidate's family in refresh_tokens_family.
	const live, tokens, gone = 20_000, 120_000, 100
	execAll(t, db,
		fmt.Sprintf(`INSERT INTO email_codes (token, email, code_hash, expires_at)
			SELECT 'code-' || i, 'a@example.com', 'h', timestamptz '2026-11-24 12:00Z' + CASE WHEN i <= %[2]d THEN -1 ELSE 1 END * i * interval '1 ms'
			FROM generate_series(1, %[1]d) i`, live+gone, gone),
		fmt.Sprintf(`INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at, revoked_at)
			SELECT 'token-' || i, i %% 1000, gen_random_uuid(), timestamptz '2026-11-24 12:00Z' + CASE WHEN i <= %[2]d THEN -1 ELSE 1 END * i * interval '1 s',
				CASE WHEN i %% 10 = 0 THEN timestamptz '2026-11-20Z' END
			FROM generate_series(1, %[1]d) i`, tokens+gone, gone),
		fmt.Sprintf(`INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, created_at)
			SELECT i %% 1000, 'key-' || i, 'r', 201, '{}', '', timestamptz '2026-11-23 12:00Z' + CASE WHEN i <= %[2]d THEN -1 ELSE 1 END * i * interval '1 ms'
			FROM generate_series(1, %[1]d) i`, live+gone, gone),
		// Past the retention (30 days), the first jobs; after them, one in
		// a hundred queued.
		fmt.Sprintf(`INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, finished_at)
			SELECT i, i, 1, status, t, t, CASE WHEN status <> 'queued' THEN t END
			FROM generate_series(1, %[1]d) i,
				LATERAL (SELECT timestamptz '2026-10-25 12:00Z' + CASE WHEN i <= %[2]d THEN -1 ELSE 1 END * i * interval '1 s' AS t,
					CASE WHEN i > %[2]d AND i %% 100 = 1 THEN 'queued' WHEN i %% 10 = 0 THEN 'failed' ELSE 'completed' END AS status) f`, live+gone, gone),
		`ANALYZE email_codes, refresh_tokens, idempotency_keys, knowledge_reindex_jobs`,
	)
	index := map[string]string{"email_codes": "email_codes_expires_at", "refresh_tokens": "refresh_tokens_expires_at",
		"idempotency_keys": "idempotency_keys_created_at", "knowledge_reindex_jobs": "knowledge_reindex_jobs_finished"}
	j := newJanitor(t, db, now)
	purges := j.Purges(now)
	if len(purges) != len(index) {
		t.Errorf("%d purges, want the %d of the tables this test knows the index of", len(purges), len(index))
	}
	for _, p := range purges {
		plan := pgtest.Explain(t, db, p.SQL, p.Arg)
		t.Logf("%s:\n%s", p.Table, plan)
		if want := index[p.Table]; !strings.Contains(plan, " using "+want+" on "+p.Table) || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: the purge does not read the index %s (or reads a table whole):\n%s", p.Table, want, plan)
		}
	}
	deleted, err := j.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for table := range index {
		if deleted[table] != gone {
			t.Errorf("%s: %d rows deleted, want %d", table, deleted[table], gone)
		}
	}
}
