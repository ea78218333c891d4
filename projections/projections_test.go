package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// debugLogged is a logger that keeps every line down to debug, watermill's
// included: its debug lines mark the steps of a router's stop.
func debugLogged() (*testlog.Buffer, *slog.Logger) {
	logs := &testlog.Buffer{}
	return logs, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// awaitLogged waits until one line of logs holds every one of parts, each
// whole (up to a space or the line's end: projection=a is not projection=ab).
func awaitLogged(t *testing.T, logs *testlog.Buffer, what string, parts ...string) {
	t.Helper()
	poll.Must(t, 10*time.Second, what, func() bool {
	lines:
		for line := range strings.Lines(logs.String()) {
			line = strings.TrimSuffix(line, "\n") + " "
			for _, p := range parts {
				if !strings.Contains(line, p+" ") {
					continue lines
				}
			}
			return true
		}
		return false
	})
}

// awaitStopped waits until the router of a stalled projection has stopped:
// its subscriber is closed, its polls' transactions have ended, and nothing
// more of the log can be applied.
func awaitStopped(t *testing.T, logs *testlog.Buffer, name string) {
	t.Helper()
	awaitLogged(t, logs, "projection "+name+"'s subscriber closed", `msg="Subscriber closed"`, "projection="+name)
}

// start runs the projections on a database of the test's own.
func start(t *testing.T, pool *pgxpool.Pool, maxAttempts int, ps ...projections.Projection) (*projections.Listener, *projections.Runner) {
	t.Helper()
	return startLogged(t, pool, quiet, maxAttempts, ps...)
}

// startLogged is start with the given logger.
func startLogged(t *testing.T, pool *pgxpool.Pool, logger *slog.Logger, maxAttempts int, ps ...projections.Projection) (*projections.Listener, *projections.Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := projections.NewListener(pool, logger)
	r := projections.NewRunner(pool, l, events.NewRegistry(), logger, ps...)
	r.MaxAttempts = maxAttempts
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return l, r
}

func appendAgent(t *testing.T, pool *pgxpool.Pool, id int64, name string) eventstore.Position {
	t.Helper()
	return appendAgentAt(t, pool, id, name, eventstore.NoStream)
}

// appendAgentAt appends an agent.created event to the agent's stream at the
// expected version.
func appendAgentAt(t *testing.T, pool *pgxpool.Pool, id int64, name string, expected eventstore.ExpectedVersion) eventstore.Position {
	t.Helper()
	data, _ := json.Marshal(events.AgentCreated{AgentID: id, OwnerID: 1, Name: name, SystemPrompt: "p", IsActive: true})
	res, err := postgres.New(pool, nil).Append(context.Background(), eventstore.StreamName("agent", id), expected,
		[]eventstore.EventData{{ID: uuid.New(), Type: "agent.created", SchemaVersion: 1, Data: data, RecordedAt: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Position
}

func waitFor(t *testing.T, l *projections.Listener, pos eventstore.Position, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitFor(ctx, pos, group); err != nil {
		t.Fatalf("projection %s did not reach %v: %v", group, pos, err)
	}
}

func TestAgentsProjectionAppliesAndAnnounces(t *testing.T) {
	pool := pgtest.Fresh(t)
	l, _ := start(t, pool, 5, projections.Agents())
	pos := appendAgent(t, pool, 1, "Tutor")
	waitFor(t, l, pos, projections.AgentsProjection)
	var name string
	if err := pool.QueryRow(context.Background(), `SELECT name FROM agents WHERE id = 1`).Scan(&name); err != nil || name != "Tutor" {
		t.Fatalf("agents row: %q, %v", name, err)
	}
	var committed string
	if err := pool.QueryRow(context.Background(),
		`SELECT last_processed_transaction_id::text || '-' || offset_acked FROM projection_offsets WHERE consumer_group = $1`,
		projections.AgentsProjection).Scan(&committed); err != nil || committed != pos.String() {
		t.Errorf("committed offset %q, want %q (%v)", committed, pos, err)
	}
}

// A handler that fails after writing must leave nothing behind, one that
// fails before writing has nothing to undo: the retry writes once, so each
// event is applied exactly once.
func TestFailedAttemptIsRolledBack(t *testing.T) {
	pool := pgtest.Fresh(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE applied (event_id TEXT NOT NULL, agent_id BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	attempts := map[int64]int{}
	flaky := projections.Projection{Name: "flaky", Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			mu.Lock()
			attempts[e.AgentID]++
			attempt := attempts[e.AgentID]
			mu.Unlock()
			if e.AgentID%2 == 0 && attempt == 1 {
				return errors.New("transient failure before writing")
			}
			if _, err := tx.Exec(ctx, `INSERT INTO applied VALUES ($1, $2)`, m.EventID, e.AgentID); err != nil {
				return err
			}
			if attempt < 3 {
				return errors.New("transient failure after writing")
			}
			return nil
		}),
	}}
	l, _ := start(t, pool, 5, flaky)
	var last eventstore.Position
	for id := int64(1); id <= 3; id++ {
		last = appendAgent(t, pool, id, "a")
	}
	waitFor(t, l, last, "flaky")
	var rows, distinct int
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT event_id) FROM applied`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || distinct != 3 {
		t.Errorf("applied %d rows for %d events, want exactly 3 for 3", rows, distinct)
	}
}

// An event that never applies stops its projection where it stands: the
// events before it are applied, none after it, and it is reported.
func TestPoisonEventStopsItsProjection(t *testing.T) {
	pool := pgtest.Fresh(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE seen (agent_id BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	picky := projections.Projection{Name: "picky", Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			if e.Name == "poison" {
				return errors.New("cannot apply this event")
			}
			_, err := tx.Exec(ctx, `INSERT INTO seen VALUES ($1)`, e.AgentID)
			return err
		}),
	}}
	logs, logger := debugLogged()
	l, r := startLogged(t, pool, logger, 2, picky, projections.Agents())
	before := appendAgent(t, pool, 1, "fine")
	waitFor(t, l, before, "picky")
	appendAgent(t, pool, 2, "poison")
	after := appendAgent(t, pool, 3, "fine")
	// The other projection is not held up.
	waitFor(t, l, after, projections.AgentsProjection)

	awaitStall(t, r, "picky")
	awaitStopped(t, logs, "picky") // so that it could not move on after the checks below
	var ids []int64
	rows, _ := pool.Query(context.Background(), `SELECT agent_id FROM seen ORDER BY agent_id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != 1 {
		t.Errorf("applied agents %v, want only [1]: nothing after the poison event", ids)
	}
	if got := l.Position("picky"); got != before {
		t.Errorf("picky committed %v, want %v (just before the poison event)", got, before)
	}
}

// Appends wake only the projections that handle their events. A request
// that waits for another projection at such an event's position nudges it,
// and it moves its offset past what it does not handle: no waiting for the
// fallback probe (switched off here), and no poll.
func TestWaitingForAProjectionThatHandlesNoneOfTheEvents(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx, cancel := context.WithCancel(context.Background())
	l := projections.NewListener(pool, quiet)
	users := projections.Projection{Name: "users-only", Handlers: projections.Users().Handlers[:1]}
	r := projections.NewRunner(pool, l, events.NewRegistry(), quiet, users, projections.Agents())
	r.Fallback = time.Hour
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	first := appendAgent(t, pool, 1, "Tutor")
	waitFor(t, l, first, projections.AgentsProjection)
	for id := int64(2); id <= 5; id++ {
		pos := appendAgent(t, pool, id, "Tutor")
		start := time.Now()
		waitFor(t, l, pos, "users-only")
		// Bounded loosely: the horizon, which other packages' tests share,
		// may hold the event back for a while (a missed nudge waits an hour).
		if d := time.Since(start); d > 8*time.Second {
			t.Fatalf("waited %v for a projection with nothing to apply", d)
		}
	}
}

// A handler still running when the projections shut down finishes in its
// transaction, which then ends whole: its writes and the offset past its
// event commit together, or neither does (the event is applied again at the
// next start). watermill-sql would end the transaction as soon as its
// subscription's context ended, under the handler's feet (a data race on
// the connection, or a half-applied event committed).
func TestShutdownWaitsForTheHandlerRunning(t *testing.T) {
	pool := pgtest.Fresh(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE drained (id BIGINT)`); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var handlerErr error
	slow := projections.Projection{Name: "slow", Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			close(entered)
			<-release
			_, handlerErr = tx.Exec(ctx, `INSERT INTO drained (id) VALUES ($1)`, e.AgentID)
			return handlerErr
		}),
	}}
	appendAgent(t, pool, 7, "Tutor")
	logs, shutdown := run(pool, slow)
	shutdownWhileHeld(t, logs, shutdown, entered, release)

	if handlerErr != nil {
		t.Fatalf("the handler's write after shutdown began: %v", handlerErr)
	}
	var rows, acked int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM drained`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(context.Background(),
		`SELECT coalesce(max(offset_acked), 0) FROM projection_offsets WHERE consumer_group = 'slow'`).Scan(&acked); err != nil {
		t.Fatal(err)
	}
	if (rows == 1) != (acked != 0) {
		t.Fatalf("after shutdown: %d rows written, offset %d; want both or neither", rows, acked)
	}
}
