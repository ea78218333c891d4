package esdb_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/storetest"
	"lectern/poll"
)

func open(t *testing.T, url string) *esdb.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := esdb.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Hold stays nil: an EventStoreDB append is atomic on the server, so there is
// no open transaction to commit late.
func TestAcceptanceFake(t *testing.T) {
	url := esdbfake.Start(t)
	storetest.Run(t, storetest.Harness{New: func(t *testing.T) eventstore.Store { return open(t, url) }})
}

func TestAcceptanceEventStoreDB(t *testing.T) {
	url := os.Getenv("EVENTSTORE_TEST_URL")
	if url == "" {
		t.Skip("EVENTSTORE_TEST_URL is not set (e.g. esdb://localhost:2113?tls=false); the fake-server suite ran instead")
	}
	storetest.Run(t, storetest.Harness{New: func(t *testing.T) eventstore.Store { return open(t, url) }})
}

func TestOpenFailsWhenNoServer(t *testing.T) {
	srv, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL()
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if s, err := esdb.Open(ctx, url+"&maxDiscoverAttempts=1"); err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded without a server")
	}
}

func TestWrongExpectedVersionIsWrapped(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	if _, err := s.Append(ctx, "w-1", eventstore.NoStream, []eventstore.EventData{storetest.Event("a", 1)}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, "w-1", eventstore.Exact(5), []eventstore.EventData{storetest.Event("a", 2)})
	if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Fatalf("err = %v, want ErrWrongExpectedVersion", err)
	}
}

func TestIdempotentRetryKeepsPosition(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	evs := []eventstore.EventData{storetest.Event("a", 1), storetest.Event("b", 2)}
	first, err := s.Append(ctx, "idem-1", eventstore.NoStream, evs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctx, "idem-1", eventstore.NoStream, evs)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("retry = %+v, want %+v", again, first)
	}
}

