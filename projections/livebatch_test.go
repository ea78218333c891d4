package projections_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/projections"
	"lectern/testlog"
)

// appendVersions appends n agent.created events to each of the given
// agents' streams, interleaved across streams, and returns the last position.
func appendVersions(t *testing.T, pool *pgxpool.Pool, agents []int64, n int) eventstore.Position {
	t.Helper()
	var last eventstore.Position
	for v := range n {
		for _, id := range agents {
			last = appendAgentAt(t, pool, id, fmt.Sprintf("v%d", v+1), eventstore.Exact(int64(v)))
		}
	}
	return last
}

// A projection whose handlers follow the replay's rule takes a poll's events
// as sets: one call for events of different streams, each stream's events
// in their order, every event applied once.
func TestLiveBatchAppliesEventsSetWise(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE batched (seq BIGSERIAL, stream TEXT NOT NULL, version BIGINT NOT NULL, UNIQUE (stream, version))`)
	var mu sync.Mutex
	var calls [][]events.Meta
	p := projections.Projection{Name: "batched", Tables: []string{"batched"}, Handlers: []projections.GroupHandler{
		projections.OnSet(func(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.AgentCreated) error {
			mu.Lock()
			calls = append(calls, ms)
			mu.Unlock()
			streams, versions := make([]string, len(ms)), make([]int64, len(ms))
			for i, m := range ms {
				streams[i], versions[i] = m.StreamID, m.Version
			}
			_, err := tx.Exec(ctx, `INSERT INTO batched (stream, version) SELECT * FROM unnest($1::text[], $2::bigint[]) ORDER BY 1`, streams, versions)
			return err
		}),
	}}
	// Written before the projection starts: its first poll reads them all.
	last := appendVersions(t, pool, []int64{1, 2, 3, 4, 5}, 4)
	awaitVisible(t, pool)
	l, _ := start(t, pool, 5, p)
	waitFor(t, l, last, "batched")

	rows, err := pool.Query(context.Background(), `SELECT stream, version FROM batched ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	type applied struct {
		Stream  string
		Version int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[applied])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 {
		t.Fatalf("applied %d events, want 20: %v", len(got), got)
	}
	next := map[string]int64{}
	for _, a := range got {
		if a.Version != next[a.Stream]+1 {
			t.Fatalf("%s version %d applied after version %d: %v", a.Stream, a.Version, next[a.Stream], got)
		}
		next[a.Stream] = a.Version
	}
	mu.Lock()
	defer mu.Unlock()
	widest := 0
	for _, ms := range calls {
		widest = max(widest, len(ms))
		seen := map[string]bool{}
		for _, m := range ms {
			if seen[m.StreamID] {
				t.Errorf("one call held two events of %s", m.StreamID)
			}
			seen[m.StreamID] = true
		}
	}
	if widest < 2 {
		t.Errorf("the handler was called with one event at a time (%d calls): not batched", len(calls))
	}
}

// A batch the database refuses is rolled back whole and its events are
// applied again one at a time, each exactly once.
func TestLiveBatchRefusedIsAppliedOneAtATime(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE applied (event_id TEXT NOT NULL UNIQUE, agent_id BIGINT NOT NULL)`)
	var mu sync.Mutex
	attempts := map[int64]int{}
	p := projections.Projection{Name: "flaky_batch", Tables: []string{"applied"}, Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			mu.Lock()
			attempts[e.AgentID]++
			first := attempts[e.AgentID] == 1
			mu.Unlock()
			if _, err := tx.Exec(ctx, `INSERT INTO applied VALUES ($1, $2)`, m.EventID, e.AgentID); err != nil {
				return err
			}
			if e.AgentID == 3 && first {
				_, err := tx.Exec(ctx, `SELECT 1/0`) // refused when the batch is sent
				return err
			}
			return nil
		}),
	}}
	last := appendVersions(t, pool, []int64{1, 2, 3, 4, 5}, 1)
	l, _ := start(t, pool, 5, p)
	waitFor(t, l, last, "flaky_batch")
	var rows, distinct int
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT agent_id) FROM applied`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 5 || distinct != 5 {
		t.Errorf("applied %d rows for %d agents, want 5 for 5", rows, distinct)
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts[3] < 2 {
		t.Errorf("agent 3 was attempted %d times: the refused batch was not applied again", attempts[3])
	}
}

// pickyBatch is a fresh database and a batched projection ("picky_batch")
// whose table refuses agents named "poison".
func pickyBatch(t *testing.T) (*pgxpool.Pool, projections.Projection) {
	t.Helper()
	pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL, name TEXT NOT NULL CHECK (name <> 'poison'))`)
	return pool, projections.Projection{Name: "picky_batch", Tables: []string{"seen"}, Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			_, err := tx.Exec(ctx, `INSERT INTO seen VALUES ($1, $2)`, e.AgentID, e.Name)
			return err
		}),
	}}
}

// A poison event in a batch stops its projection just before it: the events
// before it in the same batch are applied and committed, none after it.
func TestLiveBatchPoisonEventStopsItsProjection(t *testing.T) {
	pool, p := pickyBatch(t)
	appendAgent(t, pool, 1, "fine")
	before := appendAgent(t, pool, 2, "fine")
	appendAgent(t, pool, 3, "poison")
	appendAgent(t, pool, 4, "fine")
	logs, logger := debugLogged()
	l, r := startLogged(t, pool, logger, 2, p)

	awaitStall(t, r, "picky_batch")
	awaitStopped(t, logs, "picky_batch") // so that it could not move on after the checks below
	rows, _ := pool.Query(context.Background(), `SELECT agent_id FROM seen ORDER BY agent_id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != 1 || ids[1] != 2 {
		t.Errorf("applied agents %v, want [1 2]: those before the poison event, none after", ids)
	}
	// The commit's notification may reach the listener after the stop.
	if !poll.Until(10*time.Second, func() bool { return l.Position("picky_batch") == before }) {
		t.Errorf("committed %v, want %v (just before the poison event)", l.Position("picky_batch"), before)
	}
}

