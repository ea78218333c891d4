package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
	"lectern/poll"
)

var esdbQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// esdbProjection is a running projection fed by an ESDBSubscriber through a
// router built as Runner.router builds it (the runner's savepoint and retry
// middleware, the cqrs group processor), with the subscriber swapped in.
type esdbProjection struct {
	runner *Runner
	stop   func()
}

// runESDB runs p over EventStoreDB at url; seen (if set) sees every message
// the router receives, handled or not.
func runESDB(t *testing.T, pool *pgxpool.Pool, l *Listener, url string, maxAttempts int, p Projection, seen func(*message.Message)) *esdbProjection {
	t.Helper()
	store, err := esdb.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(pool, l, events.NewRegistry(), esdbQuiet, p)
	r.MaxAttempts = maxAttempts
	wlog := watermill.NewSlogLogger(esdbQuiet)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, wlog)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeRouter := func() error {
		var err error
		once.Do(func() { err = router.Close() })
		return err
	}
	if seen != nil {
		router.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
			return func(msg *message.Message) ([]*message.Message, error) {
				seen(msg)
				return h(msg)
			}
		})
	}
	handled := map[string]bool{}
	for _, h := range p.Handlers {
		handled[marshaler{}.Name(h.NewEvent())] = true
	}
	router.AddMiddleware(r.attempts(p.Name, p.OnPoison, handled, closeRouter))
	newSub := ESDBSubscribers(store, pool, l, esdbQuiet)
	processor, err := cqrs.NewEventGroupProcessorWithConfig(router, cqrs.EventGroupProcessorConfig{
		GenerateSubscribeTopic: func(cqrs.EventGroupProcessorGenerateSubscribeTopicParams) (string, error) {
			return postgres.Topic, nil
		},
		SubscriberConstructor: func(params cqrs.EventGroupProcessorSubscriberConstructorParams) (message.Subscriber, error) {
			return newSub(params.EventGroupName)
		},
		AckOnUnknownEvent: true,
		Marshaler:         marshaler{},
		Logger:            wlog,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := processor.AddHandlersGroup(p.Name, p.Handlers...); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = router.Run(context.Background())
	}()
	select {
	case <-router.Running():
	case <-done:
		t.Fatal("router did not start")
	}
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			_ = closeRouter()
			<-done
			_ = store.Close()
		})
	}
	t.Cleanup(stop)
	return &esdbProjection{runner: r, stop: stop}
}

// startListener runs a Listener until the test ends.
func startListener(t *testing.T, pool *pgxpool.Pool) *Listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := NewListener(pool, esdbQuiet)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func openStore(t *testing.T, url string) *esdb.Store {
	t.Helper()
	s, err := esdb.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func appendESDBAgent(t *testing.T, s *esdb.Store, id int64, name string) eventstore.Position {
	t.Helper()
	data, _ := json.Marshal(events.AgentCreated{AgentID: id, OwnerID: 1, Name: name, SystemPrompt: "p", IsActive: true})
	res, err := s.Append(context.Background(), eventstore.StreamName("agent", id), eventstore.NoStream,
		[]eventstore.EventData{{ID: uuid.New(), Type: "agent.created", SchemaVersion: 1, Data: data,
			Metadata:   eventstore.Metadata{CorrelationID: "corr-" + name, UserID: 7},
			RecordedAt: time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC)}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Position
}

// appliedProjection counts every application of every event in esdb_applied,
// so a re-application shows; a handler given name "poison" writes, then fails.
func appliedProjection(t *testing.T, pool *pgxpool.Pool, name string) Projection {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS esdb_applied (
		event_id TEXT PRIMARY KEY, agent_id BIGINT NOT NULL, stream TEXT NOT NULL, version BIGINT NOT NULL,
		position TEXT NOT NULL, recorded_at TIMESTAMPTZ NOT NULL, correlation_id TEXT NOT NULL, user_id BIGINT NOT NULL,
		applied INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return Projection{Name: name, Handlers: []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			if _, err := tx.Exec(ctx, `INSERT INTO esdb_applied VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1)
				ON CONFLICT (event_id) DO UPDATE SET applied = esdb_applied.applied + 1`,
				m.EventID, e.AgentID, m.StreamID, m.Version, m.Position, m.RecordedAt, m.CorrelationID, m.UserID); err != nil {
				return err
			}
			if e.Name == "poison" {
				return errors.New("cannot apply this event")
			}
			return nil
		}),
	}}
}

