package projections

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/events"
	"lectern/pgtest"
	"lectern/poll"
)

// insertEvents appends n events of one type, each to a stream of its own,
// through db: the pool, or a transaction.
func insertEvents(t *testing.T, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, eventType string, n int) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `
		INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, recorded_at)
		SELECT gen_random_uuid(), '{}', '{}', 'x-' || gen_random_uuid(), 1, $1, now() FROM generate_series(1, $2)`, eventType, n); err != nil {
		t.Fatal(err)
	}
}

// settled probes until no event waits behind the horizon, which any
// transaction of the cluster (another test's, in another database) can hold.
func settled(t *testing.T, probe func() lookahead) lookahead {
	t.Helper()
	var got lookahead
	poll.Until(10*time.Second, func() bool {
		got = probe()
		return got != behindHorizon
	})
	return got
}

func offsetOf(t *testing.T, pool *pgxpool.Pool, group string) string {
	t.Helper()
	var pos string
	if err := pool.QueryRow(context.Background(), `SELECT last_processed_transaction_id::text || '-' || offset_acked FROM projection_offsets WHERE consumer_group = $1`, group).Scan(&pos); err != nil {
		t.Fatal(err)
	}
	return pos
}

func lastEvent(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var pos string
	if err := pool.QueryRow(context.Background(), `SELECT transaction_id::text || '-' || "offset" FROM events ORDER BY transaction_id DESC, "offset" DESC LIMIT 1`).Scan(&pos); err != nil {
		t.Fatal(err)
	}
	return pos
}

// The probe runs once per projection per committed append: it must tell a
// poll worth making from one that is not, skip what the projection does not
// handle without a poll, and stay an index probe however long the log.
func TestProbe(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	r := NewRunner(pool, NewListener(pool, slog.New(slog.NewTextHandler(io.Discard, nil))), events.NewRegistry(), nil)
	probe := r.prober("accounts", []string{"agent.created"})

	if got := settled(t, probe); got != idle {
		t.Fatalf("empty log: %v, want idle", got)
	}
	insertEvents(t, pool, "agent.created", 20000)
	if got := settled(t, probe); got != due {
		t.Fatalf("with no offsets row every event is pending: %v, want due", got)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
		SELECT 'accounts', "offset", transaction_id FROM events ORDER BY transaction_id DESC, "offset" DESC LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	if got := settled(t, probe); got != idle {
		t.Fatalf("caught up: %v, want idle", got)
	}
	plan := pgtest.Explain(t, pool, probeSQL, "accounts", []string{"agent.created"})
	if strings.Contains(plan, "Seq Scan on events") {
		t.Fatalf("the probe scans the log:\n%s", plan)
	}

	// Events the projection does not handle, more than one window of them:
	// skipped without a poll, the offset moved past the last.
	insertEvents(t, pool, "class.created", lookaheadWindow+5)
	if got := settled(t, probe); got != idle {
		t.Fatalf("only unhandled events: %v, want idle", got)
	}
	if got, want := offsetOf(t, pool, "accounts"), lastEvent(t, pool); got != want {
		t.Fatalf("offset after skipping: %s, want %s", got, want)
	}

	// In one transaction: committed apart, the handled event could be behind
	// the horizon (held by another test's transaction) while the others are
	// not, and the probe would rightly skip those first.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		insertEvents(t, tx, "class.created", 3)
		insertEvents(t, tx, "agent.created", 1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := offsetOf(t, pool, "accounts")
	if got := settled(t, probe); got != due {
		t.Fatalf("a handled event among unhandled ones: %v, want due", got)
	}
	if got := offsetOf(t, pool, "accounts"); got != before {
		t.Fatalf("a probe that finds a handled event leaves the offset to the poll: %s, want %s", got, before)
	}
	if _, err := pool.Exec(ctx, `UPDATE projection_offsets SET (last_processed_transaction_id, offset_acked) =
		(SELECT transaction_id, "offset" FROM events ORDER BY transaction_id DESC, "offset" DESC LIMIT 1)`); err != nil {
		t.Fatal(err)
	}

	// A transaction that began earlier and is still open holds later commits
	// behind the horizon: nothing may be read, but the probe knows to look again.
	older, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback(ctx)
	if _, err := older.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	insertEvents(t, pool, "agent.created", 1)
	if got := probe(); got != behindHorizon {
		t.Fatalf("an event behind an open transaction: %v, want behindHorizon", got)
	}
	if err := older.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := settled(t, probe); got != due {
		t.Fatalf("the horizon passed the event: %v, want due", got)
	}
}

// After a poll that read events, an append announced meanwhile (not a
// nudge) sends the subscriber straight back to polling; otherwise it probes
// first.
func TestBackoffPollsAgainAfterAnAnnouncedAppend(t *testing.T) {
	l := NewListener(nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w, stop := l.wake("g", []string{"agent.created"})
	defer stop()
	probes := 0
	b := &wakeBackoff{waker: w, closing: make(chan struct{}), fallback: time.Hour,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), probe: func() lookahead { probes++; return due }}

	l.WakeLocal([]string{"agent.created"})
	if wait := b.HandleError(nil, false, nil); wait != 0 || probes != 0 {
		t.Fatalf("after an announced append: wait %v, %d probes; want to poll at once, unprobed", wait, probes)
	}
	select {
	case <-w.ch:
		t.Fatal("the announcement's signal was left to wake a probe")
	default:
	}
	l.nudge([]string{"g"})
	if b.HandleError(nil, false, nil); probes != 1 {
		t.Errorf("after a nudge: %d probes, want 1", probes)
	}
	l.WakeLocal([]string{"user.signed_up"}) // not a type it handles
	if b.HandleError(nil, false, nil); probes != 2 {
		t.Errorf("after another projection's append: %d probes, want 1 more", probes)
	}
	l.WakeLocal([]string{"agent.created"})
	if b.HandleError(nil, true, nil); probes != 3 {
		t.Errorf("after an empty poll: %d probes, want 1 more", probes)
	}
}
