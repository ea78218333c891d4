package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/eventstore/storetest"
	"lectern/pgtest"
)

// Rewrite reaches every stored event, those an open transaction keeps out
// of ReadAll's view too, and writes what fn changes in place: same ids and
// positions, the rest left as it was.
func TestRewriteReachesEveryEvent(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	store := postgres.New(pool, nil)
	defer store.Close()
	// An older transaction still open holds the log's horizon back.
	open, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = open.Rollback(ctx) }()
	if _, err := open.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := store.Append(ctx, "rewrite-1", eventstore.Exact(int64(i)), []eventstore.EventData{storetest.Event("e", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if visible, err := store.ReadAll(ctx, eventstore.Position{}, 10); err != nil || len(visible) != 0 {
		t.Fatalf("ReadAll: %d events (%v), want none behind the open transaction", len(visible), err)
	}
	read, rewritten, err := store.Rewrite(ctx, func(e eventstore.RecordedEvent) (json.RawMessage, bool, error) {
		return json.RawMessage(`{"rewritten":true}`), e.Version != 2, nil
	})
	if err != nil || read != 3 || rewritten != 2 {
		t.Fatalf("Rewrite: %d read, %d rewritten (%v); want 3 and 2", read, rewritten, err)
	}
	if err := open.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := store.ReadStream(ctx, "rewrite-1", eventstore.Forwards, 1, 10)
	if err != nil || len(evs) != 3 {
		t.Fatalf("ReadStream: %d events (%v)", len(evs), err)
	}
	for _, e := range evs {
		if want := map[bool]string{true: `{"rewritten":true}`, false: string(storetest.Event("e", 1).Data)}[e.Version != 2]; string(e.Data) != want {
			t.Errorf("event %d: %s, want %s", e.Version, e.Data, want)
		}
	}
}