func waitESDB(t *testing.T, l *Listener, pos eventstore.Position, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitFor(ctx, pos, group); err != nil {
		t.Fatalf("projection %s did not reach %v: %v (at %v)", group, pos, err, l.Position(group))
	}
}

func checkpoint(t *testing.T, pool *pgxpool.Pool, group string) eventstore.Position {
	t.Helper()
	p, err := LoadESDBCheckpoint(context.Background(), pool, group)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// appliedCounts maps agent id to how many times its event was applied.
func appliedCounts(t *testing.T, pool *pgxpool.Pool) map[int64]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT agent_id, applied FROM esdb_applied`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int{}
	var id int64
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestESDBEventsReachProjectionWithMetadataAndCheckpoint(t *testing.T) {
	pool := pgtest.Fresh(t)
	url := esdbfake.Start(t)
	l := startListener(t, pool)
	runESDB(t, pool, l, url, 5, appliedProjection(t, pool, "esdb-agents"), nil)
	s := openStore(t, url)
	var positions []eventstore.Position
	for id := int64(1); id <= 3; id++ {
		positions = append(positions, appendESDBAgent(t, s, id, "a"))
	}
	last := positions[len(positions)-1]
	waitESDB(t, l, last, "esdb-agents")

	// At the last event, or past it at a server checkpoint (C, 0).
	if got := checkpoint(t, pool, "esdb-agents"); got.Compare(last) < 0 {
		t.Errorf("checkpoint %v, want at or after %v", got, last)
	}
	for i, pos := range positions {
		id := int64(i + 1)
		var stream, position, corr string
		var version, user int64
		var recorded time.Time
		var applied int
		if err := pool.QueryRow(context.Background(), `SELECT stream, version, position, recorded_at, correlation_id, user_id, applied
			FROM esdb_applied WHERE agent_id = $1`, id).Scan(&stream, &version, &position, &recorded, &corr, &user, &applied); err != nil {
			t.Fatalf("agent %d: %v", id, err)
		}
		want := time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC)
		if stream != eventstore.StreamName("agent", id) || version != 1 || position != pos.String() ||
			!recorded.Equal(want) || corr != "corr-a" || user != 7 || applied != 1 {
			t.Errorf("agent %d applied as %s v%d at %s recorded %v corr %q user %d ×%d; want at %v",
				id, stream, version, position, recorded, corr, user, applied, pos)
		}
	}
}

// A handler that keeps failing after writing leaves neither its rows nor the
// checkpoint: both stay where the last applied event left them.
func TestESDBHandlerFailureCommitsNeitherRowsNorCheckpoint(t *testing.T) {
	pool := pgtest.Fresh(t)
	url := esdbfake.Start(t)
	l := startListener(t, pool)
	proj := runESDB(t, pool, l, url, 2, appliedProjection(t, pool, "esdb-picky"), nil)
	s := openStore(t, url)
	before := appendESDBAgent(t, s, 1, "fine")
	waitESDB(t, l, before, "esdb-picky")
	poison := appendESDBAgent(t, s, 2, "poison")
	appendESDBAgent(t, s, 3, "fine")

	if !poll.Until(10*time.Second, func() bool { return stalled(proj.runner, "esdb-picky") }) {
		t.Fatalf("projection not reported stalled: %+v", proj.runner.Statuses())
	}
	proj.stop()
	if got := appliedCounts(t, pool); len(got) != 1 || got[1] != 1 {
		t.Errorf("applied %v, want only agent 1 once", got)
	}
	// At the last applied event, or at a server checkpoint (C, 0) whose C
	// is the poison event's position: either way before the poison event.
	justBefore := func(p eventstore.Position) bool { return p.Compare(before) >= 0 && p.Compare(poison) < 0 }
	if got := checkpoint(t, pool, "esdb-picky"); !justBefore(got) {
		t.Errorf("checkpoint %v, want from %v to just before %v (the poison event)", got, before, poison)
	}
	if got := l.Position("esdb-picky"); !justBefore(got) {
		t.Errorf("announced %v, want from %v to just before %v", got, before, poison)
	}
}

func stalled(r *Runner, name string) bool {
	for _, s := range r.Statuses() {
		if s.Name == name && s.Stalled && s.Error != "" {
			return true
		}
	}
	return false
}

// A restarted projection resumes after its checkpoint: nothing is applied twice.
func TestESDBResumesFromCheckpointWithoutReapplying(t *testing.T) {
	pool := pgtest.Fresh(t)
	url := esdbfake.Start(t)
	l := startListener(t, pool)
	p := appliedProjection(t, pool, "esdb-resume")
	s := openStore(t, url)
	first := runESDB(t, pool, l, url, 5, p, nil)
	appendESDBAgent(t, s, 1, "a")
	pos := appendESDBAgent(t, s, 2, "a")
	waitESDB(t, l, pos, "esdb-resume")
	first.stop()

	pos = appendESDBAgent(t, s, 3, "a")
	// A fresh listener: the position must come from the new subscriber.
	l2 := startListener(t, pool)
	runESDB(t, pool, l2, url, 5, p, nil)
	waitESDB(t, l2, pos, "esdb-resume")
	if got := appliedCounts(t, pool); len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Errorf("applied %v, want agents 1, 2, 3 once each", got)
	}
	// At the last event, or past it at a server checkpoint (C, 0).
	if got := checkpoint(t, pool, "esdb-resume"); got.Compare(pos) < 0 {
		t.Errorf("checkpoint %v, want at or after %v", got, pos)
	}
}

// proxy forwards TCP connections to target; cut drops every open one.
type proxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() { _ = lis.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	return n
}

// A dropped connection is resubscribed from the checkpoint, with nothing
// applied twice.
func TestESDBReconnectsAfterDroppedConnection(t *testing.T) {
	pool := pgtest.Fresh(t)
	fake, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	px := startProxy(t, fake.Addr())
	l := startListener(t, pool)
	runESDB(t, pool, l, "esdb://"+px.lis.Addr().String()+"?tls=false", 5, appliedProjection(t, pool, "esdb-reconnect"), nil)
	s := openStore(t, fake.URL()) // appends go straight to the server
	pos := appendESDBAgent(t, s, 1, "a")
	waitESDB(t, l, pos, "esdb-reconnect")

	if n := px.cut(); n == 0 {
		t.Fatal("no connection through the proxy to drop")
	}
	pos = appendESDBAgent(t, s, 2, "a")
	waitESDB(t, l, pos, "esdb-reconnect")
	px.cut()
	pos = appendESDBAgent(t, s, 3, "a")
	waitESDB(t, l, pos, "esdb-reconnect")
	if got := appliedCounts(t, pool); len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Errorf("applied %v, want agents 1, 2, 3 once each", got)
	}
}

// System events ("$...") never reach the router, yet the server's checkpoints
// over them advance the stored checkpoint when no event of ours arrives.
func TestESDBSystemEventsFilteredAndCheckpointsAdvance(t *testing.T) {
	pool := pgtest.Fresh(t)
	url := esdbfake.Start(t)
	l := startListener(t, pool)
	var mu sync.Mutex
	var types []string
	runESDB(t, pool, l, url, 5, appliedProjection(t, pool, "esdb-sparse"), func(m *message.Message) {
		mu.Lock()
		defer mu.Unlock()
		types = append(types, m.Metadata.Get(postgres.MetaEventType))
	})
	raw := esdbfake.NewClient(t, url)
	// 40 system events after the fake's 4: the server checkpoints every 32
	// events searched.
	for i := 0; i < 40; i++ {
		if _, err := raw.AppendToStream(context.Background(), "$lectern-test", client.AppendToStreamOptions{},
			client.EventData{EventID: uuid.New(), EventType: "$test", ContentType: client.ContentTypeJson, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Must(t, 10*time.Second, "a checkpoint stored from the server's checkpoints over system events", func() bool {
		return !checkpoint(t, pool, "esdb-sparse").IsZero()
	})
	// The listener learns of a stored checkpoint by notification, so it
	// may announce the one before for a moment (and the server may store
	// another meanwhile): wait until both agree.
	var cp eventstore.Position
	poll.Must(t, 10*time.Second, "the stored checkpoint announced", func() bool {
		cp = checkpoint(t, pool, "esdb-sparse")
		return l.Position("esdb-sparse") == cp
	})
	pos := appendESDBAgent(t, openStore(t, url), 1, "a")
	if pos.Compare(cp) <= 0 {
		t.Fatalf("append at %v not after checkpoint %v", pos, cp)
	}
	waitESDB(t, l, pos, "esdb-sparse")
	mu.Lock()
	defer mu.Unlock()
	if len(types) != 1 || types[0] != "agent.created" {
		t.Errorf("router saw %v, want only [agent.created]", types)
	}
	for _, typ := range types {
		if strings.HasPrefix(typ, "$") {
			t.Errorf("system event %q reached the router", typ)
		}
	}
}

// A listener following EventStoreDB ignores the PostgreSQL positions a copy
// left in projection_offsets: a transaction id there would pass for a later
// position than EventStoreDB's, and a write would not wait for its read
// models.
func TestListenerOnESDBIgnoresPostgreSQLOffsets(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
		VALUES ('accounts', 7, '999999'); INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position) VALUES ('accounts', 10, 10)`); err != nil {
		t.Fatal(err)
	}
	l := NewListener(pool, esdbQuiet)
	l.FollowESDB()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Reached within a wait long enough for a loaded machine; not reached
	// within a wait that covers the listener's refreshes (100 ms apart).
	reachedAt := func(commit uint64, wait time.Duration) error {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return l.WaitFor(wctx, eventstore.Position{Commit: commit, Prepare: commit}, "accounts")
	}
	if err := reachedAt(10, 10*time.Second); err != nil {
		t.Fatalf("the EventStoreDB checkpoint itself: %v", err)
	}
	if err := reachedAt(20, 300*time.Millisecond); err == nil {
		t.Fatal("a position past the EventStoreDB checkpoint passed for reached (the PostgreSQL offset was read)")
	}
	if _, err := pool.Exec(ctx, `UPDATE esdb_checkpoints SET commit_position = 20, prepare_position = 20`); err != nil {
		t.Fatal(err)
	}
	if err := reachedAt(20, 10*time.Second); err != nil {
		t.Fatalf("after the checkpoint moved: %v", err)
	}
}

