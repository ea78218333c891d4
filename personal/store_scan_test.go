package personal

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"lectern/eventstore"
)

// prefetchingKeys is a KeySource that Prefetches: it counts the statements
// Prefetch stands for, and the keys asked for that no Prefetch loaded.
type prefetchingKeys struct {
	keys       map[string]cipher.AEAD
	prefetched map[string]bool
	prefetches int
	unfetched  []string
}

func (k *prefetchingKeys) Key(_ context.Context, subject string, create bool) (cipher.AEAD, error) {
	if !create && !k.prefetched[subject] {
		k.unfetched = append(k.unfetched, subject)
	}
	if a, ok := k.keys[subject]; ok {
		return a, nil
	}
	if !create {
		return nil, ErrErased
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	a, err := newAEAD(raw)
	if err != nil {
		return nil, err
	}
	k.keys[subject] = a
	return a, nil
}

func (k *prefetchingKeys) Prefetch(_ context.Context, subjects []string) error {
	k.prefetches++
	for _, s := range subjects {
		k.prefetched[s] = true
	}
	return nil
}

// rawScanner passes its events the way the PostgreSQL store does: one
// RawEvent and one buffer for every row, overwritten once fn returns. It
// tells after, for each event, how many it had passed to fn.
type rawScanner struct {
	eventstore.Store
	evs       []eventstore.RawEvent
	delivered int
}

func (s *rawScanner) ScanAll(_ context.Context, _, _ eventstore.Position, _ int, fn func(*eventstore.RawEvent) error) (int, error) {
	var e eventstore.RawEvent
	var buf []byte
	for i, ev := range s.evs {
		buf = append(buf[:0], ev.StreamID...)
		buf = append(buf, ev.Type...)
		buf = append(buf, ev.Data...)
		buf = append(buf, ev.Metadata...)
		a, b, c := len(ev.StreamID), len(ev.StreamID)+len(ev.Type), len(ev.StreamID)+len(ev.Type)+len(ev.Data)
		e = ev
		e.StreamID, e.Type = buf[:a], buf[a:b]
		e.Data, e.Metadata = nil, nil
		if ev.Data != nil {
			e.Data = buf[b:c]
		}
		if ev.Metadata != nil {
			e.Metadata = buf[c:]
		}
		s.delivered = i + 1
		if err := fn(&e); err != nil {
			return i, err
		}
		for j := range buf { // the row's memory is the next row's
			buf[j] = '#'
		}
		e = eventstore.RawEvent{}
	}
	return len(s.evs), nil
}

// ScanAll loads the keys of its events a batch at a time, before it opens
// them: no key is asked for that a Prefetch did not load, and there are a
// few Prefetches for thousands of events. It holds a batch at most (so many
// events, so many bytes), copied from rows that do not outlive their call,
// and passes every event on, in order, as ReadAll would open it.
func TestScanAllPrefetchesABatchAtATime(t *testing.T) {
	ctx := context.Background()
	keys := &prefetchingKeys{keys: map[string]cipher.AEAD{}, prefetched: map[string]bool{}}
	sealer := NewSealer(keys)
	big := strings.Repeat("b", 400<<10)
	var evs []eventstore.RawEvent
	var want [][]byte
	add := func(typ, data string, actor int64) {
		t.Helper()
		stored := []byte(data)
		if typ == "user.signed_up" {
			sealed, err := sealer.Seal(ctx, typ, json.RawMessage(data), actor)
			if err != nil {
				t.Fatal(err)
			}
			stored = sealed
		}
		evs = append(evs, eventstore.RawEvent{ID: uuid.New(), StreamID: []byte(fmt.Sprintf("s-%d", len(evs))),
			Version: 1, Position: eventstore.Position{Commit: uint64(len(evs) + 1)}, Type: []byte(typ), SchemaVersion: 1,
			Data: stored, Metadata: []byte(`{"user_id":` + fmt.Sprint(actor) + `}`)})
		want = append(want, []byte(data))
	}
	for i := range 3 {
		add("class.created", fmt.Sprintf(`{"class_id":%d}`, i), 1) // before any sealed event
	}
	for i := range 2500 {
		id := int64(i%70 + 1)
		switch {
		case i%3 == 0:
			add("class.created", fmt.Sprintf(`{"class_id":%d}`, i), id)
		case i >= 2000 && i%20 == 1: // big ones: the batch is cut by its bytes
			add("user.signed_up", fmt.Sprintf(`{"user_id":%d,"email":"u%d@example.com","name":"%s"}`, id, id, big), id)
		default:
			add("user.signed_up", fmt.Sprintf(`{"user_id":%d,"email":"u%d@example.com","name":"U %d"}`, id, id, i), id)
		}
	}
	evs = append(evs, eventstore.RawEvent{ID: uuid.New(), StreamID: []byte("s-null"), Position: eventstore.Position{Commit: uint64(len(evs) + 1)},
		Type: []byte("agent.created"), SchemaVersion: 2}) // payload and metadata NULL
	want = append(want, nil)
	keys.prefetched = map[string]bool{} // what sealing created is not loaded
	keys.unfetched = nil

	inner := &rawScanner{evs: evs}
	store := NewStore(inner, sealer)
	var got []eventstore.RawEvent
	maxHeld, maxHeldBytes := 0, 0
	n, err := store.ScanAll(ctx, eventstore.Position{}, eventstore.Position{}, 0, func(e *eventstore.RawEvent) error {
		held, heldBytes := inner.delivered-len(got)-1, 0
		for _, ev := range evs[len(got)+1 : inner.delivered] {
			heldBytes += len(ev.StreamID) + len(ev.Type) + len(ev.Data) + len(ev.Metadata)
		}
		maxHeld, maxHeldBytes = max(maxHeld, held), max(maxHeldBytes, heldBytes)
		c := *e
		c.StreamID, c.Type = bytes.Clone(e.StreamID), bytes.Clone(e.Type)
		c.Data, c.Metadata = bytes.Clone(e.Data), bytes.Clone(e.Metadata)
		got = append(got, c)
		return nil
	})
	if err != nil || n != len(evs) || len(got) != len(evs) {
		t.Fatalf("ScanAll passed %d (%d) of %d events: %v", n, len(got), len(evs), err)
	}
	for i, e := range got {
		w := evs[i]
		if e.ID != w.ID || e.Position != w.Position || string(e.StreamID) != string(w.StreamID) || string(e.Type) != string(w.Type) ||
			string(e.Metadata) != string(w.Metadata) || (e.Data == nil) != (want[i] == nil) || (e.Metadata == nil) != (w.Metadata == nil) {
			t.Fatalf("event %d passed as %+v, want %+v", i, e, w)
		}
		if want[i] != nil && !sameJSON(t, e.Data, want[i]) {
			t.Fatalf("event %d opened to %.200s, want %.200s", i, e.Data, want[i])
		}
	}
	if len(keys.unfetched) > 0 {
		t.Errorf("%d keys were asked for that no Prefetch loaded (%v...)", len(keys.unfetched), keys.unfetched[0])
	}
	total := 0
	for _, e := range evs {
		total += len(e.StreamID) + len(e.Type) + len(e.Data) + len(e.Metadata)
	}
	t.Logf("%d Prefetches, at most %d events held, %d bytes", keys.prefetches, maxHeld, maxHeldBytes)
	if most := len(evs)/scanBatchEvents + total/scanBatchBytes + 2; keys.prefetches == 0 || keys.prefetches > most {
		t.Errorf("%d Prefetches for %d events of %d bytes, want %d at most", keys.prefetches, len(evs), total, most)
	}
	if maxHeld > scanBatchEvents || maxHeldBytes > scanBatchBytes+len(big)+1024 {
		t.Errorf("ScanAll held %d events, %d bytes: want %d, %d at most", maxHeld, maxHeldBytes, scanBatchEvents, scanBatchBytes+len(big))
	}
}
