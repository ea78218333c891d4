package esdbfake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"lectern/eventstore/esdbfake"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// rawConn is a plain gRPC connection, to see exactly what the server sends.
func rawConn(t *testing.T, s *esdbfake.Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func start(t *testing.T) (*esdbfake.Server, *client.Client) {
	t.Helper()
	s, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, esdbfake.NewClient(t, s.URL())
}

func appendN(t *testing.T, c *client.Client, stream string, n int) *client.WriteResult {
	t.Helper()
	var evs []client.EventData
	for range n {
		evs = append(evs, client.EventData{EventID: uuid.New(), EventType: "thing", ContentType: client.ContentTypeJson, Data: []byte(`{}`)})
	}
	res, err := c.AppendToStream(ctx(t), stream, client.AppendToStreamOptions{}, evs...)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

func readAll(t *testing.T, c *client.Client, opts client.ReadAllOptions, n uint64) []*client.RecordedEvent {
	t.Helper()
	rs, err := c.ReadAll(ctx(t), opts, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []*client.RecordedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.OriginalEvent())
	}
}

func TestFreshStoreHoldsSystemEventsWithRequiredMetadata(t *testing.T) {
	_, c := start(t)
	before := time.Now().Add(-time.Second)
	appendN(t, c, "thing-1", 2)
	evs := readAll(t, c, client.ReadAllOptions{}, 100)
	system := 0
	for _, e := range evs {
		if strings.HasPrefix(e.EventType, "$") {
			system++
		}
		for _, k := range []string{"type", "content-type", "created"} {
			if e.SystemMetadata[k] == "" {
				t.Errorf("%s@%d: no %q metadata", e.StreamID, e.EventNumber, k)
			}
		}
		if e.CreatedDate.Before(before) || e.CreatedDate.After(time.Now().Add(time.Second)) {
			t.Errorf("%s@%d created %v, not now (ticks misread?)", e.StreamID, e.EventNumber, e.CreatedDate)
		}
	}
	if system < 2 || len(evs) != system+2 {
		t.Errorf("$all holds %d events, %d system: want a few system events and the 2 appended", len(evs), system)
	}
}

func TestAllPositionsSparseIncreasingCommitEqualsPrepare(t *testing.T) {
	_, c := start(t)
	appendN(t, c, "a-1", 3)
	appendN(t, c, "b-1", 2)
	evs := readAll(t, c, client.ReadAllOptions{}, 100)
	var prev uint64
	for i, e := range evs {
		if e.Position.Commit != e.Position.Prepare {
			t.Errorf("event %d: commit %d != prepare %d", i, e.Position.Commit, e.Position.Prepare)
		}
		if e.Position.Commit <= prev+1 {
			t.Errorf("event %d at %d after %d: positions must be sparse and increasing", i, e.Position.Commit, prev)
		}
		prev = e.Position.Commit
	}
	// Backwards reads see the same log reversed.
	back := readAll(t, c, client.ReadAllOptions{Direction: client.Backwards, From: client.End{}}, 100)
	if len(back) != len(evs) || back[0].EventID != evs[len(evs)-1].EventID {
		t.Errorf("backwards read does not mirror forwards")
	}
}

func TestReadAllForwardsIsInclusive(t *testing.T) {
	_, c := start(t)
	appendN(t, c, "a-1", 3)
	evs := readAll(t, c, client.ReadAllOptions{}, 100)
	mid := evs[len(evs)-2]
	got := readAll(t, c, client.ReadAllOptions{From: mid.Position}, 100)
	if len(got) != 2 || got[0].EventID != mid.EventID {
		t.Errorf("read from %v returned %d events, first %v; want 2 starting with the event at that position", mid.Position, len(got), got)
	}
}

// The client panics on anything but events and stream-not-found in a plain
// read; check the wire.
func TestPlainReadsSendOnlyEvents(t *testing.T) {
	s, c := start(t)
	appendN(t, c, "a-1", 3)
	rc := streams.NewStreamsClient(rawConn(t, s))
	reqs := map[string]*streams.ReadReq_Options{
		"all": {
			StreamOption: &streams.ReadReq_Options_All{All: &streams.ReadReq_Options_AllOptions{
				AllOption: &streams.ReadReq_Options_AllOptions_Start{Start: &shared.Empty{}}}},
			CountOption: &streams.ReadReq_Options_Count{Count: 100},
		},
		"stream": {
			StreamOption: &streams.ReadReq_Options_Stream{Stream: &streams.ReadReq_Options_StreamOptions{
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte("a-1")},
				RevisionOption:   &streams.ReadReq_Options_StreamOptions_Start{Start: &shared.Empty{}}}},
			CountOption: &streams.ReadReq_Options_Count{Count: 100},
		},
		"missing stream": {
			StreamOption: &streams.ReadReq_Options_Stream{Stream: &streams.ReadReq_Options_StreamOptions{
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte("nope-1")},
				RevisionOption:   &streams.ReadReq_Options_StreamOptions_Start{Start: &shared.Empty{}}}},
			CountOption: &streams.ReadReq_Options_Count{Count: 100},
		},
	}
	for name, o := range reqs {
		rs, err := rc.Read(ctx(t), &streams.ReadReq{Options: o})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			m, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			n++
			switch m.Content.(type) {
			case *streams.ReadResp_Event:
			case *streams.ReadResp_StreamNotFound_:
				if name != "missing stream" {
					t.Errorf("%s: stream not found", name)
				}
			default:
				t.Errorf("%s: plain read sent %T", name, m.Content)
			}
		}
		if n == 0 {
			t.Errorf("%s: nothing sent", name)
		}
	}
}

