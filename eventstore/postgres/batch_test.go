package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/storetest"
	"lectern/pgtest"
)

// pending queues nothing: it builds the request runBatch takes.
func pending(t *testing.T, s *Store, stream string, exact int64, e eventstore.EventData) *pendingAppend {
	t.Helper()
	ids, data, metas, types, versions, recorded, err := s.encode([]eventstore.EventData{e})
	if err != nil {
		t.Fatal(err)
	}
	return &pendingAppend{ctx: context.Background(), stream: stream, exact: exact, id: ids[0], data: data[0], meta: metas[0],
		typ: types[0], sv: versions[0], rec: recorded[0], ev: e, done: make(chan appendOutcome, 1)}
}

func batchStream(name string) string { return "batch-" + name + "-" + uuid.NewString()[:8] }

// A batch gives each of its appends the answer it would have had alone.
func TestBatchOutcomes(t *testing.T) {
	s := New(pgtest.Pool(t), nil)
	defer s.Close()
	ctx := context.Background()
	existing := func(name string) (string, eventstore.EventData) {
		stream, e := batchStream(name), storetest.Event("seed", 0)
		if _, err := s.Append(ctx, stream, eventstore.NoStream, []eventstore.EventData{e}); err != nil {
			t.Fatal(err)
		}
		return stream, e
	}

	// One statement: two rows written in one transaction, a gap refused, a
	// retry of an event already in its stream accepted.
	fresh := batchStream("fresh")
	next, _ := existing("next")
	gap, _ := existing("gap")
	retried, seed := existing("retry")
	batch := []*pendingAppend{
		pending(t, s, fresh, 0, storetest.Event("a", 1)),
		pending(t, s, next, 1, storetest.Event("b", 2)),
		pending(t, s, gap, 3, storetest.Event("c", 3)),
		pending(t, s, retried, 5, seed),
	}
	s.runBatch(batch)
	out := make([]appendOutcome, len(batch))
	for i, p := range batch {
		out[i] = <-p.done
	}
	if out[0].err != nil || out[0].res.Version != 1 || out[1].err != nil || out[1].res.Version != 2 {
		t.Fatalf("written appends: %+v %v / %+v %v", out[0].res, out[0].err, out[1].res, out[1].err)
	}
	if out[0].res.Position.Commit != out[1].res.Position.Commit || out[0].res.Position == out[1].res.Position {
		t.Errorf("a batch is one transaction with distinct offsets: %v %v", out[0].res.Position, out[1].res.Position)
	}
	if !errors.Is(out[2].err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("append past the stream's end: %v, want a wrong expected version", out[2].err)
	}
	if out[3].err != nil || out[3].res.Version != 1 {
		t.Errorf("retry of a stored event: %+v, want its version 1", out[3])
	}

	// A version taken fails the statement: every append is run again alone.
	fresh2 := batchStream("fresh2")
	taken, _ := existing("taken")
	bad := storetest.Event("bad", 0)
	bad.Data = json.RawMessage(`{"not json`)
	invalid := batchStream("invalid")
	batch = []*pendingAppend{
		pending(t, s, fresh2, 0, storetest.Event("d", 4)),
		pending(t, s, taken, 0, storetest.Event("e", 5)),
		pending(t, s, invalid, 0, bad),
	}
	s.runBatch(batch)
	for i, p := range batch {
		out[i] = <-p.done
	}
	if out[0].err != nil || out[0].res.Version != 1 {
		t.Errorf("valid append of a failed batch: %+v", out[0])
	}
	if !errors.Is(out[1].err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("append to a taken version: %v, want a wrong expected version", out[1].err)
	}
	if out[2].err == nil || errors.Is(out[2].err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("invalid payload: %v, want its own error", out[2].err)
	}
	for _, stream := range []string{taken, invalid} {
		got, err := s.ReadStream(ctx, stream, eventstore.Forwards, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{taken: 1, invalid: 0}[stream]; len(got) != want {
			t.Errorf("%s holds %d events, want %d", stream, len(got), want)
		}
	}

	// An append whose caller gave up before it was sent is not sent.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	abandoned := batchStream("abandoned")
	p := pending(t, s, abandoned, 0, storetest.Event("f", 6))
	p.ctx = gone
	s.runBatch([]*pendingAppend{p})
	if o := <-p.done; !errors.Is(o.err, context.Canceled) {
		t.Errorf("abandoned append: %v", o.err)
	}
	if got, _ := s.ReadStream(ctx, abandoned, eventstore.Forwards, 1, 0); len(got) != 0 {
		t.Errorf("abandoned append was written")
	}
}

// Many concurrent writers, on their own streams and racing on shared ones:
// every append lands once, at its version, and the log reads in order.
func TestBatchConcurrentWriters(t *testing.T) {
	s := New(pgtest.Fresh(t), nil)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const writers, appends = 48, 25
	shared := []string{batchStream("shared0"), batchStream("shared1")}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]int{}
	errs := make(chan error, writers*appends)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := fmt.Sprintf("own-%d", w)
			for i := range appends {
				res, err := s.Append(ctx, own, eventstore.Exact(int64(i)), []eventstore.EventData{storetest.Event("own", i)})
				if err != nil || res.Version != int64(i+1) {
					errs <- fmt.Errorf("writer %d append %d: %v %+v", w, i, err, res)
					return
				}
				// Race everyone else for the next version of a shared stream.
				sh := shared[i%2]
				cur, err := s.ReadStream(ctx, sh, eventstore.Backwards, 0, 1)
				if err != nil {
					errs <- err
					return
				}
				v := int64(0)
				if len(cur) == 1 {
					v = cur[0].Version
				}
				_, err = s.Append(ctx, sh, eventstore.Exact(v), []eventstore.EventData{storetest.Event("shared", w)})
				switch {
				case err == nil:
					mu.Lock()
					won[sh]++
					mu.Unlock()
				case !errors.Is(err, eventstore.ErrWrongExpectedVersion):
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if s.batches.Load() == 0 {
		t.Error("no append was sent in a batch")
	}
	for err := range errs {
		t.Error(err)
	}
	for _, sh := range shared {
		got, err := s.ReadStream(ctx, sh, eventstore.Forwards, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != won[sh] {
			t.Errorf("%s holds %d events, %d appends succeeded", sh, len(got), won[sh])
		}
		for i, e := range got {
			if e.Version != int64(i+1) {
				t.Fatalf("%s: event %d has version %d", sh, i, e.Version)
			}
		}
	}
	var all []eventstore.RecordedEvent
	for after := (eventstore.Position{}); ; {
		page, err := s.ReadAll(ctx, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Position.Compare(after) <= 0 {
				t.Fatalf("log out of order: %v after %v", e.Position, after)
			}
			after = e.Position
		}
		all = append(all, page...)
	}
	if want := writers*appends + won[shared[0]] + won[shared[1]]; len(all) != want {
		t.Errorf("the log holds %d events, want %d", len(all), want)
	}
}