// kurrentRefusedCheckpoint answers a subscription to $all from a position as
// KurrentDB 25.0 answers one it cannot read from (github.com/kurrent-io/KurrentDB
// v25.0.1):
//   - a prepare past the commit: Grpc/ReadReq.cs:43-44 builds a Position,
//     whose constructor throws (Transport/Common/Position.cs:47-51) before
//     anything is sent: Unknown "Exception was thrown by handler.";
//   - a commit inside a record: the subscription is confirmed
//     (Enumerator.AllSubscriptionFiltered.cs:161-162), its catch-up read fails
//     (StorageReaderWorker.cs:552-554; AllSubscriptionFiltered.cs:351-352, 183),
//     and the stream ends with InvalidArgument "Trying to read from an invalid
//     position." (Streams.Read.cs:334-335, RpcExceptions.cs:259-260), which
//     the Go client hands over raw in a SubscriptionDropped.
type kurrentRefusedCheckpoint struct {
	streams.UnimplementedStreamsServer
}

func (kurrentRefusedCheckpoint) Read(req *streams.ReadReq, srv streams.Streams_ReadServer) error {
	o := req.GetOptions()
	p := o.GetAll().GetPosition()
	if o.GetSubscription() == nil || p == nil {
		return status.Error(codes.Unimplemented, "this test server answers subscriptions to $all from a position only")
	}
	if p.GetPreparePosition() > p.GetCommitPosition() {
		return status.Error(codes.Unknown, "Exception was thrown by handler.")
	}
	if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{
		Confirmation: &streams.ReadResp_SubscriptionConfirmation{SubscriptionId: uuid.NewString()},
	}}); err != nil {
		return err
	}
	return status.Error(codes.InvalidArgument, "Trying to read from an invalid position.")
}

