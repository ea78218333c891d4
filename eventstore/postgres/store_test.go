package postgres_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/eventstore/storetest"
	"lectern/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestAcceptance(t *testing.T) {
	var store *postgres.Store
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) eventstore.Store {
			store = postgres.New(pgtest.Pool(t), nil)
			return store
		},
		Hold: func(t *testing.T, ctx context.Context, stream string, evs []eventstore.EventData) (func() error, error) {
			tx, err := pgtest.Pool(t).Begin(ctx)
			if err != nil {
				return nil, err
			}
			// A failed test must not leave the transaction holding a connection.
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			if _, err := store.AppendIn(ctx, tx, stream, eventstore.NoStream, evs); err != nil {
				_ = tx.Rollback(ctx)
				return nil, err
			}
			return func() error { return tx.Commit(ctx) }, nil
		},
	})
}

// An event whose data is missing or not JSON is refused, whichever way it
// goes in (the grouped single-event append, a multi-event append), and the
// stream stays as it was: never a NULL or broken payload in the log.
func TestAppendRefusesDataThatIsNotJSON(t *testing.T) {
	ctx := context.Background()
	store := postgres.New(pgtest.Pool(t), nil)
	defer store.Close()
	for _, data := range [][]byte{nil, {}, []byte(`{"n":`)} {
		bad := storetest.Event("bad", 0)
		bad.Data = data
		for _, evs := range [][]eventstore.EventData{{bad}, {storetest.Event("good", 1), bad}} {
			stream := "notjson-" + uuid.NewString()[:8]
			if _, err := store.Append(ctx, stream, eventstore.NoStream, evs); err == nil {
				t.Errorf("append of %d events, one with data %q: no error", len(evs), data)
			}
			got, err := store.ReadStream(ctx, stream, eventstore.Forwards, 0, 10)
			if err != nil || len(got) != 0 {
				t.Errorf("after the refused append of data %q: %d events (%v), want none", data, len(got), err)
			}
		}
	}
}