func TestReadAllSkipsSystemEvents(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	// A fresh store holds only system events.
	got, err := s.ReadAll(ctx, eventstore.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("fresh store: %d events, want none", len(got))
	}
	e := storetest.Event("x", 1)
	if _, err := s.Append(ctx, "x-1", eventstore.NoStream, []eventstore.EventData{e}); err != nil {
		t.Fatal(err)
	}
	// Limit 1 must step over the system events, not return an empty page.
	got, err = s.ReadAll(ctx, eventstore.Position{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != e.ID {
		t.Fatalf("ReadAll = %+v, want the one event", got)
	}
	rest, err := s.ReadAll(ctx, got[0].Position, 10)
	if err != nil || len(rest) != 0 {
		t.Fatalf("ReadAll after the last event = %v, %v; want empty", rest, err)
	}
}

func TestSchemaVersionAndRecordedAtRoundTrip(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	e := eventstore.EventData{
		ID: uuid.New(), Type: "thing.done", SchemaVersion: 3, Data: []byte(`{"a":1}`),
		RecordedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
	}
	if _, err := s.Append(ctx, "rt-1", eventstore.Any, []eventstore.EventData{e}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadStream(ctx, "rt-1", eventstore.Forwards, 1, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("read: %v, %v", got, err)
	}
	if got[0].SchemaVersion != 3 || !got[0].RecordedAt.Equal(e.RecordedAt) || string(got[0].Data) != `{"a":1}` || got[0].Type != e.Type {
		t.Errorf("read %+v, want %+v", got[0], e)
	}
}

func TestAppendOfNoEventsFails(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	if _, err := s.Append(context.Background(), "e-1", eventstore.Any, nil); err == nil {
		t.Fatal("append of no events succeeded")
	}
}

// The official client gives up for good when the server has been away for a
// discovery (a third of a second here); the store builds a new client, so
// that calls fail with ErrUnavailable, within their context, while the
// server is down, and succeed once it is back.
func TestStoreOutlivesAnOutage(t *testing.T) {
	srv, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	s := open(t, srv.URL())
	ctx := context.Background()
	if _, err := s.Append(ctx, "o-1", eventstore.NoStream, []eventstore.EventData{storetest.Event("a", 1)}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	for i := range 3 { // the first finds the connection broken, later ones a client that gave up
		start := time.Now()
		_, err := s.Append(ctx, "o-1", eventstore.Exact(1), []eventstore.EventData{storetest.Event("b", 2)})
		if !errors.Is(err, eventstore.ErrUnavailable) {
			t.Fatalf("append %d while down: %v, want ErrUnavailable", i, err)
		}
		if took := time.Since(start); took > s.AppendRetryFor+time.Second {
			t.Errorf("append %d while down took %v (retrying for %v)", i, took, s.AppendRetryFor)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		start = time.Now()
		_, err = s.ReadStream(short, "o-1", eventstore.Forwards, 1, 0)
		cancel()
		if err == nil {
			t.Fatalf("read %d while down succeeded", i)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("read %d with a 100 ms context took %v", i, took)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var res eventstore.AppendResult
	b := storetest.Event("b", 2)
	poll.Must(t, 10*time.Second, "an append after the server is back", func() bool {
		res, err = s.Append(ctx, "o-1", eventstore.Exact(1), []eventstore.EventData{b})
		if err != nil && !errors.Is(err, eventstore.ErrUnavailable) {
			t.Fatalf("append after the outage: %v", err)
		}
		return err == nil
	})
	got, err := s.ReadStream(ctx, "o-1", eventstore.Forwards, 1, 0)
	if err != nil || len(got) != 2 || got[1].ID != b.ID || res.Version != 2 {
		t.Fatalf("after the outage: %v events, %v; append %+v", len(got), err, res)
	}
}

// Positions of another store (a PostgreSQL cursor) against the log: a
// prepare past its commit is refused without asking the server; a commit
// inside a record that others follow is what the server cannot read from;
// both are ErrInvalidPosition. Past the last record, the read is empty. A
// checkpoint of the shape (C, 0), C a record's position, reads from that record.
func TestInvalidPositions(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	first, err := s.Append(ctx, "p-1", eventstore.NoStream, []eventstore.EventData{storetest.Event("a", 1)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, "p-1", eventstore.Exact(1), []eventstore.EventData{storetest.Event("b", 2)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []eventstore.Position{
		{Commit: res.Position.Commit, Prepare: res.Position.Commit + 1},
		{Commit: 500, Prepare: 900},
		{Commit: math.MaxInt64 + 1, Prepare: 0},
		{Commit: first.Position.Commit + 1, Prepare: first.Position.Commit + 1},
		{Commit: first.Position.Commit + 1, Prepare: 6},
	} {
		if _, err := s.ReadAll(ctx, p, 10); !errors.Is(err, eventstore.ErrInvalidPosition) || errors.Is(err, eventstore.ErrUnavailable) {
			t.Errorf("ReadAll after %v: %v, want ErrInvalidPosition", p, err)
		}
	}
	for _, p := range []eventstore.Position{
		{Commit: res.Position.Commit + 1, Prepare: 6},
		{Commit: 1 << 40, Prepare: 6},
	} {
		if got, err := s.ReadAll(ctx, p, 10); err != nil || len(got) != 0 {
			t.Errorf("ReadAll after %v, past the last record: %v, %v; want an empty read", p, got, err)
		}
	}
	got, err := s.ReadAll(ctx, eventstore.Position{Commit: res.Position.Commit, Prepare: 0}, 10)
	if err != nil || len(got) != 1 || got[0].Position != res.Position {
		t.Errorf("ReadAll after (C, 0) of the last event: %v, %v; want that event", got, err)
	}
}

// kurrentReadAll answers a read of $all from a position as KurrentDB 25.0
// answers one it cannot read from (github.com/kurrent-io/KurrentDB v25.0.1):
//   - a prepare past the commit: Grpc/ReadReq.cs:35-36 builds a Position,
//     whose constructor throws (Transport/Common/Position.cs:47-51) outside
//     any handler: Unknown "Exception was thrown by handler.";
//   - a commit inside a record: StorageReaderWorker.cs:472-474,
//     Enumerator.ReadAllForwards.cs:122-124, Streams.Read.cs:338-339,
//     RpcExceptions.cs:51-52: Unknown "Unexpected ReadAllResult: InvalidPosition".
type kurrentReadAll struct {
	streams.UnimplementedStreamsServer
	reads atomic.Int32
}

func (k *kurrentReadAll) Read(req *streams.ReadReq, _ streams.Streams_ReadServer) error {
	k.reads.Add(1)
	p := req.GetOptions().GetAll().GetPosition()
	if p == nil || req.GetOptions().GetSubscription() != nil {
		return status.Error(codes.Unimplemented, "this test server answers reads of $all from a position only")
	}
	if p.GetPreparePosition() > p.GetCommitPosition() {
		return status.Error(codes.Unknown, "Exception was thrown by handler.")
	}
	return status.Error(codes.Unknown, "Unexpected ReadAllResult: InvalidPosition")
}

// A cursor of the other store (GET /admin/events?after=12345-6 or 500-900)
// is ErrInvalidPosition against KurrentDB's own answers, which the API
// answers with 422, not ErrUnavailable (503 and Retry-After) for a request
// that can never succeed. A prepare past the commit does not reach the server.
func TestReadAllFromAForeignCursorIsInvalidNotUnavailable(t *testing.T) {
	srv := &kurrentReadAll{}
	s, err := esdb.New(esdbfake.Scripted(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		after eventstore.Position
		reads int32 // the server's reads so far
	}{
		{eventstore.Position{Commit: 500, Prepare: 900}, 0},
		{eventstore.Position{Commit: 12345, Prepare: 6}, 1},
	} {
		_, err := s.ReadAll(ctx, tc.after, 10)
		if !errors.Is(err, eventstore.ErrInvalidPosition) || errors.Is(err, eventstore.ErrUnavailable) {
			t.Errorf("ReadAll after %v: %v; want ErrInvalidPosition (422), not ErrUnavailable (503)", tc.after, err)
		}
		if got := srv.reads.Load(); got != tc.reads {
			t.Errorf("after ReadAll after %v, the server had %d reads, want %d", tc.after, got, tc.reads)
		}
	}
}

// Closing the store while a call is still waiting on its client (a read
// whose context gave up while the server was down) must not panic: the
// client's Close closes the channel such a call sends on. Close waits for
// the call, or leaves that client open.
func TestCloseWhileACallWaits(t *testing.T) {
	srv, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := esdb.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "c-1", eventstore.NoStream, []eventstore.EventData{storetest.Event("a", 1)}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for range 3 {
		short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
		if _, err := s.ReadStream(short, "c-1", eventstore.Forwards, 1, 0); err == nil {
			t.Fatal("a read succeeded while the server was down")
		}
		stop()
	}
	start := time.Now()
	_ = s.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Close took %v", took)
	}
	if _, err := s.ReadStream(ctx, "c-1", eventstore.Forwards, 1, 0); err == nil {
		t.Error("a read succeeded after Close")
	}
}

// PastEnd tells a checkpoint past the end of the log (one kept from a log
// since recreated) from every position a subscription may hold: its events'
// positions, and the end of the log itself, where a filtered subscription
// checkpoints when the log ends with system events.
func TestPastEnd(t *testing.T) {
	url := esdbfake.Start(t)
	s := open(t, url)
	ctx := context.Background()
	res, err := s.Append(ctx, "x-1", eventstore.NoStream, []eventstore.EventData{storetest.Event("x", 1), storetest.Event("x", 2)})
	if err != nil {
		t.Fatal(err)
	}
	end := esdbfake.LogEnd(t, url)
	for _, tc := range []struct {
		name string
		p    eventstore.Position
		want bool
	}{
		{"the last event", res.Position, false},
		{"the end of the log", end, false},
		{"a byte past the end", eventstore.Position{Commit: end.Commit + 1}, true},
		{"far past the end", eventstore.Position{Commit: end.Commit + 1<<40, Prepare: end.Commit + 1<<40}, true},
	} {
		past, err := s.PastEnd(ctx, tc.p)
		if err != nil || past != tc.want {
			t.Errorf("%s (%v): PastEnd = %v, %v; want %v", tc.name, tc.p, past, err, tc.want)
		}
	}
}

// Each event of an append says how many of the append's events follow it,
// which a subscription reader needs to end its batches with an append.
func TestAppendRestCountsTheAppendsEventsLeft(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Append(ctx, "rest-1", eventstore.NoStream, []eventstore.EventData{
		storetest.Event("a", 1), storetest.Event("b", 2), storetest.Event("c", 3)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "rest-2", eventstore.NoStream, []eventstore.EventData{storetest.Event("d", 1)}); err != nil {
		t.Fatal(err)
	}
	sub, err := s.SubscribeToAll(ctx, client.SubscribeToAllOptions{From: client.Start{}, Filter: client.ExcludeSystemEventsFilter()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	var got []string
	for len(got) < 4 {
		ev := sub.Recv()
		if ev.SubscriptionDropped != nil {
			t.Fatalf("dropped after %v: %v", got, ev.SubscriptionDropped.Error)
		}
		if ev.EventAppeared == nil {
			continue
		}
		if rec := ev.EventAppeared.OriginalEvent(); rec != nil {
			got = append(got, fmt.Sprintf("%s %d", rec.StreamID, esdb.AppendRest(rec)))
		}
	}
	if want := []string{"rest-1 2", "rest-1 1", "rest-1 0", "rest-2 0"}; !slices.Equal(got, want) {
		t.Errorf("events and the rest of their appends: %v, want %v", got, want)
	}
	// Metadata that does not say (an event appended before it did).
	if n := esdb.AppendRest(&client.RecordedEvent{UserMetadata: []byte(`{"user_id":1}`)}); n != 0 {
		t.Errorf("AppendRest of metadata without it = %d", n)
	}
}
