package history_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/history"
	"lectern/pgtest"
	"lectern/poll"
)

func readAll(t *testing.T, s eventstore.Store) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	var after eventstore.Position
	for {
		page, err := s.ReadAll(context.Background(), after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Position
	}
}

// sourceLog reads the whole PostgreSQL log. ReadAll stops below the
// pg_snapshot_xmin horizon, which is the cluster's: another test package's
// open transaction hides events committed after it began, for as long as it
// stays open. LogEnd waits for the transactions in flight to end first.
func sourceLog(t *testing.T, s *postgres.Store) []eventstore.RecordedEvent {
	t.Helper()
	if _, err := s.LogEnd(context.Background()); err != nil {
		t.Fatal(err)
	}
	return readAll(t, s)
}

// ignorePosition compares events as copied: positions are each store's own.
var ignorePosition = cmpopts.IgnoreFields(eventstore.RecordedEvent{}, "Position")

func TestCopy(t *testing.T) {
	ctx := context.Background()
	src := postgres.New(pgtest.Fresh(t), nil)
	t.Cleanup(src.Close)
	dst := esdbfake.OpenStore(t)

	appendTo := func(stream string, n int) {
		t.Helper()
		evs := make([]eventstore.EventData, n)
		for i := range evs {
			evs[i] = eventstore.EventData{ID: uuid.New(), Type: "thing.happened", SchemaVersion: 1 + i%2,
				Data:       json.RawMessage(fmt.Sprintf(`{"stream": %q, "i": %d, "text": %q}`, stream, i, strings.Repeat("x", i*100))),
				Metadata:   eventstore.Metadata{UserID: 7, RequestID: "r-1", CorrelationID: "c-" + stream},
				RecordedAt: t0.Add(time.Duration(i) * 1500 * time.Nanosecond)}
		}
		if _, err := src.Append(ctx, stream, eventstore.Any, evs); err != nil {
			t.Fatal(err)
		}
	}
	streams := []string{"user-1", "class-1", "user-2", "agent-9"}
	// Interleaved streams and multi-event appends; more than a page in all.
	for round := range 40 {
		for i, s := range streams {
			appendTo(s, 1+(round+i)%5)
		}
	}
	source := sourceLog(t, src)

	var last int
	n, err := history.Copy(ctx, src, dst, func(n int) { last = n })
	if err != nil {
		t.Fatal(err)
	}
	if n != len(source) || last != len(source) {
		t.Fatalf("first copy: %d copied, progress %d; want %d", n, last, len(source))
	}
	check := func() {
		t.Helper()
		target := readAll(t, dst)
		if diff := cmp.Diff(source, target, ignorePosition); diff != "" {
			t.Fatalf("target log differs from source (-source +target):\n%s", diff)
		}
		for _, s := range streams {
			want, err := src.ReadStream(ctx, s, eventstore.Forwards, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dst.ReadStream(ctx, s, eventstore.Forwards, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, ignorePosition); diff != "" {
				t.Fatalf("stream %s differs (-source +target):\n%s", s, diff)
			}
		}
	}
	check()

	// Again: every event is a retry, nothing is written.
	n, err = history.Copy(ctx, src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("second copy wrote %d events, want 0", n)
	}
	check()

	// The source grew: only the new events are copied.
	appendTo("user-1", 3)
	appendTo("course-5", 2)
	source = sourceLog(t, src)
	streams = append(streams, "course-5")
	if n, err = history.Copy(ctx, src, dst, nil); err != nil || n != 5 {
		t.Fatalf("copy after growth: %d, %v; want 5 events", n, err)
	}
	check()
}

func TestCopyConflict(t *testing.T) {
	ctx := context.Background()
	src := postgres.New(pgtest.Fresh(t), nil)
	t.Cleanup(src.Close)
	dst := esdbfake.OpenStore(t)
	ev := func() []eventstore.EventData {
		return []eventstore.EventData{{ID: uuid.New(), Type: "user.signed_up", SchemaVersion: 1, Data: json.RawMessage(`{}`), RecordedAt: t0}}
	}
	if _, err := src.Append(ctx, "user-1", eventstore.NoStream, ev()); err != nil {
		t.Fatal(err)
	}
	// The target already has a different first event in that stream.
	if _, err := dst.Append(ctx, "user-1", eventstore.NoStream, ev()); err != nil {
		t.Fatal(err)
	}
	if _, err := history.Copy(ctx, src, dst, nil); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Fatalf("copy onto a diverging stream: %v, want ErrWrongExpectedVersion", err)
	}
}

