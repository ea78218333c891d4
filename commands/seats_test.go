package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/pgtest"
)

// The seat rule spans a class and its enrollments; these tests hold the
// reservation to it on a real database, concurrency included.
func TestSeatReservations(t *testing.T) {
	seats := seatReservations{db: pgtest.Fresh(t)}
	ctx := context.Background()
	capacity := func(n int64) *int64 { return &n }
	enrollment := func(id int) string { return fmt.Sprintf("enrollment-%d", id) }

	t.Run("N+1 concurrent reservations for N seats: exactly N succeed", func(t *testing.T) {
		const n = 8
		class := aggregates.Class{ID: 1, Capacity: capacity(n)}
		errs := make([]error, n+1)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n + 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = seats.Reserve(ctx, class, int64(100+i), enrollment(100+i))
			}()
		}
		close(start)
		wg.Wait()
		var taken, full int
		for i, err := range errs {
			switch {
			case err == nil:
				taken++
			case errors.Is(err, aggregates.ErrClassFull):
				full++
			default:
				t.Errorf("reservation %d: %v", i, err)
			}
		}
		if taken != n || full != 1 {
			t.Errorf("%d seats taken and %d refused as full, want %d and 1", taken, full, n)
		}
	})

	t.Run("a student holds one active enrollment in a class", func(t *testing.T) {
		class := aggregates.Class{ID: 2} // unbounded
		if err := seats.Reserve(ctx, class, 40, enrollment(1)); err != nil {
			t.Fatal(err)
		}
		err := seats.Reserve(ctx, class, 40, enrollment(2))
		if !errors.Is(err, aggregates.ErrAlreadyEnrolled) || !errors.Is(err, derrors.ErrConflict) {
			t.Errorf("a second enrollment's reservation: %v, want %v", err, aggregates.ErrAlreadyEnrolled)
		}
		// The same enrollment asking again (a retried request) holds its seat.
		if err := seats.Reserve(ctx, class, 40, enrollment(1)); err != nil {
			t.Errorf("the holder's reservation again: %v", err)
		}
		// Another class is another seat.
		if err := seats.Reserve(ctx, aggregates.Class{ID: 3}, 40, enrollment(3)); err != nil {
			t.Errorf("a seat in another class: %v", err)
		}
	})

	t.Run("a retried reservation takes no second seat", func(t *testing.T) {
		class := aggregates.Class{ID: 4, Capacity: capacity(2)}
		for range 3 {
			if err := seats.Reserve(ctx, class, 50, enrollment(50)); err != nil {
				t.Fatal(err)
			}
		}
		if err := seats.Reserve(ctx, class, 51, enrollment(51)); err != nil {
			t.Errorf("the second seat: %v", err)
		}
	})

	t.Run("a released seat can be taken again", func(t *testing.T) {
		class := aggregates.Class{ID: 5, Capacity: capacity(1)}
		if err := seats.Reserve(ctx, class, 60, enrollment(60)); err != nil {
			t.Fatal(err)
		}
		if err := seats.Reserve(ctx, class, 61, enrollment(61)); !errors.Is(err, aggregates.ErrClassFull) {
			t.Fatalf("a full class: %v, want %v", err, aggregates.ErrClassFull)
		}
		// Only the enrollment that holds a seat gives it back.
		seats.Release(ctx, class.ID, 60, enrollment(61))
		if err := seats.Reserve(ctx, class, 61, enrollment(61)); !errors.Is(err, aggregates.ErrClassFull) {
			t.Fatalf("after another enrollment's release: %v, want %v", err, aggregates.ErrClassFull)
		}
		seats.Release(ctx, class.ID, 60, enrollment(60))
		if err := seats.Reserve(ctx, class, 61, enrollment(61)); err != nil {
			t.Errorf("the released seat: %v", err)
		}
		// The student who left may enroll again once a seat is free.
		seats.Release(ctx, class.ID, 61, enrollment(61))
		if err := seats.Reserve(ctx, class, 60, enrollment(62)); err != nil {
			t.Errorf("the first student's new enrollment: %v", err)
		}
	})
}
