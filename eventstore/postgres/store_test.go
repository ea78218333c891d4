package postgres_test

import (
	"context"
	"testing"

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