func TestServerFeaturesUnimplemented(t *testing.T) {
	s, _ := start(t)
	_, err := serverfeatures.NewServerFeaturesClient(rawConn(t, s)).GetSupportedMethods(ctx(t), &shared.Empty{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("GetSupportedMethods: %v, want Unimplemented", err)
	}
}

func TestSubscribeToAllFilteredExclusiveCheckpointsCaughtUpLive(t *testing.T) {
	_, c := start(t)
	appendN(t, c, "a-1", 2)
	evs := readAll(t, c, client.ReadAllOptions{}, 100)
	first := evs[len(evs)-2] // the first user event

	sub, err := c.SubscribeToAll(ctx(t), client.SubscribeToAllOptions{
		From:            first.Position,
		Filter:          client.ExcludeSystemEventsFilter(),
		MaxSearchWindow: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	var got []uuid.UUID
	checkpoints, caughtUp := 0, false
	for !caughtUp {
		e := sub.Recv()
		switch {
		case e.EventAppeared != nil:
			got = append(got, e.EventAppeared.OriginalEvent().EventID)
		case e.CheckPointReached != nil:
			checkpoints++
		case e.CaughtUp != nil:
			caughtUp = true
		case e.SubscriptionDropped != nil:
			t.Fatalf("dropped: %v", e.SubscriptionDropped.Error)
		}
	}
	if len(got) != 1 || got[0] != evs[len(evs)-1].EventID {
		t.Errorf("caught up with %v; want only the event after the start (exclusive)", got)
	}
	if checkpoints == 0 {
		t.Error("no checkpoint with a search window of 1")
	}

	// Live: a system event is filtered out, a user event arrives.
	if _, err := c.AppendToStream(ctx(t), "$sys", client.AppendToStreamOptions{},
		client.EventData{EventType: "$thing", ContentType: client.ContentTypeJson, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	appendN(t, c, "b-1", 1)
	for {
		e := sub.Recv()
		if e.SubscriptionDropped != nil {
			t.Fatalf("dropped: %v", e.SubscriptionDropped.Error)
		}
		if e.EventAppeared != nil {
			if typ := e.EventAppeared.OriginalEvent().EventType; typ != "thing" {
				t.Fatalf("live event of type %q passed the filter", typ)
			}
			if e.EventAppeared.OriginalEvent().StreamID != "b-1" {
				t.Fatalf("live event from %s", e.EventAppeared.OriginalEvent().StreamID)
			}
			return
		}
	}
}

// The checkpoint before caught-up is at the end of what the subscription
// sent, never past a record appended meanwhile: a subscriber takes a
// checkpoint as "everything before this was delivered" and skips records at
// or before it (as Lectern's does), so a checkpoint past an unsent record
// would lose it.
func TestCheckpointBeforeCaughtUpSkipsNothing(t *testing.T) {
	_, c := start(t)
	appendN(t, c, "a-1", 1)
	var once sync.Once
	esdbfake.BeforeCaughtUp(t, func() { once.Do(func() { appendN(t, c, "late-1", 1) }) })
	sub, err := c.SubscribeToAll(ctx(t), client.SubscribeToAllOptions{
		From:   client.Start{},
		Filter: client.ExcludeSystemEventsFilter(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	var checkpoint *client.Position
	for {
		e := sub.Recv()
		switch {
		case e.SubscriptionDropped != nil:
			t.Fatalf("dropped: %v", e.SubscriptionDropped.Error)
		case e.CheckPointReached != nil:
			checkpoint = e.CheckPointReached
		case e.EventAppeared != nil:
			ev := e.EventAppeared.OriginalEvent()
			if checkpoint != nil && ev.Position.Commit < checkpoint.Commit {
				t.Fatalf("event of %s at %d came after a checkpoint at %d: a subscriber would skip it",
					ev.StreamID, ev.Position.Commit, checkpoint.Commit)
			}
			if ev.StreamID == "late-1" {
				return
			}
		}
	}
}

func grpcStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus(), true
	}
	return nil, false
}

// readAllErr reads $all forwards from p and returns how many events came and
// what the read ended with (nil at its end).
func readAllErr(t *testing.T, c *client.Client, p client.Position) (int, error) {
	t.Helper()
	rs, err := c.ReadAll(ctx(t), client.ReadAllOptions{From: p}, 10)
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	n := 0
	for {
		_, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// A plain read of $all from a position the server cannot read from, as
// KurrentDB 25.0 answers it (github.com/kurrent-io/KurrentDB v25.0.1):
//   - inside a record that other records follow: StorageReaderWorker.cs:472-474
//     (ReadAllResult.InvalidPosition), Enumerator.ReadAllForwards.cs:122-124,
//     RpcExceptions.cs:51-52: Unknown "Unexpected ReadAllResult: InvalidPosition";
//   - a prepare past the commit: the Position constructor throws
//     (Transport/Common/Position.cs:47-51, called at Grpc/ReadReq.cs:35-36)
//     outside any handler: Unknown "Exception was thrown by handler.";
//   - past the last record: AllReader.cs:86-88, the end: an empty read.
func TestReadAllFromPositionsItCannotReadFrom(t *testing.T) {
	_, c := start(t)
	first := appendN(t, c, "a-1", 1)
	last := appendN(t, c, "b-1", 1)
	for _, tc := range []struct {
		name string
		from client.Position
		code codes.Code // OK: an empty read
		msg  string
	}{
		{"inside a record", client.Position{Commit: first.CommitPosition + 1, Prepare: first.CommitPosition + 1},
			codes.Unknown, "Unexpected ReadAllResult: InvalidPosition"},
		{"prepare past commit", client.Position{Commit: first.CommitPosition, Prepare: first.CommitPosition + 1},
			codes.Unknown, "Exception was thrown by handler."},
		{"inside the last record", client.Position{Commit: last.CommitPosition + 1, Prepare: last.CommitPosition + 1},
			codes.OK, ""},
		{"far past the last record", client.Position{Commit: last.CommitPosition + 1<<20, Prepare: 0},
			codes.OK, ""},
	} {
		n, err := readAllErr(t, c, tc.from)
		if tc.code == codes.OK {
			if err != nil || n != 0 {
				t.Errorf("%s: %d events, %v; want an empty read", tc.name, n, err)
			}
			continue
		}
		st, ok := grpcStatus(err)
		if !ok || st.Code() != tc.code || st.Message() != tc.msg {
			t.Errorf("%s: %v; want %v %q", tc.name, err, tc.code, tc.msg)
		}
	}
}

// A subscription to $all from inside a record (a foreign checkpoint) is
// confirmed, then dropped during its catch-up
// (Enumerator.AllSubscriptionFiltered.cs:161-162, 171-176, 351-352, 183;
// StorageReaderWorker.cs:552-554; Streams.Read.cs:334-335,
// RpcExceptions.cs:259-260): the client returns the subscription, whose
// first Recv is a SubscriptionDropped.
func TestSubscribeToAllFromInsideARecordIsConfirmedThenDropped(t *testing.T) {
	_, c := start(t)
	first := appendN(t, c, "a-1", 1)
	appendN(t, c, "b-1", 1) // the record at first is not the last
	inside := first.CommitPosition + 1
	sub, err := c.SubscribeToAll(ctx(t), client.SubscribeToAllOptions{
		From:   client.Position{Commit: inside, Prepare: inside},
		Filter: client.ExcludeSystemEventsFilter(),
	})
	if err != nil {
		t.Fatalf("SubscribeToAll from inside a record: %v; want it confirmed, then dropped", err)
	}
	defer func() { _ = sub.Close() }()
	ev := sub.Recv()
	if ev.SubscriptionDropped == nil {
		t.Fatalf("first message %+v, want the subscription dropped", ev)
	}
	st, ok := grpcStatus(ev.SubscriptionDropped.Error)
	if !ok || st.Code() != codes.InvalidArgument || st.Message() != "Trying to read from an invalid position." {
		t.Errorf("dropped with %v, want InvalidArgument \"Trying to read from an invalid position.\"", ev.SubscriptionDropped.Error)
	}
}

// A prepare past the commit fails where the request is read, before any
// confirmation (Grpc/ReadReq.cs:43-44, Transport/Common/Position.cs:47-51).
func TestSubscribeToAllWithPrepareAfterCommitIsRefused(t *testing.T) {
	_, c := start(t)
	first := appendN(t, c, "a-1", 1)
	sub, err := c.SubscribeToAll(ctx(t), client.SubscribeToAllOptions{
		From:   client.Position{Commit: first.CommitPosition, Prepare: first.CommitPosition + 1},
		Filter: client.ExcludeSystemEventsFilter(),
	})
	if err == nil {
		_ = sub.Close()
		t.Fatal("SubscribeToAll with a prepare past its commit succeeded")
	}
	st, ok := grpcStatus(err)
	if !ok || st.Code() != codes.Unknown || st.Message() != "Exception was thrown by handler." {
		t.Errorf("SubscribeToAll: %v; want Unknown \"Exception was thrown by handler.\"", err)
	}
}

// A subscription to $all from at or past the last record (a checkpoint of a
// longer log) goes live at once, and skips live events at or before its
// start (Enumerator.AllSubscriptionFiltered.cs:161, 403: the confirmation's
// position is the last record's; 171-172: GoLive without a read; 221-228).
func TestSubscribeToAllFromPastTheLastRecordGoesLive(t *testing.T) {
	_, c := start(t)
	last := appendN(t, c, "a-1", 1)
	from := last.CommitPosition + 4096
	sub, err := c.SubscribeToAll(ctx(t), client.SubscribeToAllOptions{
		From:            client.Position{Commit: from, Prepare: from},
		Filter:          client.ExcludeSystemEventsFilter(),
		MaxSearchWindow: 1,
	})
	if err != nil {
		t.Fatalf("SubscribeToAll from past the last record: %v; want it live", err)
	}
	defer func() { _ = sub.Close() }()
	for caughtUp := false; !caughtUp; {
		ev := sub.Recv()
		switch {
		case ev.SubscriptionDropped != nil:
			t.Fatalf("dropped: %v; want it live", ev.SubscriptionDropped.Error)
		case ev.EventAppeared != nil:
			t.Fatalf("event %s before caught-up; want none", ev.EventAppeared.OriginalEvent().StreamID)
		case ev.CaughtUp != nil:
			caughtUp = true
		}
	}
	// Two records below the start (the second over 4 KiB), then one past it.
	appendN(t, c, "below-1", 1)
	big := fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("x", 5000))
	if _, err := c.AppendToStream(ctx(t), "below-2", client.AppendToStreamOptions{},
		client.EventData{EventID: uuid.New(), EventType: "thing", ContentType: client.ContentTypeJson, Data: big}); err != nil {
		t.Fatal(err)
	}
	after := appendN(t, c, "after-1", 1)
	if after.CommitPosition <= from {
		t.Fatalf("the third append is at %d, not past the start %d", after.CommitPosition, from)
	}
	for {
		ev := sub.Recv()
		switch {
		case ev.SubscriptionDropped != nil:
			t.Fatalf("dropped: %v", ev.SubscriptionDropped.Error)
		case ev.CheckPointReached != nil && ev.CheckPointReached.Commit < from:
			t.Errorf("checkpoint at %d, before the start %d", ev.CheckPointReached.Commit, from)
		case ev.EventAppeared != nil:
			if got := ev.EventAppeared.OriginalEvent(); got.StreamID != "after-1" {
				t.Fatalf("live event of %s at %d, at or before the start %d", got.StreamID, got.Position.Commit, from)
			}
			return
		}
	}
}

func TestSubscribeToStreamFromRevision(t *testing.T) {
	_, c := start(t)
	appendN(t, c, "s-1", 3)
	sub, err := c.SubscribeToStream(ctx(t), "s-1", client.SubscribeToStreamOptions{From: client.Revision(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	var revs []uint64
	for {
		e := sub.Recv()
		if e.SubscriptionDropped != nil {
			t.Fatal(e.SubscriptionDropped.Error)
		}
		if e.EventAppeared != nil {
			revs = append(revs, e.EventAppeared.OriginalEvent().EventNumber)
		}
		if e.CaughtUp != nil {
			break
		}
	}
	if len(revs) != 2 || revs[0] != 1 || revs[1] != 2 {
		t.Errorf("revisions %v, want [1 2]", revs)
	}
}

func errCode(err error) client.ErrorCode {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return -1
}

func TestWrongExpectedVersion(t *testing.T) {
	_, c := start(t)
	appendN(t, c, "w-1", 1)
	_, err := c.AppendToStream(ctx(t), "w-1", client.AppendToStreamOptions{ExpectedRevision: client.NoStream{}},
		client.EventData{EventType: "x", ContentType: client.ContentTypeJson, Data: []byte(`{}`)})
	if errCode(err) != client.ErrorCodeWrongExpectedVersion {
		t.Errorf("err = %v, want wrong expected version", err)
	}
}

func TestDeleteAndTombstone(t *testing.T) {
	_, c := start(t)
	appendN(t, c, "d-1", 2)
	if _, err := c.DeleteStream(ctx(t), "d-1", client.DeleteStreamOptions{ExpectedRevision: client.Revision(1)}); err != nil {
		t.Fatal(err)
	}
	rs, err := c.ReadStream(ctx(t), "d-1", client.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); errCode(err) != client.ErrorCodeResourceNotFound {
		t.Errorf("read of a deleted stream: %v, want not found", err)
	}
	rs.Close()
	// A soft-deleted stream can be written again, continuing its revisions.
	res, err := c.AppendToStream(ctx(t), "d-1", client.AppendToStreamOptions{ExpectedRevision: client.NoStream{}},
		client.EventData{EventType: "x", ContentType: client.ContentTypeJson, Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.NextExpectedVersion != 2 {
		t.Errorf("revision after recreate %d, want 2", res.NextExpectedVersion)
	}

	appendN(t, c, "t-1", 1)
	if _, err := c.TombstoneStream(ctx(t), "t-1", client.TombstoneStreamOptions{ExpectedRevision: client.Any{}}); err != nil {
		t.Fatal(err)
	}
	rs, err = c.ReadStream(ctx(t), "t-1", client.ReadStreamOptions{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); errCode(err) != client.ErrorCodeStreamDeleted {
		t.Errorf("read of a tombstoned stream: %v, want stream deleted", err)
	}
	rs.Close()
	_, err = c.AppendToStream(ctx(t), "t-1", client.AppendToStreamOptions{},
		client.EventData{EventType: "x", ContentType: client.ContentTypeJson, Data: []byte(`{}`)})
	if errCode(err) != client.ErrorCodeStreamDeleted {
		t.Errorf("append to a tombstoned stream: %v, want stream deleted", err)
	}
}

// A client configured for frequent keepalive pings is served: the settings
// are accepted and calls go through. (The server permits pings every second,
// with or without a call in flight. grpc-go raises a client's interval below
// 10 s to 10 s, and offers no shorter one, so an idle spell a test can
// afford holds no ping: waiting one out would prove no more than a second
// call does.)
func TestKeepaliveOptionsAccepted(t *testing.T) {
	s, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := esdbfake.NewClient(t, s.URL()+"&keepAliveInterval=1000&keepAliveTimeout=1000")
	appendN(t, c, "k-1", 1)
	appendN(t, c, "k-1", 1)
}

// As the real server (24.10, 25.0): an append is capped at 1 MiB counting
// data, metadata and twice the type's length, summed over its events; past
// it the answer is InvalidArgument and nothing is written.
func TestMaximumAppendSize(t *testing.T) {
	c := esdbfake.NewClient(t, esdbfake.Start(t))
	typ := "thing.sized" // 11 bytes, counted twice
	event := func(data int) client.EventData {
		return client.EventData{EventID: uuid.New(), EventType: typ, ContentType: client.ContentTypeBinary,
			Data: make([]byte, data), Metadata: make([]byte, 100)}
	}
	exactly := esdbfake.MaxAppendSize - 100 - 2*len(typ)
	if _, err := c.AppendToStream(ctx(t), "sized-1", client.AppendToStreamOptions{}, event(exactly)); err != nil {
		t.Fatalf("an append of exactly the cap: %v", err)
	}
	for name, evs := range map[string][]client.EventData{
		"one event a byte over": {event(exactly + 1)},
		"two events together":   {event(exactly / 2), event(exactly / 2)},
	} {
		_, err := c.AppendToStream(ctx(t), "sized-2", client.AppendToStreamOptions{}, evs...)
		var esErr *client.Error
		if !errors.As(err, &esErr) || status.Code(errors.Unwrap(esErr)) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	rs, err := c.ReadStream(ctx(t), "sized-2", client.ReadStreamOptions{}, 10)
	if err == nil {
		defer rs.Close()
		if ev, err := rs.Recv(); err == nil {
			t.Errorf("a refused append wrote %v", ev.OriginalEvent().EventID)
		}
	}
}

// A repeated append of revision any is recognised only within the server's
// window of recent writes; past it, the same events are written again.
func TestAnyRevisionRepeatsWithinAWindow(t *testing.T) {
	c := esdbfake.NewClient(t, esdbfake.Start(t))
	ev := client.EventData{EventID: uuid.New(), EventType: "thing.done", ContentType: client.ContentTypeJson, Data: []byte(`{}`)}
	appendAny := func(stream string, e client.EventData) {
		t.Helper()
		if _, err := c.AppendToStream(ctx(t), stream, client.AppendToStreamOptions{ExpectedRevision: client.Any{}}, e); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		rs, err := c.ReadStream(ctx(t), "any-1", client.ReadStreamOptions{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		n := 0
		for {
			if _, err := rs.Recv(); err != nil {
				return n
			}
			n++
		}
	}
	appendAny("any-1", ev)
	appendAny("any-1", ev) // a retry at once: recognised
	if n := count(); n != 1 {
		t.Fatalf("%d events after a repeat within the window, want 1", n)
	}
	for i := range esdbfake.AnyDedupWindow {
		appendAny(fmt.Sprintf("other-%d", i), client.EventData{EventID: uuid.New(), EventType: "thing.done", ContentType: client.ContentTypeJson, Data: []byte(`{}`)})
	}
	appendAny("any-1", ev) // the same event, long after
	if n := count(); n != 2 {
		t.Fatalf("%d events after a repeat past the window, want 2", n)
	}
}

// A read of $all backwards may start at the end of the log (the writer
// checkpoint, where a filtered subscription's last checkpoint is): it reads
// the last record. Past it the server throws (KurrentDB v25.0.0,
// TFChunkReader.cs:89-93: "Requested position ... is greater than writer
// checkpoint"), caught as ReadAllResult.Error (StorageReaderWorker.All.cs)
// and answered Unknown (Enumerator.ReadAllBackwards.cs, RpcExceptions.cs).
func TestReadAllBackwardsFromPastTheEndFails(t *testing.T) {
	s, c := start(t)
	last := appendN(t, c, "a-1", 2)
	end := esdbfake.LogEnd(t, s.URL())
	if end.Commit <= last.CommitPosition {
		t.Fatalf("log end %v not after the last record at %d", end, last.CommitPosition)
	}
	back := func(commit uint64) ([]*client.ResolvedEvent, error) {
		rs, err := c.ReadAll(ctx(t), client.ReadAllOptions{Direction: client.Backwards, From: client.Position{Commit: commit}}, 1)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var out []*client.ResolvedEvent
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, ev)
		}
	}
	evs, err := back(end.Commit)
	if err != nil || len(evs) != 1 || evs[0].OriginalEvent().Position.Commit != last.CommitPosition {
		t.Errorf("backwards from the end: %d events, %v; want the last record", len(evs), err)
	}
	for _, past := range []uint64{end.Commit + 1, end.Commit + 1<<30} {
		_, err := back(past)
		st, ok := grpcStatus(err)
		if !ok || st.Code() != codes.Unknown || st.Message() != "Unexpected ReadAllResult: Error" {
			t.Errorf("backwards from %d, past the end %d: %v; want Unknown \"Unexpected ReadAllResult: Error\"", past, end.Commit, err)
		}
	}
}
