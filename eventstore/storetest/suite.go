// Package storetest is the acceptance suite every eventstore.Store adapter
// must pass.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/eventstore"
)

// Harness builds the store under test.
type Harness struct {
	// New returns a store; streams written by earlier tests may be visible.
	New func(t *testing.T) eventstore.Store
	// Hold, when the adapter can, appends events in a transaction that stays
	// open until commit is called (or the test ends); the late-commit test is
	// skipped without it.
	Hold func(t *testing.T, ctx context.Context, stream string, evs []eventstore.EventData) (commit func() error, err error)
}

var streamSeq atomic.Int64

// uniqueStream names a stream no other test (or earlier run) has used.
func uniqueStream(category string) string {
	return fmt.Sprintf("%s%d-%s", category, streamSeq.Add(1), uuid.NewString()[:8])
}

// Event returns an event to append with a fresh id.
func Event(typ string, n int) eventstore.EventData {
	data, _ := json.Marshal(map[string]int{"n": n})
	return eventstore.EventData{
		ID:            uuid.New(),
		Type:          typ,
		SchemaVersion: 1,
		Data:          data,
		Metadata: eventstore.Metadata{CorrelationID: "corr", CausationID: "cause", UserID: 7, RequestID: "req",
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "lectern=1"},
		RecordedAt: time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC),
	}
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("AppendToNewStream", func(t *testing.T) { testAppendNew(t, h) })
	t.Run("AppendSizeCapped", func(t *testing.T) { testAppendSizeCapped(t, h) })
	t.Run("ExpectedVersions", func(t *testing.T) { testExpected(t, h) })
	t.Run("IdempotentRetry", func(t *testing.T) { testIdempotent(t, h) })
	t.Run("ReadStreamDirections", func(t *testing.T) { testReadStream(t, h) })
	t.Run("ReadAllOrderAndPaging", func(t *testing.T) { testReadAll(t, h) })
	t.Run("ConcurrentWritersOneWins", func(t *testing.T) { testConcurrent(t, h) })
	t.Run("ConcurrentAnyAppendsAllLand", func(t *testing.T) { testConcurrentAny(t, h) })
	t.Run("LateCommitNeitherSkippedNorReordered", func(t *testing.T) { testLateCommit(t, h) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// An append over eventstore.MaxAppendBytes (EventStoreDB's maximum append
// size) is refused on either store, in one event or spread over several, and
// writes nothing; one just under it lands.
func testAppendSizeCapped(t *testing.T, h Harness) {
	s := h.New(t)
	sized := func(n int) eventstore.EventData {
		e := Event("thing.sized", 1)
		e.Data, _ = json.Marshal(map[string]string{"text": strings.Repeat("x", n)})
		return e
	}
	for name, evs := range map[string][]eventstore.EventData{
		"one event":    {sized(eventstore.MaxAppendBytes)},
		"three events": {sized(eventstore.MaxAppendBytes / 3), sized(eventstore.MaxAppendBytes / 3), sized(eventstore.MaxAppendBytes / 3)},
	} {
		stream := uniqueStream("big")
		_, err := s.Append(ctx(t), stream, eventstore.NoStream, evs)
		if !errors.Is(err, eventstore.ErrAppendTooLarge) {
			t.Errorf("%s over the cap: %v, want ErrAppendTooLarge", name, err)
		}
		if got, err := s.ReadStream(ctx(t), stream, eventstore.Forwards, 1, 0); err != nil || len(got) != 0 {
			t.Errorf("%s over the cap: stream holds %d events (%v)", name, len(got), err)
		}
	}
	stream := uniqueStream("big")
	if _, err := s.Append(ctx(t), stream, eventstore.Any, []eventstore.EventData{sized(eventstore.MaxAppendBytes - 4096)}); err != nil {
		t.Errorf("an append under the cap: %v", err)
	}
}

func testAppendNew(t *testing.T, h Harness) {
	s := h.New(t)
	stream := uniqueStream("thing")
	in := []eventstore.EventData{Event("thing.created", 1), Event("thing.renamed", 2)}
	res, err := s.Append(ctx(t), stream, eventstore.NoStream, in)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if res.Version != 2 {
		t.Errorf("version = %d, want 2", res.Version)
	}
	got, err := s.ReadStream(ctx(t), stream, eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d events, want 2", len(got))
	}
	for i, e := range got {
		want := in[i]
		if e.ID != want.ID || e.Type != want.Type || e.StreamID != stream || e.Version != int64(i+1) ||
			e.SchemaVersion != 1 || !e.RecordedAt.Equal(want.RecordedAt) {
			t.Errorf("event %d = %+v, want %+v at version %d", i, e, want, i+1)
		}
		if diff := cmp.Diff(want.Metadata, e.Metadata); diff != "" {
			t.Errorf("metadata (-want +got):\n%s", diff)
		}
		var a, b map[string]int
		_ = json.Unmarshal(want.Data, &a)
		_ = json.Unmarshal(e.Data, &b)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("data (-want +got):\n%s", diff)
		}
	}
	if got[1].Position.Compare(got[0].Position) <= 0 {
		t.Errorf("positions not increasing: %v then %v", got[0].Position, got[1].Position)
	}
	if res.Position != got[1].Position {
		t.Errorf("append position %v, last event at %v", res.Position, got[1].Position)
	}
	p, err := eventstore.ParsePosition(res.Position.String())
	if err != nil || p != res.Position {
		t.Errorf("position %v does not survive its cursor string: %v, %v", res.Position, p, err)
	}
}

func testExpected(t *testing.T, h Harness) {
	s := h.New(t)
	c := ctx(t)
	stream := uniqueStream("exp")
	wrong := func(name string, exp eventstore.ExpectedVersion) {
		t.Helper()
		_, err := s.Append(c, stream, exp, []eventstore.EventData{Event("x", 0)})
		if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			t.Errorf("%s: err = %v, want ErrWrongExpectedVersion", name, err)
		}
	}
	ok := func(name string, exp eventstore.ExpectedVersion, wantVersion int64) {
		t.Helper()
		res, err := s.Append(c, stream, exp, []eventstore.EventData{Event("x", 0)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Version != wantVersion {
			t.Errorf("%s: version %d, want %d", name, res.Version, wantVersion)
		}
	}
	wrong("stream exists on a missing stream", eventstore.StreamExists)
	wrong("exact 1 on a missing stream", eventstore.Exact(1))
	ok("no stream", eventstore.NoStream, 1)
	wrong("no stream again", eventstore.NoStream)
	wrong("exact 0 on an existing stream", eventstore.Exact(0))
	wrong("exact 2 when at 1 (no gaps)", eventstore.Exact(2))
	ok("exact 1", eventstore.Exact(1), 2)
	wrong("stale exact 1", eventstore.Exact(1))
	ok("stream exists", eventstore.StreamExists, 3)
	ok("any", eventstore.Any, 4)
	ok("any on a new stream", eventstore.Any, 5)
	got, err := s.ReadStream(c, stream, eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Errorf("stream holds %d events, want 5: failed appends must write nothing", len(got))
	}
}

func testIdempotent(t *testing.T, h Harness) {
	s := h.New(t)
	c := ctx(t)
	stream := uniqueStream("idem")
	evs := []eventstore.EventData{Event("a", 1), Event("b", 2)}
	first, err := s.Append(c, stream, eventstore.NoStream, evs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(c, stream, eventstore.NoStream, evs)
	if err != nil {
		t.Fatalf("retry of the same events: %v", err)
	}
	if again.Version != first.Version {
		t.Errorf("retry version %d, want %d", again.Version, first.Version)
	}
	got, _ := s.ReadStream(c, stream, eventstore.Forwards, 1, 0)
	if len(got) != 2 {
		t.Errorf("stream holds %d events after a retry, want 2", len(got))
	}
	// A retried "any" append is idempotent too.
	anyEvs := []eventstore.EventData{Event("c", 3)}
	if _, err := s.Append(c, stream, eventstore.Any, anyEvs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(c, stream, eventstore.Any, anyEvs); err != nil {
		t.Fatalf("retry of an any append: %v", err)
	}
	if got, _ := s.ReadStream(c, stream, eventstore.Forwards, 1, 0); len(got) != 3 {
		t.Errorf("stream holds %d events after an any retry, want 3", len(got))
	}
	// Other events at a taken version are still refused.
	if _, err := s.Append(c, stream, eventstore.NoStream, []eventstore.EventData{Event("c", 3)}); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("new events at a taken version: %v", err)
	}
}

func testReadStream(t *testing.T, h Harness) {
	s := h.New(t)
	c := ctx(t)
	stream := uniqueStream("read")
	var evs []eventstore.EventData
	for i := range 5 {
		evs = append(evs, Event("n", i))
	}
	if _, err := s.Append(c, stream, eventstore.NoStream, evs); err != nil {
		t.Fatal(err)
	}
	versions := func(es []eventstore.RecordedEvent) []int64 {
		out := []int64{}
		for _, e := range es {
			out = append(out, e.Version)
		}
		return out
	}
	cases := []struct {
		name  string
		dir   eventstore.Direction
		from  int64
		limit int
		want  []int64
	}{
		{"forwards all", eventstore.Forwards, 1, 0, []int64{1, 2, 3, 4, 5}},
		{"forwards from 3", eventstore.Forwards, 3, 0, []int64{3, 4, 5}},
		{"forwards limit", eventstore.Forwards, 2, 2, []int64{2, 3}},
		{"backwards from end", eventstore.Backwards, 0, 0, []int64{5, 4, 3, 2, 1}},
		{"backwards from 2", eventstore.Backwards, 2, 0, []int64{2, 1}},
		{"backwards limit 1 is the last event", eventstore.Backwards, 0, 1, []int64{5}},
		{"past the end", eventstore.Forwards, 6, 0, []int64{}},
	}
	for _, tc := range cases {
		got, err := s.ReadStream(c, stream, tc.dir, tc.from, tc.limit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, versions(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	missing, err := s.ReadStream(c, uniqueStream("none"), eventstore.Forwards, 1, 0)
	if err != nil || len(missing) != 0 {
		t.Errorf("missing stream: %v, %v; want empty and no error", missing, err)
	}
	// ReadStreamPages: pages of 2, to the end or until told to stop.
	for _, tc := range []struct {
		name   string
		stopAt int // the page after which to stop (0: never)
		want   [][]int64
	}{
		{"every page", 0, [][]int64{{1, 2}, {3, 4}, {5}}},
		{"stopped after the second", 2, [][]int64{{1, 2}, {3, 4}}},
	} {
		var pages [][]int64
		err := eventstore.ReadStreamPages(c, s, stream, 2, func(es []eventstore.RecordedEvent) bool {
			pages = append(pages, versions(es))
			return len(pages) == tc.stopAt
		})
		if err != nil {
			t.Fatalf("ReadStreamPages, %s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, pages); diff != "" {
			t.Errorf("ReadStreamPages, %s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// readAllAfter reads the log after pos until it holds every id in want.
func readAllAfter(t *testing.T, s eventstore.Store, after eventstore.Position, want map[uuid.UUID]bool) []eventstore.RecordedEvent {
	t.Helper()
	var got []eventstore.RecordedEvent
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := s.ReadAll(ctx(t), after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.Position.Compare(after) <= 0 {
				t.Fatalf("ReadAll after %v returned %v", after, e.Position)
			}
			after = e.Position
			if want[e.ID] {
				got = append(got, e)
			}
		}
		if len(got) == len(want) {
			return got
		}
		if len(page) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("log holds %d of %d events", len(got), len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func testReadAll(t *testing.T, h Harness) {
	s := h.New(t)
	c := ctx(t)
	before := lastPosition(t, s)
	a, b := uniqueStream("all"), uniqueStream("all")
	var order []uuid.UUID
	for i := range 4 {
		stream := a
		if i%2 == 1 {
			stream = b
		}
		e := Event("n", i)
		order = append(order, e.ID)
		if _, err := s.Append(c, stream, eventstore.Any, []eventstore.EventData{e}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[uuid.UUID]bool{}
	for _, id := range order {
		want[id] = true
	}
	got := readAllAfter(t, s, before, want)
	var ids []uuid.UUID
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if diff := cmp.Diff(order, ids); diff != "" {
		t.Errorf("log order (-want +got):\n%s", diff)
	}
}

// lastPosition is the position of the newest visible event.
func lastPosition(t *testing.T, s eventstore.Store) eventstore.Position {
	t.Helper()
	var pos eventstore.Position
	for {
		page, err := s.ReadAll(ctx(t), pos, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return pos
		}
		pos = page[len(page)-1].Position
	}
}

func testConcurrent(t *testing.T, h Harness) {
	s := h.New(t)
	c := ctx(t)
	stream := uniqueStream("race")
	if _, err := s.Append(c, stream, eventstore.NoStream, []eventstore.EventData{Event("a", 0)}); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wins, losses atomic.Int32
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Append(c, stream, eventstore.Exact(1), []eventstore.EventData{Event("b", i)})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, eventstore.ErrWrongExpectedVersion):
				losses.Add(1)
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || losses.Load() != writers-1 {
		t.Errorf("wins %d losses %d, want 1 and %d", wins.Load(), losses.Load(), writers-1)
	}
}

func testConcurrentAny(t *testing.T, h Harness) {
	s := h.New(t)
	c := ctx(t)
	stream := uniqueStream("anyrace")
	const writers = 8
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Append(c, stream, eventstore.Any, []eventstore.EventData{Event("b", i)}); err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	got, err := s.ReadStream(c, stream, eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers {
		t.Errorf("stream holds %d events, want %d", len(got), writers)
	}
}

func testLateCommit(t *testing.T, h Harness) {
	if h.Hold == nil {
		t.Skip("this adapter cannot hold an append open; its appends are atomic on the server")
	}
	s := h.New(t)
	c := ctx(t)
	before := lastPosition(t, s)

	late := Event("late", 1)
	commit, err := h.Hold(t, c, uniqueStream("late"), []eventstore.EventData{late})
	if err != nil {
		t.Fatal(err)
	}
	early1, early2 := Event("early", 2), Event("early", 3)
	for _, e := range []eventstore.EventData{early1, early2} {
		if _, err := s.Append(c, uniqueStream("early"), eventstore.NoStream, []eventstore.EventData{e}); err != nil {
			t.Fatal(err)
		}
	}
	// While the first transaction is open, nothing after it may be read: a
	// reader that moved past the later events would never see it.
	page, err := s.ReadAll(c, before, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page {
		if e.ID == early1.ID || e.ID == early2.ID || e.ID == late.ID {
			t.Fatalf("read %s (%s) while an earlier transaction is still open", e.ID, e.Type)
		}
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	got := readAllAfter(t, s, before, map[uuid.UUID]bool{late.ID: true, early1.ID: true, early2.ID: true})
	var ids []uuid.UUID
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if diff := cmp.Diff([]uuid.UUID{late.ID, early1.ID, early2.ID}, ids); diff != "" {
		t.Errorf("log order (-want +got):\n%s", diff)
	}
}
