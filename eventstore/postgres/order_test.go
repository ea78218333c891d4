package postgres_test

import (
	"context"
	"testing"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// The log is ordered by transaction id as a number: 99 before 100, though
// "100" < "99" as text (the order a sort on the text column would give).
// Rows are written with chosen transaction ids, all committed long ago.
func TestReadAllOrdersTransactionIDsAsNumbers(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	for i, txid := range []string{"9", "10", "99", "100", "101"} {
		if _, err := pool.Exec(ctx, `
			INSERT INTO events (uuid, payload, metadata, transaction_id, stream_id, version, event_type, recorded_at)
			VALUES (gen_random_uuid(), '{}', '{}', $1::text::xid8, 'order-' || $2::int, 1, 'order.tested', now())`, txid, i); err != nil {
			t.Fatal(err)
		}
	}
	store := postgres.New(pool, nil)
	var got []uint64
	var after eventstore.Position
	for {
		page, err := store.ReadAll(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			got = append(got, e.Position.Commit)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].Position
	}
	want := []uint64{9, 10, 99, 100, 101}
	if len(got) != len(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("read %v, want %v", got, want)
		}
	}
}
