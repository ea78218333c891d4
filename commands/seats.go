package commands

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
)

// activeEnrollmentScope is the uniqueness claim scope of seats: keys are
// "<class_id>:<student_id>", owned by the active enrollment's stream.
const activeEnrollmentScope = "active_enrollment"

// seatReservations is the reservation pattern for the rule that spans
// aggregates, Class capacity × Enrollment: a class's active enrollments stay
// within its capacity, and a student holds at most one of them. Each
// enrollment is its own aggregate, so no one stream can decide this; instead
// a seat is reserved before an active enrollment is created, released if the
// creation fails and when the enrollment is dropped. aggregates.DecideSeat
// makes the decision; the reservation only gathers what it needs, under a
// per-class lock, and records the outcome.
//
// A seat is a row of unique_claims (activeEnrollmentScope), so the
// reservations are the count of a class's taken seats.
type seatReservations struct {
	db    *pgxpool.Pool
	store eventstore.Store // reads whether a seat's enrollment was recorded
}

func seatKey(classID, studentID int64) string {
	return strconv.FormatInt(classID, 10) + ":" + strconv.FormatInt(studentID, 10)
}

// Reserve takes a seat in class for the student's enrollment (its stream),
// or returns the seat rule's error (aggregates.ErrAlreadyEnrolled,
// aggregates.ErrClassFull). The seat the enrollment already holds (an earlier
// attempt of the same request, under an Idempotency-Key) is its own.
// A per-class advisory lock serialises the count and the reservation, so
// concurrent reservations never overfill a class.
//
// A seat whose enrollment was never recorded (a crash between the claim and
// the event) is abandoned; one refused for a seat taken (the student's own,
// or any in a full class) may be such. A refusal that saw suspect seats
// proves them abandoned by their streams with no connection held (a stream
// read on the PostgreSQL store takes a connection of the pool: under the
// class's lock, reservations waiting for it could hold every other), then
// tries once more, freeing those whose claims are still as they were read.
func (s seatReservations) Reserve(ctx context.Context, class aggregates.Class, studentID int64, enrollment string) error {
	suspects, err := s.reserve(ctx, class, studentID, enrollment, nil)
	if err == nil || len(suspects) == 0 {
		return err
	}
	abandoned, perr := s.abandoned(ctx, suspects)
	if perr != nil {
		return perr
	}
	if len(abandoned) == 0 {
		return err
	}
	_, err = s.reserve(ctx, class, studentID, enrollment, abandoned)
	return err
}

// seatClaim is a seat's claim as read: its key, its holder (an
// enrollment's stream) and when it was claimed (a retry renews it).
type seatClaim struct {
	key, owner string
	claimedAt  time.Time
}