// After a failed batch the projection takes every message of that poll
// again one at a time, those of types it does not handle included: a poison
// event behind many of them stops it after one failed batch, not after a
// batch failing again and again a few messages further on.
func TestLiveBatchFailureRetakesTheWholePollCarefully(t *testing.T) {
	pool, p := pickyBatch(t)
	appendAgent(t, pool, 1, "fine")
	store := postgres.New(pool, nil)
	var before eventstore.Position
	for i := range 20 { // not this projection's
		res, err := store.Append(context.Background(), eventstore.StreamName("class", int64(i+1)), eventstore.NoStream,
			[]eventstore.EventData{{ID: uuid.New(), Type: "class.created", SchemaVersion: 1, Data: []byte(`{}`), RecordedAt: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		before = res.Position
	}
	appendAgent(t, pool, 2, "poison")
	appendAgent(t, pool, 3, "fine")
	awaitVisible(t, pool)
	var logs testlog.Buffer
	l, r := startLogged(t, pool, slog.New(slog.NewTextHandler(&logs, nil)), 2, p)

	awaitStall(t, r, "picky_batch")
	// The commit's notification may reach the listener after the stall.
	if !poll.Until(10*time.Second, func() bool { return l.Position("picky_batch") == before }) {
		t.Errorf("committed %v, want %v (just before the poison event)", l.Position("picky_batch"), before)
	}
	if n := strings.Count(logs.String(), `msg="projection batch failed`); n != 1 {
		t.Errorf("%d failed batches before the stop, want 1:\n%s", n, logs.String())
	}
}

// A batch being applied when the projections shut down is applied and
// committed whole, with its offset.
func TestShutdownFinishesTheBatchUnderWay(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE drained (id BIGINT)`)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p := projections.Projection{Name: "slow_batch", Tables: []string{"drained"}, Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			once.Do(func() { close(entered); <-release })
			_, err := tx.Exec(ctx, `INSERT INTO drained (id) VALUES ($1)`, e.AgentID)
			return err
		}),
	}}
	appendAgent(t, pool, 7, "Tutor")
	last := appendAgent(t, pool, 8, "Tutor")
	awaitVisible(t, pool)
	logs, shutdown := run(pool, p)
	shutdownWhileHeld(t, logs, shutdown, entered, release)

	var rows int64
	var committed string
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM drained`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(context.Background(),
		`SELECT last_processed_transaction_id::text || '-' || offset_acked FROM projection_offsets WHERE consumer_group = 'slow_batch'`).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || committed != last.String() {
		t.Fatalf("after shutdown: %d rows, offset %s; want 2 rows and offset %s", rows, committed, last)
	}
}

// A poll waiting on the database when the projections shut down runs to its
// end: cut short, its statement would close its connection, and the poll's
// commit would then fail, logged as an error.
func TestShutdownLetsAWaitingPollFinish(t *testing.T) {
	handlers := []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			_, err := tx.Exec(ctx, `INSERT INTO polled (id) VALUES ($1)`, e.AgentID)
			return err
		}),
	}
	t.Run("batched", func(t *testing.T) {
		shutdownWhilePollWaits(t, projections.Projection{Name: "waiting_poll", Tables: []string{"polled"}, Handlers: handlers})
	})
	t.Run("one at a time", func(t *testing.T) { // no tables: never batched
		shutdownWhilePollWaits(t, projections.Projection{Name: "waiting_poll", Handlers: handlers})
	})
}

// begins records the context each connection's last transaction began
// with, by the connection's backend pid: a poll's is the poll's context.
type begins struct {
	mu   sync.Mutex
	ctxs map[uint32]context.Context
}