// CopyCheckpoints turns each projection's position in the PostgreSQL log
// into the EventStoreDB position of the same event, and leaves a checkpoint a
// service on EventStoreDB already wrote.
func TestCopyCheckpoints(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	src := postgres.New(pool, nil)
	t.Cleanup(src.Close)
	dst := esdbfake.OpenStore(t)
	var positions []eventstore.Position // the source position of each event
	for i := range 6 {
		res, err := src.Append(ctx, fmt.Sprintf("thing-%d", i%2), eventstore.Any, []eventstore.EventData{
			{ID: uuid.New(), Type: "thing.happened", SchemaVersion: 1, Data: json.RawMessage(`{}`), RecordedAt: t0}})
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, res.Position)
	}
	if _, err := history.Copy(ctx, src, dst, nil); err != nil {
		t.Fatal(err)
	}
	target := readAll(t, dst)
	if len(target) != len(positions) {
		t.Fatalf("target holds %d events, want %d", len(target), len(positions))
	}
	setOffset := func(group string, p eventstore.Position) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
			VALUES ($1, $2, $3::text::xid8)`, group, int64(p.Prepare), fmt.Sprint(p.Commit)); err != nil {
			t.Fatal(err)
		}
	}
	setOffset("at-the-third", positions[2])
	setOffset("at-the-end", positions[5])
	setOffset("already-on-esdb", positions[1])
	if _, err := pool.Exec(ctx, `INSERT INTO esdb_checkpoints VALUES ('already-on-esdb', 7, 7)`); err != nil {
		t.Fatal(err)
	}

	n, err := history.CopyCheckpoints(ctx, pool, dst)
	if err != nil || n != 2 {
		t.Fatalf("CopyCheckpoints: %d, %v; want 2 recorded", n, err)
	}
	want := map[string]eventstore.Position{
		"at-the-third":    target[2].Position,
		"at-the-end":      target[5].Position,
		"already-on-esdb": {Commit: 7, Prepare: 7},
	}
	for group, p := range want {
		var c, pr int64
		if err := pool.QueryRow(ctx, `SELECT commit_position, prepare_position FROM esdb_checkpoints WHERE consumer_group = $1`, group).Scan(&c, &pr); err != nil {
			t.Fatalf("%s: %v", group, err)
		}
		if got := (eventstore.Position{Commit: uint64(c), Prepare: uint64(pr)}); got != p {
			t.Errorf("%s: checkpoint %v, want %v", group, got, p)
		}
	}
	// Again: nothing changes.
	if n, err := history.CopyCheckpoints(ctx, pool, dst); err != nil || n != 0 {
		t.Errorf("second CopyCheckpoints: %d, %v; want 0", n, err)
	}
}

// The cause of the copy's old intermittent failure: a transaction left open
// anywhere in the cluster (here in another database) holds back the
// pg_snapshot_xmin horizon below which the PostgreSQL log reads, so events
// committed after it began do not read yet. A copy that took "the log reads
// empty" for "the log is copied" ended at once, short, reporting success.
// Copy waits for the transactions in flight instead, and copies them all.
func TestCopyWaitsForTransactionsInFlight(t *testing.T) {
	ctx := context.Background()
	// The source's pool counts LogEnd's checks of whether the transactions
	// in flight when it began have ended.
	var checks horizonChecks
	cfg := pgtest.Fresh(t).Config()
	cfg.ConnConfig.Tracer = &checks
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	src := postgres.New(pool, nil)
	t.Cleanup(src.Close)
	dst := esdbfake.OpenStore(t)

	other := pgtest.Fresh(t)
	open, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = open.Rollback(ctx) }()
	if _, err := open.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil { // it takes a transaction id
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := src.Append(ctx, "user-1", eventstore.Any, []eventstore.EventData{
			{ID: uuid.New(), Type: "thing.happened", SchemaVersion: 1, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), RecordedAt: t0}}); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := history.Copy(ctx, src, dst, nil)
		done <- result{n, err}
	}()
	// A second check shows the first found the open transaction in flight:
	// Copy has looked, and waits.
	poll.Must(t, 10*time.Second, "Copy returns or checks the horizon twice", func() bool {
		return len(done) > 0 || checks.n.Load() >= 2
	})
	select {
	case r := <-done:
		t.Fatalf("Copy returned (%d, %v) while a transaction that began before the events was open", r.n, r.err)
	default:
	}
	if err := open.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 3 {
		t.Fatalf("Copy: %d, %v; want the 3 events", r.n, r.err)
	}
	if got := readAll(t, dst); len(got) != 3 {
		t.Fatalf("the target holds %d events, want 3", len(got))
	}
}

// horizonChecks counts the queries of postgres.Store.LogEnd that check
// whether the pg_snapshot_xmin horizon has passed the transactions in flight
// when it began.
type horizonChecks struct{ n atomic.Int64 }

func (h *horizonChecks) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "pg_snapshot_xmin(pg_current_snapshot()) >=") {
		h.n.Add(1)
	}
	return ctx
}

func (h *horizonChecks) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The copy's intermittent failure in CI ("wrong expected version ... got
// no_stream", or new events read before old ones) was the log's order: the
// PostgreSQL store sorted transaction ids as text, so whenever they crossed
// a power of ten while a test ran (a fresh cluster's ids pass 1 000 and
// 10 000 early on) the log read "10" before "9" and Copy appended a stream's
// later version before its first. The events here carry such ids.
func TestCopyAcrossPowersOfTen(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	src := postgres.New(pool, nil)
	t.Cleanup(src.Close)
	dst := esdbfake.OpenStore(t)
	for i, txid := range []string{"9", "10", "99", "100", "101"} {
		if _, err := pool.Exec(ctx, `
			INSERT INTO events (uuid, payload, metadata, transaction_id, stream_id, version, event_type, recorded_at)
			VALUES (gen_random_uuid(), $2, '{}', $1::text::xid8, 'user-1', $3, 'thing.happened', $4)`,
			txid, fmt.Sprintf(`{"i":%d}`, i), i+1, t0); err != nil {
			t.Fatal(err)
		}
	}
	source := sourceLog(t, src)
	if n, err := history.Copy(ctx, src, dst, nil); err != nil || n != 5 {
		t.Fatalf("Copy: %d, %v; want 5 events", n, err)
	}
	if diff := cmp.Diff(source, readAll(t, dst), ignorePosition); diff != "" {
		t.Fatalf("target log differs from source (-source +target):\n%s", diff)
	}
	for i, e := range source {
		if e.Version != int64(i+1) {
			t.Fatalf("source event %d is version %d: the log is out of order", i, e.Version)
		}
	}
}