// reserve is one attempt of Reserve, in one transaction under the class's
// lock. It first frees the abandoned seats, those whose claims are still as
// read. A refusal returns the seats it suspects abandoned: claims older
// than abandonedClaimAge, the student's own, or in a full class others'.
func (s seatReservations) reserve(ctx context.Context, class aggregates.Class, studentID int64, enrollment string, abandoned []seatClaim) ([]seatClaim, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
		activeEnrollmentScope+":"+strconv.FormatInt(class.ID, 10)); err != nil {
		return nil, err
	}
	for _, c := range abandoned {
		if _, err := tx.Exec(ctx, `DELETE FROM unique_claims WHERE scope = $1 AND key = $2 AND owner = $3 AND claimed_at = $4`,
			activeEnrollmentScope, c.key, c.owner, c.claimedAt); err != nil {
			return nil, err
		}
	}
	key := seatKey(class.ID, studentID)
	held := seatClaim{key: key}
	var old bool
	err = tx.QueryRow(ctx, `SELECT owner, claimed_at, claimed_at < now() - make_interval(secs => $3) FROM unique_claims
		WHERE scope = $1 AND key = $2`, activeEnrollmentScope, key, abandonedClaimAge.Seconds()).Scan(&held.owner, &held.claimedAt, &old)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, err
	case held.owner == enrollment:
		// The enrollment's id is new, or (under an Idempotency-Key) an
		// earlier attempt's of this request, which took this seat: its
		// claim is renewed, as the attempt goes on to record it, so that
		// no other reservation takes it for abandoned meanwhile.
		if _, err := tx.Exec(ctx, `UPDATE unique_claims SET claimed_at = now() WHERE scope = $1 AND key = $2 AND owner = $3`,
			activeEnrollmentScope, key, enrollment); err != nil {
			return nil, err
		}
		return nil, tx.Commit(ctx)
	}
	var suspects []seatClaim
	if held.owner != "" && old {
		suspects = append(suspects, held)
	}
	alreadyActive := held.owner != ""
	var taken int64
	if class.Capacity != nil && !alreadyActive {
		if taken, err = takenSeats(ctx, tx, class.ID); err != nil {
			return nil, err
		}
		if taken >= *class.Capacity {
			// Full: only now look for seats other students' enrollments
			// abandoned, so that a class with room pays nothing for it.
			if suspects, err = suspectSeats(ctx, tx, class.ID); err != nil {
				return nil, err
			}
		}
	}
	if err := aggregates.DecideSeat(class.Capacity, taken, alreadyActive); err != nil {
		return suspects, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO unique_claims (scope, key, owner) VALUES ($1, $2, $3)`,
		activeEnrollmentScope, key, enrollment); err != nil {
		return nil, err
	}
	return nil, tx.Commit(ctx)
}

// takenSeats counts the class's taken seats.
func takenSeats(ctx context.Context, tx pgx.Tx, classID int64) (int64, error) {
	var taken int64
	// The literal scope matches the partial index on the class id.
	err := tx.QueryRow(ctx, `SELECT count(*) FROM unique_claims
		WHERE scope = 'active_enrollment' AND split_part(key, ':', 1) = $1`,
		strconv.FormatInt(classID, 10)).Scan(&taken)
	return taken, err
}

// abandonedSeatsChecked bounds the seats a reservation in a full class
// checks for abandoned (a stream read each): the work a refused join may
// cost, however large the class. The seats checked are drawn at random, so
// that candidates which prove not to be abandoned (an enrollment recorded
// that the read model does not show yet) cannot hide the others for good.
const abandonedSeatsChecked = 20

// suspectSeats are the class's seats that may be abandoned, at most
// abandonedSeatsChecked: seats older than abandonedClaimAge whose
// enrollment has no row in the enrollments read model, or a dropped one's,
// so that a seat of an enrollment recorded and not dropped costs no stream
// read once the read model shows it. The read model may lag: the
// enrollment's stream stays the proof.
func suspectSeats(ctx context.Context, tx pgx.Tx, classID int64) ([]seatClaim, error) {
	// An owner is an enrollment's stream, "enrollment-<id>", and <id> the
	// enrollments row's id.
	prefix := events.CategoryEnrollment + "-"
	rows, err := tx.Query(ctx, `SELECT c.key, c.owner, c.claimed_at FROM unique_claims c
		WHERE c.scope = 'active_enrollment' AND split_part(c.key, ':', 1) = $1
		  AND c.claimed_at < now() - make_interval(secs => $2)
		  AND NOT EXISTS (SELECT 1 FROM enrollments e WHERE e.status <> 'dropped' AND e.id = CASE
		      WHEN starts_with(c.owner, $3) AND substr(c.owner, length($3) + 1) ~ '^[0-9]{1,18}$'
		      THEN substr(c.owner, length($3) + 1)::bigint END)
		ORDER BY random() LIMIT $4`,
		strconv.FormatInt(classID, 10), abandonedClaimAge.Seconds(), prefix, abandonedSeatsChecked)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (seatClaim, error) {
		var c seatClaim
		err := r.Scan(&c.key, &c.owner, &c.claimedAt)
		return c, err
	})
}

// abandoned are the suspects whose seats no enrollment holds, as their
// streams tell, read with no connection held: a stream with no event (the
// enrollment was never recorded), or one whose enrollment was dropped (the
// drop's release of its seat was lost: a drop is final). A stream that holds
// an event keeps it, so a seat found abandoned stays so while its claim is
// unchanged (reserve checks that).
func (s seatReservations) abandoned(ctx context.Context, suspects []seatClaim) ([]seatClaim, error) {
	var out []seatClaim
	for _, c := range suspects {
		// An enrollment's stream is its creation and perhaps its drop.
		recorded, err := s.store.ReadStream(ctx, c.owner, eventstore.Forwards, 1, 16)
		if err != nil {
			return nil, err
		}
		if len(recorded) == 0 || slices.ContainsFunc(recorded, func(e eventstore.RecordedEvent) bool {
			return e.Type == events.EnrollmentDropped{}.EventType()
		}) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Release gives back the student's seat in the class if the enrollment
// holds it (a seat another enrollment holds stays taken). Like release, it
// is best effort.
func (s seatReservations) Release(ctx context.Context, classID, studentID int64, enrollment string) {
	_, _ = s.db.Exec(context.WithoutCancel(ctx), `DELETE FROM unique_claims WHERE scope = $1 AND key = $2 AND owner = $3`,
		activeEnrollmentScope, seatKey(classID, studentID), enrollment)
}
