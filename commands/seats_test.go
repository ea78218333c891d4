package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
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

// countingStore counts stream reads: what checking seats for abandoned costs.
type countingStore struct {
	eventstore.Store
	reads atomic.Int64
}

func (s *countingStore) ReadStream(ctx context.Context, stream string, dir eventstore.Direction, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	s.reads.Add(1)
	return s.Store.ReadStream(ctx, stream, dir, from, limit)
}

// A seat left by another student's enrollment that stopped between its seat
// and its event does not count toward a full class for good: a reservation
// that finds the class full frees the seats that are over abandonedClaimAge
// old and whose enrollment was never recorded, and counts again. A younger
// seat, or one whose enrollment was recorded, stays taken; the seats
// checked are narrowed by the read model first and capped per attempt.
func TestAFullClassFreesAbandonedSeats(t *testing.T) {
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	store := &countingStore{Store: pg}
	seats := seatReservations{db: pool, store: store}
	ctx := context.Background()
	capacity := func(n int64) *int64 { return &n }
	nextEnrollment := int64(1_000)
	// seat claims a seat by hand, age ago (a Postgres interval), as an
	// enrollment that stopped before its event would have left it.
	seat := func(t *testing.T, class, student int64, age string) string {
		t.Helper()
		nextEnrollment++
		owner := eventstore.StreamName(events.CategoryEnrollment, nextEnrollment)
		if _, err := pool.Exec(ctx, `INSERT INTO unique_claims (scope, key, owner, claimed_at)
			VALUES ('active_enrollment', $1, $2, now() - $3::interval)`, seatKey(class, student), owner, age); err != nil {
			t.Fatal(err)
		}
		return owner
	}
	// record appends an event to the enrollment's stream: it was recorded.
	record := func(t *testing.T, stream string) {
		t.Helper()
		if _, err := pg.Append(ctx, stream, eventstore.NoStream, []eventstore.EventData{{
			ID: uuid.New(), Type: "enrollment.created", SchemaVersion: 1, Data: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	// project writes the enrollment's read-model row, as the projection
	// does once it has folded the enrollment's event.
	project := func(t *testing.T, stream string, class, student int64) {
		t.Helper()
		id, err := streamID(stream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO enrollments (id, class_id, org_id, partner_id, student_id, status,
				enrolled_at, source, enrolled_by, created_at, updated_at, version)
			VALUES ($1, $2, 1, 1, $3, 'active', now(), 'partner', 1, now(), now(), 1)`, id, class, student); err != nil {
			t.Fatal(err)
		}
	}
	held := func(t *testing.T, class, student int64, owner string) bool {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM unique_claims WHERE scope = 'active_enrollment' AND key = $1 AND owner = $2`,
			seatKey(class, student), owner).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	taken := func(t *testing.T, class int64) int64 {
		t.Helper()
		var n int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM unique_claims WHERE scope = 'active_enrollment' AND key LIKE $1`,
			fmt.Sprintf("%d:%%", class)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("another student's abandoned seat is freed for a new student", func(t *testing.T) {
		class := aggregates.Class{ID: 101, Capacity: capacity(1)}
		gone := seat(t, class.ID, 1, "11 minutes")
		if err := seats.Reserve(ctx, class, 2, "enrollment-1"); err != nil {
			t.Fatalf("a reservation in a class whose only seat is abandoned: %v", err)
		}
		if held(t, class.ID, 1, gone) || !held(t, class.ID, 2, "enrollment-1") || taken(t, class.ID) != 1 {
			t.Errorf("the abandoned seat is still held, or the new one not taken (%d taken)", taken(t, class.ID))
		}
	})

	t.Run("a young seat stays taken", func(t *testing.T) {
		class := aggregates.Class{ID: 102, Capacity: capacity(1)}
		young := seat(t, class.ID, 1, "9 minutes")
		if err := seats.Reserve(ctx, class, 2, "enrollment-2"); !errors.Is(err, aggregates.ErrClassFull) {
			t.Errorf("a class whose seat is 9 minutes old: %v, want %v", err, aggregates.ErrClassFull)
		}
		if !held(t, class.ID, 1, young) {
			t.Error("the young seat was freed")
		}
	})

	t.Run("a recorded enrollment's seat stays taken, read model or not", func(t *testing.T) {
		class := aggregates.Class{ID: 103, Capacity: capacity(2)}
		// The read model lags: the stream is the proof.
		lagging := seat(t, class.ID, 1, "11 minutes")
		record(t, lagging)
		projected := seat(t, class.ID, 2, "11 minutes")
		record(t, projected)
		project(t, projected, class.ID, 2)
		before := store.reads.Load()
		if err := seats.Reserve(ctx, class, 3, "enrollment-3"); !errors.Is(err, aggregates.ErrClassFull) {
			t.Errorf("a class whose seats are recorded enrollments': %v, want %v", err, aggregates.ErrClassFull)
		}
		if !held(t, class.ID, 1, lagging) || !held(t, class.ID, 2, projected) {
			t.Error("a recorded enrollment's seat was freed")
		}
		// Only the seat the read model does not show was read.
		if n := store.reads.Load() - before; n != 1 {
			t.Errorf("%d stream reads, want 1 (the seat the read model does not show)", n)
		}
	})

	t.Run("a dropped enrollment's seat whose release was lost is freed", func(t *testing.T) {
		class := aggregates.Class{ID: 108, Capacity: capacity(1)}
		dropped := seat(t, class.ID, 1, "11 minutes")
		record(t, dropped)
		if _, err := pg.Append(ctx, dropped, eventstore.Exact(1), []eventstore.EventData{{
			ID: uuid.New(), Type: events.EnrollmentDropped{}.EventType(), SchemaVersion: 1, Data: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		project(t, dropped, class.ID, 1)
		if _, err := pool.Exec(ctx, `UPDATE enrollments SET status = 'dropped' WHERE class_id = $1`, class.ID); err != nil {
			t.Fatal(err)
		}
		if err := seats.Reserve(ctx, class, 2, "enrollment-8"); err != nil {
			t.Fatalf("a class whose only seat is a dropped enrollment's: %v", err)
		}
		if held(t, class.ID, 1, dropped) || !held(t, class.ID, 2, "enrollment-8") {
			t.Error("the dropped enrollment's seat is still held, or the new one not taken")
		}
		// The dropped student enrolls again: its own old seat is no hold.
		other := aggregates.Class{ID: 109, Capacity: capacity(5)}
		mine := seat(t, other.ID, 1, "11 minutes")
		record(t, mine)
		if _, err := pg.Append(ctx, mine, eventstore.Exact(1), []eventstore.EventData{{
			ID: uuid.New(), Type: events.EnrollmentDropped{}.EventType(), SchemaVersion: 1, Data: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		if err := seats.Reserve(ctx, other, 1, "enrollment-9"); err != nil {
			t.Fatalf("a student whose dropped enrollment kept its seat, enrolling again: %v", err)
		}
	})

	t.Run("a class with room frees nothing", func(t *testing.T) {
		class := aggregates.Class{ID: 104, Capacity: capacity(2)}
		old := seat(t, class.ID, 1, "11 minutes")
		before := store.reads.Load()
		if err := seats.Reserve(ctx, class, 2, "enrollment-4"); err != nil {
			t.Fatal(err)
		}
		if !held(t, class.ID, 1, old) || store.reads.Load() != before {
			t.Errorf("a reservation with a seat free looked for abandoned seats (%d reads)", store.reads.Load()-before)
		}
	})

	t.Run("a full class of recorded enrollments costs no stream read", func(t *testing.T) {
		const n = 50
		class := aggregates.Class{ID: 105, Capacity: capacity(n)}
		for student := range int64(n) {
			s := seat(t, class.ID, student, "1 hour")
			record(t, s)
			project(t, s, class.ID, student)
		}
		before := store.reads.Load()
		for range 3 {
			if err := seats.Reserve(ctx, class, n, "enrollment-5"); !errors.Is(err, aggregates.ErrClassFull) {
				t.Fatalf("a full class: %v, want %v", err, aggregates.ErrClassFull)
			}
		}
		if reads := store.reads.Load() - before; reads != 0 {
			t.Errorf("%d stream reads for 3 refused reservations, want 0", reads)
		}
	})

	t.Run("an attempt checks at most abandonedSeatsChecked seats", func(t *testing.T) {
		const n = abandonedSeatsChecked + 5
		class := aggregates.Class{ID: 106, Capacity: capacity(n)}
		for student := range int64(n) {
			seat(t, class.ID, student, "11 minutes")
		}
		before := store.reads.Load()
		if err := seats.Reserve(ctx, class, n, "enrollment-6"); err != nil {
			t.Fatal(err)
		}
		if reads := store.reads.Load() - before; reads != abandonedSeatsChecked {
			t.Errorf("%d stream reads, want %d", reads, abandonedSeatsChecked)
		}
		// abandonedSeatsChecked freed, one taken.
		if got, want := taken(t, class.ID), int64(n-abandonedSeatsChecked+1); got != want {
			t.Errorf("%d seats taken, want %d", got, want)
		}
	})
}
