package commands

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// A retry under an Idempotency-Key that finds its own old seat (its first
// attempt died before its event) renews the claim: another student's
// reservation in the full class, before the retry's event lands, must not
// take that seat for abandoned (old, stream still empty) and free it, or a
// class of capacity 1 would hand out two seats.
func TestARetriedReservationKeepsItsSeat(t *testing.T) {
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	seats := seatReservations{db: pool, store: pg}
	ctx := context.Background()
	one := int64(1)
	class := aggregates.Class{ID: 201, Capacity: &one}
	retried := eventstore.StreamName(events.CategoryEnrollment, 5001)
	// The first attempt took the seat 11 minutes ago and crashed before its append.
	if _, err := pool.Exec(ctx, `INSERT INTO unique_claims (scope, key, owner, claimed_at)
		VALUES ('active_enrollment', $1, $2, now() - interval '11 minutes')`, seatKey(class.ID, 1), retried); err != nil {
		t.Fatal(err)
	}
	// The retry (same Idempotency-Key, same id) reserves: its own seat.
	if err := seats.Reserve(ctx, class, 1, retried); err != nil {
		t.Fatalf("retry: %v", err)
	}
	// Before the retry's append lands, another student joins the full class.
	errOther := seats.Reserve(ctx, class, 2, "enrollment-5002")
	// The retry appends its event now.
	if _, err := pg.Append(ctx, retried, eventstore.NoStream, []eventstore.EventData{{
		ID: uuid.New(), Type: "enrollment.created", SchemaVersion: 1, Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if errOther == nil {
		t.Errorf("the other student's reservation succeeded after the retry was told the seat was its own: " +
			"two enrollments proceed in a class of capacity 1 (the retried one's seat was freed as abandoned)")
	}
}

// Proving a seat abandoned reads its enrollment's stream, which on the
// PostgreSQL store takes a connection of the pool. Were it read under the
// class's lock, in the reservation's transaction, as many concurrent
// reservations of a full class as the pool has connections would stall:
// the one holding the lock waiting for a connection the others hold while
// they wait for the lock, until their deadlines.
func TestFullClassReservationsDoNotStarveThePool(t *testing.T) {
	base := pgtest.Fresh(t)
	ctx := context.Background()
	cfg := base.Config()
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	seats := seatReservations{db: pool, store: pg}
	one := int64(1)
	class := aggregates.Class{ID: 301, Capacity: &one}
	// A recorded enrollment's seat the read model does not show (a lagging
	// or dead-lettered projection): a candidate, proven by a stream read.
	held := eventstore.StreamName(events.CategoryEnrollment, 7001)
	if _, err := base.Exec(ctx, `INSERT INTO unique_claims (scope, key, owner, claimed_at)
		VALUES ('active_enrollment', $1, $2, now() - interval '11 minutes')`, seatKey(class.ID, 1), held); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Append(ctx, held, eventstore.NoStream, []eventstore.EventData{{
		ID: uuid.New(), Type: "enrollment.created", SchemaVersion: 1, Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = seats.Reserve(rctx, class, int64(10+i), eventstore.StreamName(events.CategoryEnrollment, int64(8000+i)))
		}()
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("two reservations of a full class on a 2-connection pool: %v, %v in %v", errs[0], errs[1], took)
	for _, err := range errs {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a reservation ran into its deadline (pool starvation): %v after %v", err, took)
		}
	}
}