func (b *begins) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(data.SQL)), "begin") {
		b.mu.Lock()
		b.ctxs[conn.PgConn().PID()] = ctx
		b.mu.Unlock()
	}
	return ctx
}

func (b *begins) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (b *begins) of(pid uint32) context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctxs[pid]
}

func shutdownWhilePollWaits(t *testing.T, p projections.Projection) {
	fresh := freshWith(t, `CREATE TABLE polled (id BIGINT)`)
	// The projections' pool records the contexts their transactions begin with.
	traced := &begins{ctxs: map[uint32]context.Context{}}
	cfg := fresh.Config()
	cfg.ConnConfig.Tracer = traced
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs testlog.Buffer
	first := appendAgent(t, pool, 1, "Tutor")
	l, shutdown := runLogged(pool, slog.New(slog.NewJSONHandler(&logs, nil)), p)
	waitFor(t, l, first, "waiting_poll")

	// A poll first takes its group's advisory lock (postgres.LockOffset):
	// with it held here, as a replay's swap holds it, the next poll waits.
	ctx := context.Background()
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if err := postgres.LockOffset(ctx, holder, "waiting_poll"); err != nil {
		t.Fatal(err)
	}
	appendAgent(t, pool, 2, "Tutor")
	var waiting uint32 // the waiting poll's backend
	poll.Must(t, 10*time.Second, "a poll waits for its group's lock", func() bool {
		err := pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%projection_offsets%'`).Scan(&waiting)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return err == nil
	})
	polling := traced.of(waiting)
	if polling == nil {
		t.Fatal("the waiting poll's transaction began on no traced connection")
	}
	shutdown(func() {
		defer func() { _ = holder.Rollback(ctx) }()
		// The lock goes once the shutdown has ended the poll's context: a
		// statement running on it would be cut short from then on.
		select {
		case <-polling.Done():
		case <-time.After(10 * time.Second):
			t.Error("the shutdown did not end the waiting poll's context")
		}
	})
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("the shutdown logged an error:\n%s", logs.String())
	}
}

// awaitVisible waits until every event appended so far is visible to a poll,
// so that a projection started next takes them in its first poll: a
// transaction of another test's database, open between two appends, would
// hold the cluster's pg_snapshot_xmin horizon back between them.
func awaitVisible(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := postgres.New(pool, nil).LogEnd(ctx); err != nil {
		t.Fatal(err)
	}
}

// awaitStall waits until the runner reports the projection stopped at an
// event, with the error.
func awaitStall(t *testing.T, r *projections.Runner, name string) {
	t.Helper()
	stalledWithError := func() bool {
		for _, s := range r.Statuses() {
			if s.Name == name && s.Stalled && s.Error != "" {
				return true
			}
		}
		return false
	}
	if !poll.Until(10*time.Second, stalledWithError) {
		t.Fatalf("projection %s not reported stalled: %+v", name, r.Statuses())
	}
}

// shutdownWhileHeld waits until a handler has entered (and holds on until
// release is closed), begins the shutdown, and lets the handler go on once
// the shutdown has reached the close of the projection's subscriber: where,
// but for the draining, watermill-sql would end the handler's transaction
// under it. logs are the projections' (run's).
func shutdownWhileHeld(t *testing.T, logs *testlog.Buffer, shutdown func(during func()), entered, release chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not called")
	}
	shutdown(func() {
		defer close(release)
		awaitLogged(t, logs, "the shutdown closing the subscriber", `msg="Waiting for subscriber to close"`)
	})
}

// run starts a listener and the projections, logging down to debug; shutdown
// ends them, calls during (while they stop), and returns once they have
// stopped.
func run(pool *pgxpool.Pool, ps ...projections.Projection) (logs *testlog.Buffer, shutdown func(during func())) {
	logs, logger := debugLogged()
	_, shutdown = runLogged(pool, logger, ps...)
	return logs, shutdown
}

// runLogged is run with the given logger, and returns the listener too.
func runLogged(pool *pgxpool.Pool, logger *slog.Logger, ps ...projections.Projection) (*projections.Listener, func(during func())) {
	ctx, cancel := context.WithCancel(context.Background())
	l := projections.NewListener(pool, logger)
	r := projections.NewRunner(pool, l, events.NewRegistry(), logger, ps...)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	return l, func(during func()) {
		cancel()
		during()
		wg.Wait()
	}
}

// applyModes are the two ways a projection applies the events it receives
// (seen is its table in live batches): a test of what must hold either way
// runs once in each.
var applyModes = []struct {
	name   string
	tables []string
}{{"one at a time", nil}, {"in live batches", []string{"seen"}}}

// freshWith is a fresh database with the given tables.
func freshWith(t *testing.T, ddl ...string) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.Fresh(t)
	for _, q := range ddl {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatal(errors.Join(fmt.Errorf("%s", q), err))
		}
	}
	return pool
}