// A checkpoint KurrentDB cannot start from (a PostgreSQL position left in
// esdb_checkpoints) stops the projection for good (OnFatal, reported on
// /readyz) with ErrInvalidPosition, instead of resubscribing forever.
func TestESDBCheckpointTheServerCannotReadFromStopsTheProjection(t *testing.T) {
	store, err := esdb.New(esdbfake.Scripted(t, kurrentRefusedCheckpoint{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	pool := pgtest.Fresh(t)

	for _, tc := range []struct {
		name            string
		commit, prepare int64
	}{
		{"inside a record", 12345, 6},
		{"prepare past commit", 500, 900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := "refused-" + uuid.NewString()
			if _, err := pool.Exec(context.Background(), `INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position)
				VALUES ($1, $2, $3)`, group, tc.commit, tc.prepare); err != nil {
				t.Fatal(err)
			}
			sub, err := NewESDBSubscriber(ESDBSubscriberConfig{Store: store, Pool: pool, ConsumerGroup: group,
				Logger: esdbQuiet, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			fatal := make(chan error, 1)
			sub.OnFatal(func(err error) { fatal <- err })
			msgs, err := sub.Subscribe(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for m := range msgs {
					m.Ack()
				}
			}()
			defer func() { _ = sub.Close() }()
			select {
			case err := <-fatal:
				if !errors.Is(err, eventstore.ErrInvalidPosition) {
					t.Errorf("fatal: %v; want ErrInvalidPosition", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("checkpoint %d-%d: still resubscribing after 5 s; want it stopped (OnFatal) with ErrInvalidPosition", tc.commit, tc.prepare)
			}
		})
	}
}

// subscribeFor starts an ESDBSubscriber of group on url that acks every
// message it delivers, counting them, and reports what stops it for good.
func subscribeFor(t *testing.T, pool *pgxpool.Pool, url, group string) (fatal <-chan error, delivered *atomic.Int64) {
	t.Helper()
	sub, err := NewESDBSubscriber(ESDBSubscriberConfig{Store: openStore(t, url), Pool: pool, ConsumerGroup: group,
		Logger: esdbQuiet, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	sub.OnFatal(func(err error) { stopped <- err })
	msgs, err := sub.Subscribe(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	delivered = new(atomic.Int64)
	go func() {
		for m := range msgs {
			delivered.Add(1)
			m.Ack()
		}
	}()
	t.Cleanup(func() { _ = sub.Close() })
	return stopped, delivered
}

// A checkpoint past the end of the log (the store recreated, or restored from
// a backup older than PostgreSQL's) stops the projection for good, as a
// foreign one does: subscribed from there, it would hear of nothing until the
// new log grew past the old checkpoint, and pass over every event before.
func TestESDBCheckpointPastTheLogsEndStopsTheProjection(t *testing.T) {
	pool := pgtest.Fresh(t)
	old := esdbfake.Start(t)
	oldStore := openStore(t, old)
	for i := range 20 {
		appendESDBAgent(t, oldStore, int64(i+1), "old")
	}
	end := esdbfake.LogEnd(t, old)
	if _, err := pool.Exec(context.Background(), `INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position)
		VALUES ('recreated', $1, $2)`, int64(end.Commit), int64(end.Prepare)); err != nil {
		t.Fatal(err)
	}

	recreated := esdbfake.Start(t)
	appendESDBAgent(t, openStore(t, recreated), 1, "new")
	fatal, delivered := subscribeFor(t, pool, recreated, "recreated")
	select {
	case err := <-fatal:
		if !errors.Is(err, errPastEnd) || !strings.Contains(err.Error(), "lectern replay") {
			t.Errorf("fatal: %v; want the checkpoint past the end of the log, and what to do", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("checkpoint %v, past the recreated log's end: not stopped (OnFatal) after 5 s", end)
	}
	if n := delivered.Load(); n != 0 {
		t.Errorf("%d events delivered from past the end of the log", n)
	}
}

// A checkpoint at the end of the log itself, where the server checkpoints a
// filtered subscription when the log ends with system events, is no
// checkpoint past the end: the projection resumes from it.
func TestESDBResumesFromACheckpointAtTheLogsEnd(t *testing.T) {
	pool := pgtest.Fresh(t)
	url := esdbfake.Start(t)
	appendESDBAgent(t, openStore(t, url), 1, "before")
	if _, err := esdbfake.NewClient(t, url).AppendToStream(context.Background(), "$lectern-test", client.AppendToStreamOptions{},
		client.EventData{EventID: uuid.New(), EventType: "$test", ContentType: client.ContentTypeJson, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	end := esdbfake.LogEnd(t, url)
	if _, err := pool.Exec(context.Background(), `INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position)
		VALUES ('at-end', $1, $2)`, int64(end.Commit), int64(end.Prepare)); err != nil {
		t.Fatal(err)
	}
	fatal, delivered := subscribeFor(t, pool, url, "at-end")
	appendESDBAgent(t, openStore(t, url), 2, "after")
	poll.Must(t, 10*time.Second, "the event appended after the checkpoint delivered", func() bool {
		select {
		case err := <-fatal:
			t.Fatalf("stopped: %v", err)
		default:
		}
		return delivered.Load() == 1
	})
}

// A batch ends with an append's last event: one that would end inside an
// append waits for the rest, which the server sends next, past BatchSize if
// need be; one at BatchSize that ends with an append stops there; Close
// ends the wait.
func TestESDBBatchEndsWithAnAppend(t *testing.T) {
	t.Parallel()
	var pos uint64
	event := func(stream string, rest int) *client.SubscriptionEvent {
		pos += 100
		return &client.SubscriptionEvent{EventAppeared: &client.ResolvedEvent{Event: &client.RecordedEvent{
			EventID: uuid.New(), EventType: "thing.done", StreamID: stream,
			Position:     client.Position{Commit: pos, Prepare: pos},
			UserMetadata: []byte(fmt.Sprintf(`{"user_id":1,"append_rest":%d}`, rest)),
		}}}
	}
	streams := func(batch []*client.RecordedEvent) []string {
		var out []string
		for _, rec := range batch {
			out = append(out, rec.StreamID)
		}
		return out
	}
	type collected struct {
		batch  []*client.RecordedEvent
		closed bool
	}
	start := func(s *ESDBSubscriber, first *client.SubscriptionEvent, items chan *client.SubscriptionEvent) chan collected {
		done := make(chan collected, 1)
		go func() {
			batch, _, _, closed := s.collect(eventstore.Position{}, first, items)
			done <- collected{batch, closed}
		}()
		return done
	}

	t.Run("the rest of an append is waited for", func(t *testing.T) {
		s := &ESDBSubscriber{cfg: ESDBSubscriberConfig{BatchSize: 2}, closing: make(chan struct{})}
		items := make(chan *client.SubscriptionEvent) // unbuffered: a send is taken by collect
		done := start(s, event("a", 2), items)
		for _, ev := range []*client.SubscriptionEvent{event("a", 1), event("a", 0)} {
			select {
			case items <- ev:
			case c := <-done:
				t.Fatalf("the batch ended inside the append: %v", streams(c.batch))
			}
		}
		c := <-done
		if diff := cmp.Diff([]string{"a", "a", "a"}, streams(c.batch)); diff != "" || c.closed {
			t.Errorf("batch (-want +got):\n%s (closed %v)", diff, c.closed)
		}
	})
	t.Run("a full batch ends with an append", func(t *testing.T) {
		s := &ESDBSubscriber{cfg: ESDBSubscriberConfig{BatchSize: 2}, closing: make(chan struct{})}
		items := make(chan *client.SubscriptionEvent, 3)
		items <- event("b", 0)
		items <- event("c", 0)
		c := <-start(s, event("a", 0), items)
		if diff := cmp.Diff([]string{"a", "b"}, streams(c.batch)); diff != "" {
			t.Errorf("batch (-want +got):\n%s", diff)
		}
		if len(items) != 1 {
			t.Errorf("%d events left for the next batch, want 1", len(items))
		}
	})
	t.Run("a drop inside an append leaves the append out", func(t *testing.T) {
		s := &ESDBSubscriber{cfg: ESDBSubscriberConfig{BatchSize: 10}, closing: make(chan struct{})}
		items := make(chan *client.SubscriptionEvent, 3)
		whole := event("a", 0)
		items <- event("b", 2)
		items <- event("b", 1)
		items <- &client.SubscriptionEvent{SubscriptionDropped: &client.SubscriptionDropped{}}
		batch, upto, dropped, _ := s.collect(eventstore.Position{}, whole, items)
		if diff := cmp.Diff([]string{"a"}, streams(batch)); diff != "" || dropped == nil {
			t.Errorf("batch (-want +got):\n%s (dropped: %v)", diff, dropped)
		}
		if want := esdb.PositionOf(whole.EventAppeared.Event.Position); upto != want {
			t.Errorf("checkpoint %v, want the last whole append's %v", upto, want)
		}
	})
	t.Run("Close ends the wait", func(t *testing.T) {
		s := &ESDBSubscriber{cfg: ESDBSubscriberConfig{BatchSize: 2}, closing: make(chan struct{})}
		done := start(s, event("a", 1), make(chan *client.SubscriptionEvent))
		close(s.closing)
		if c := <-done; !c.closed {
			t.Errorf("collect returned %v without closing", streams(c.batch))
		}
	})
}
