package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/storetest"
	"lectern/pgtest"
	"lectern/poll"
)

// pending queues nothing: it builds the request runBatch takes.
func pending(t *testing.T, s *Store, stream string, exact int64, e eventstore.EventData) *pendingAppend {
	t.Helper()
	p, err := s.newPending(context.Background(), stream, exact, e)
	if err != nil {
		t.Fatal(err)
	}
	return p
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
					errs <- fmt.Errorf("writer %d append %d: %w %+v", w, i, err, res)
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
	// The log shows an event once the cluster's oldest running transaction
	// (perhaps another test's, in another database) is younger: read it
	// until every event shows, or long after they all should.
	want := writers*appends + won[shared[0]] + won[shared[1]]
	var all []eventstore.RecordedEvent
	poll.Until(10*time.Second, func() bool {
		all = readLog(t, s)
		return len(all) >= want
	})
	if len(all) != want {
		t.Errorf("the log holds %d events, want %d", len(all), want)
	}
}

// readLog reads the whole visible log, checking its order.
func readLog(t *testing.T, s *Store) []eventstore.RecordedEvent {
	t.Helper()
	var all []eventstore.RecordedEvent
	for after := (eventstore.Position{}); ; {
		page, err := s.ReadAll(context.Background(), after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		for _, e := range page {
			if e.Position.Compare(after) <= 0 {
				t.Fatalf("log out of order: %v after %v", e.Position, after)
			}
			after = e.Position
		}
		all = append(all, page...)
	}
}

// A version the store knows to exist spares the expected-version check, but
// never loosens it: a stale version still collides, a version past the end
// is still refused, a retry is still idempotent, and the check still runs
// for versions the store has not seen.
func TestKnownVersionsKeepChecks(t *testing.T) {
	pool := pgtest.Pool(t)
	s, other := New(pool, nil), New(pool, nil)
	defer s.Close()
	defer other.Close()
	ctx := context.Background()
	stream := batchStream("known")
	var evs []eventstore.EventData
	for i := range 3 {
		evs = append(evs, storetest.Event("known", i))
		if _, err := s.Append(ctx, stream, eventstore.Exact(int64(i)), evs[i:]); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []int64{2, 5, -1} { // stale; past the end; no such version
		if _, err := s.Append(ctx, stream, eventstore.Exact(v), []eventstore.EventData{storetest.Event("bad", int(v))}); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			t.Errorf("append at %d: %v, want a wrong expected version", v, err)
		}
	}
	if res, err := s.Append(ctx, stream, eventstore.Exact(1), evs[1:2]); err != nil || res.Version != 2 {
		t.Errorf("retry of event 2: %+v %v, want version 2", res, err)
	}
	// Another store appends event 4: s still knows 3 only.
	fourth := storetest.Event("other", 4)
	if _, err := other.Append(ctx, stream, eventstore.Exact(3), []eventstore.EventData{fourth}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, stream, eventstore.Exact(3), []eventstore.EventData{storetest.Event("late", 4)}); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("append at a version taken meanwhile: %v, want a wrong expected version", err)
	}
	if res, err := s.Append(ctx, stream, eventstore.Exact(3), []eventstore.EventData{fourth}); err != nil || res.Version != 4 {
		t.Errorf("retry of event 4: %+v %v, want version 4", res, err)
	}
	if _, err := s.Append(ctx, stream, eventstore.Exact(6), []eventstore.EventData{storetest.Event("gap", 7)}); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("append past the end of a stream another store extended: %v, want a wrong expected version", err)
	}
	if res, err := s.Append(ctx, stream, eventstore.Exact(4), []eventstore.EventData{storetest.Event("next", 5)}); err != nil || res.Version != 5 {
		t.Errorf("append at a version only the database knows: %+v %v, want version 5", res, err)
	}
	got, err := s.ReadStream(ctx, stream, eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if e.Version != int64(i+1) {
			t.Fatalf("event %d has version %d", i, e.Version)
		}
	}
	if len(got) != 5 {
		t.Errorf("the stream holds %d events, want 5", len(got))
	}

	// In one batch: rows at known versions, at versions checked, past the end.
	fresh := New(pool, nil)
	defer fresh.Close()
	known, unknown, gap := batchStream("b-known"), batchStream("b-unknown"), batchStream("b-gap")
	for _, st := range []string{known, unknown, gap} {
		if _, err := s.Append(ctx, st, eventstore.NoStream, []eventstore.EventData{storetest.Event("seed", 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fresh.ReadStream(ctx, known, eventstore.Backwards, 0, 1); err != nil { // fresh learns known's version 1
		t.Fatal(err)
	}
	batch := []*pendingAppend{
		pending(t, fresh, known, 1, storetest.Event("a", 1)),
		pending(t, fresh, unknown, 1, storetest.Event("b", 1)),
		pending(t, fresh, gap, 2, storetest.Event("c", 1)),
	}
	if chk := fresh.heads.checks(batch); chk[0] || !chk[1] || !chk[2] {
		t.Fatalf("checks %v, want only the unseen versions checked", chk)
	}
	fresh.runBatch(batch)
	for i, p := range batch {
		o := <-p.done
		if want := i < 2; (o.err == nil) != want || (want && o.res.Version != 2) {
			t.Errorf("append %d: %+v %v", i, o.res, o.err)
		}
	}
	if got, _ := fresh.ReadStream(ctx, gap, eventstore.Forwards, 1, 0); len(got) != 1 {
		t.Errorf("the gap append was written")
	}
}

// The batch statements run on cached generic plans that probe the
// (stream_id, version) index row by row, whatever the table's size when
// they were planned: no hashed subplan over the events table, no seq scan.
func TestBatchPlans(t *testing.T) {
	ctx := context.Background()
	conn, err := pgtest.Fresh(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	sqls := map[string]string{"one": appendOneSQL, "one unchecked": appendOneUncheckedSQL, "2": batchSQL[1], "8": batchSQL[3], fmt.Sprint(maxBatch): batchSQL[len(batchSQL)-1]}
	for name, sql := range sqls {
		sd, err := conn.Conn().Prepare(ctx, "plan_"+strings.ReplaceAll(name, " ", "_"), sql)
		if err != nil {
			t.Fatal(err)
		}
		args := make([]string, len(sd.ParamOIDs))
		for i := range args {
			args[i] = "NULL"
		}
		text := pgtest.Explain(t, conn, "EXECUTE "+sd.Name+"("+strings.Join(args, ", ")+")")
		if strings.Contains(text, "hashed") || strings.Contains(text, "Seq Scan") {
			t.Errorf("%s: plan reads the whole table:\n%s", name, text)
		}
	}

	// Without forcing: after its first custom plans, a batch statement is
	// planned no more.
	if _, err := conn.Exec(ctx, `RESET plan_cache_mode`); err != nil {
		t.Fatal(err)
	}
	s := New(pgtest.Pool(t), nil)
	defer s.Close()
	for i := range 8 {
		var batch []*pendingAppend
		for j := range 2 {
			batch = append(batch, pending(t, s, batchStream(fmt.Sprint("plan", i, j)), 0, storetest.Event("plan", j)))
		}
		b := s.prepare(batch)
		rows, err := conn.Query(ctx, b.sql, b.args...)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var generic, custom int64
	if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`, batchSQL[1]).Scan(&generic, &custom); err != nil {
		t.Fatal(err)
	}
	if generic == 0 {
		t.Errorf("the 2-row batch statement was planned %d times and never used a generic plan", custom)
	}
}

// Every append is announced to listening processes, without a NOTIFY of its
// own: a listener that reads only when notified sees the last event of a
// burst of concurrent appends soon after it commits, and a lone append
// after a pause.
func TestAppendsAreAnnounced(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listener := listenForAppends(t, ctx, pool)
	s := New(pool, nil)
	defer s.Close()
	reader := New(pool, nil)
	defer reader.Close()

	const writers, appends = 8, 40
	streams := make([]string, writers)
	for w := range streams {
		streams[w] = batchStream(fmt.Sprint("announced", w))
	}
	// seen reports how many events of streams the listener has read.
	var mu sync.Mutex
	seen := 0
	notified := make(chan struct{}, 1)
	listenCtx, stopListening := context.WithCancel(ctx)
	stopped := make(chan struct{})
	defer func() { stopListening(); <-stopped }() // before the connection closes
	go func() {
		defer close(stopped)
		for {
			if _, err := listener.WaitForNotification(listenCtx); err != nil {
				return
			}
			n := 0
			for _, st := range streams {
				evs, err := reader.ReadStream(listenCtx, st, eventstore.Forwards, 1, 0)
				if err != nil {
					return
				}
				n += len(evs)
			}
			mu.Lock()
			seen = n
			mu.Unlock()
			select {
			case notified <- struct{}{}:
			default:
			}
		}
	}()
	waitSeen := func(want int) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			mu.Lock()
			n := seen
			mu.Unlock()
			if n == want {
				return
			}
			select {
			case <-notified:
			case <-deadline:
				t.Fatalf("the listener saw %d events, want %d", n, want)
			}
		}
	}

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				if _, err := s.Append(ctx, streams[w], eventstore.Exact(int64(i)), []eventstore.EventData{storetest.Event("announced", i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitSeen(writers * appends)

	// A pause: the burst's commits are announced and the notifier stands
	// down, and notifyInterval passes since the last NOTIFY, so that the
	// lone append's statement carries one.
	poll.Must(t, 5*time.Second, "the burst announced and notifyInterval past", func() bool {
		return !s.pending.Load() && !s.armed.Load() && s.clock()-s.lastNotify.Load() >= int64(notifyInterval)
	})
	if _, err := s.Append(ctx, streams[0], eventstore.Exact(appends), []eventstore.EventData{storetest.Event("lone", 0)}); err != nil {
		t.Fatal(err)
	}
	waitSeen(writers*appends + 1)
}

// stopClock stops s's clock (see clock) at zero: from then on it moves only
// by advance, so that checks against notifyInterval hold however long the
// test's goroutine is descheduled. Call it before the notifier starts.
func stopClock(s *Store) (advance func(time.Duration)) {
	var now atomic.Int64
	s.since = func(time.Time) time.Duration { return time.Duration(now.Load()) }
	return func(d time.Duration) { now.Add(int64(d)) }
}

// A statement carries a NOTIFY once per notifyInterval (the notifier's own
// counts); a commit without one arms the notifier, which announces it once
// notifyInterval+notifySlack have passed since the last NOTIFY and stands
// down; a carrier clears the commits recorded before it only.
func TestCarry(t *testing.T) {
	s := New(pgtest.Pool(t), nil)
	defer s.Close()
	advance := stopClock(s)
	if ok, payload, _ := s.carry([]string{"agent.created"}); !ok || payload != "agent.created" {
		t.Fatalf("the first statement carries no NOTIFY naming its events' type: %v %q", ok, payload)
	}
	advance(notifyInterval - 1)
	if ok, _, _ := s.carry([]string{"agent.created"}); ok {
		t.Fatal("two NOTIFYs within notifyInterval")
	}
	s.unannounced([]string{"agent.created"})
	if !s.pending.Load() || !s.armed.Load() {
		t.Fatal("a commit without a NOTIFY is not watched")
	}
	advance(notifySlack + 1) // notifyInterval+notifySlack since the last NOTIFY
	poll.Must(t, 5*time.Second, "the notifier announces the commit and stands down", func() bool {
		return !s.pending.Load() && !s.armed.Load()
	})
	if ok, _, _ := s.carry([]string{"class.created"}); ok {
		t.Fatal("a statement carries a NOTIFY right after the notifier's")
	}
	advance(notifyInterval)
	if ok, payload, _ := s.carry([]string{"class.created"}); !ok || payload != "class.created" {
		t.Fatalf("no NOTIFY carried once notifyInterval has passed, or one naming announced types: %v %q", ok, payload)
	}

	// A commit recorded while a carrier is on its way stays pending after
	// the carrier commits; one recorded before does not. The carrier names
	// the types of the commits before it with its own. (No notifier runs for
	// this store, to clear them meanwhile.)
	c := New(pgtest.Pool(t), nil)
	c.Close()
	c.wakeOnce.Do(func() {})
	advance = stopClock(c)
	c.unannounced([]string{"user.signed_up"})
	_, payload, commits := c.carry([]string{"agent.created", "agent.created"})
	if payload != "agent.created,user.signed_up" {
		t.Errorf("carrier's payload %q, want its own and the pending commit's types", payload)
	}
	c.unannounced(nil)
	c.announced(commits)
	if !c.pending.Load() {
		t.Error("a commit recorded after the carrier was sent is taken as announced")
	}
	advance(notifyInterval)
	_, payload, commits = c.carry([]string{"agent.created"})
	if payload != "" {
		t.Errorf("a commit of unknown types is announced as %q, want the empty payload (any type)", payload)
	}
	c.announced(commits)
	if c.pending.Load() {
		t.Error("a carrier sent after the last commit leaves it pending")
	}
	advance(notifyInterval)
	if _, payload, _ = c.carry([]string{"agent.created"}); payload != "agent.created" {
		t.Errorf("announced types are announced again: %q", payload)
	}
}

// A commit that carried no NOTIFY (one came with the statement before, less
// than notifyInterval ago) is announced all the same, by the notifier, when
// no statement follows it.
func TestTrailingCommitAnnounced(t *testing.T) {
	pool := pgtest.Fresh(t) // no other store notifies here
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listener := listenForAppends(t, ctx, pool)
	notified := func() bool {
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := listener.WaitForNotification(wait)
		return err == nil && slices.Equal(EventTypes(n.Payload), []string{storetest.Event("trailing", 0).Type})
	}
	s := New(pool, nil)
	defer s.Close()
	stream := batchStream("trailing")
	for v := range int64(3) {
		if v > 0 {
			s.lastNotify.Store(s.clock()) // as if a NOTIFY had just gone out
		}
		if _, err := s.Append(ctx, stream, eventstore.Exact(v), []eventstore.EventData{storetest.Event("trailing", int(v))}); err != nil {
			t.Fatal(err)
		}
		if !notified() {
			t.Fatalf("append %d was never announced", v+1)
		}
	}
}

// A statement that carries a NOTIFY and fails answers its appends as one
// that carries none: the NOTIFY goes with the failed transaction, and
// nothing of it is written.
func TestFailedCarrier(t *testing.T) {
	s := New(pgtest.Pool(t), nil)
	defer s.Close()
	ctx := context.Background()
	taken := batchStream("carrier-taken")
	if _, err := s.Append(ctx, taken, eventstore.NoStream, []eventstore.EventData{storetest.Event("seed", 0)}); err != nil {
		t.Fatal(err)
	}
	fresh := batchStream("carrier-fresh")
	for _, batch := range [][]*pendingAppend{
		{pending(t, s, taken, 0, storetest.Event("lone", 1))},
		{pending(t, s, taken, 0, storetest.Event("a", 1)), pending(t, s, fresh, 0, storetest.Event("b", 1))},
	} {
		s.lastNotify.Store(s.clock() - int64(time.Hour)) // a NOTIFY is due
		b := s.prepare(batch)
		if !b.notify {
			t.Fatal("no NOTIFY carried when one is due")
		}
		written, err := b.run(s)
		if err == nil {
			t.Fatalf("a statement that takes a taken version wrote %v", written)
		}
		s.settle(b, written, err)
		s.answer(b, written, err)
		for _, p := range batch {
			o := <-p.done
			switch p.stream {
			case taken:
				if !errors.Is(o.err, eventstore.ErrWrongExpectedVersion) {
					t.Errorf("append to a taken version: %v, want a wrong expected version", o.err)
				}
			default:
				if o.err != nil || o.res.Version != 1 {
					t.Errorf("valid append of a failed batch: %+v %v", o.res, o.err)
				}
			}
		}
	}
	if got, _ := s.ReadStream(ctx, taken, eventstore.Forwards, 1, 0); len(got) != 1 {
		t.Errorf("%s holds %d events, want 1", taken, len(got))
	}
}

// listenForAppends opens a connection of its own listening on EventsChannel,
// closed when the test ends.
func listenForAppends(t *testing.T, ctx context.Context, pool *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		t.Fatal(err)
	}
	return conn
}
