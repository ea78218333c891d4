package commands

import (
	"context"
	"errors"
	"strconv"

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
func (s seatReservations) Reserve(ctx context.Context, class aggregates.Class, studentID int64, enrollment string) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
		activeEnrollmentScope+":"+strconv.FormatInt(class.ID, 10)); err != nil {
		return err
	}
	key := seatKey(class.ID, studentID)
	var holder string
	err = tx.QueryRow(ctx, `SELECT owner FROM unique_claims WHERE scope = $1 AND key = $2`, activeEnrollmentScope, key).Scan(&holder)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return err
	case holder == enrollment:
		// The enrollment's id is new, or (under an Idempotency-Key) an
		// earlier attempt's of this request, which took this seat.
		return nil
	}
	if holder != "" {
		abandoned, err := abandonedClaim(ctx, tx, s.store, activeEnrollmentScope, key, holder)
		if err != nil {
			return err
		}
		if abandoned {
			if _, err := tx.Exec(ctx, `DELETE FROM unique_claims WHERE scope = $1 AND key = $2 AND owner = $3`,
				activeEnrollmentScope, key, holder); err != nil {
				return err
			}
			holder = ""
		}
	}
	alreadyActive := holder != ""
	var taken int64
	if class.Capacity != nil && !alreadyActive {
		if taken, err = takenSeats(ctx, tx, class.ID); err != nil {
			return err
		}
		if taken >= *class.Capacity {
			// Full: only now look for seats other students' enrollments
			// abandoned, so that a class with room pays nothing for it.
			freed, err := s.freeAbandonedSeats(ctx, tx, class.ID)
			if err != nil {
				return err
			}
			if freed > 0 {
				if taken, err = takenSeats(ctx, tx, class.ID); err != nil {
					return err
				}
			}
		}
	}
	if err := aggregates.DecideSeat(class.Capacity, taken, alreadyActive); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO unique_claims (scope, key, owner) VALUES ($1, $2, $3)`,
		activeEnrollmentScope, key, enrollment); err != nil {
		return err
	}
	return tx.Commit(ctx)
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

// freeAbandonedSeats frees the class's seats that abandonedClaim proves
// abandoned (any student's), at most abandonedSeatsChecked checked, and
// returns how many it freed. It runs in Reserve's transaction, under the
// class's lock. The candidates are narrowed in SQL first: seats older than
// abandonedClaimAge whose enrollment has no row in the enrollments read
// model; a seat of a recorded enrollment costs no stream read once the read
// model shows it. The read model may lag, so the enrollment's stream stays
// the proof.
func (s seatReservations) freeAbandonedSeats(ctx context.Context, tx pgx.Tx, classID int64) (int64, error) {
	// An owner is an enrollment's stream, "enrollment-<id>", and <id> the
	// enrollments row's id.
	prefix := events.CategoryEnrollment + "-"
	rows, err := tx.Query(ctx, `SELECT c.key, c.owner FROM unique_claims c
		WHERE c.scope = 'active_enrollment' AND split_part(c.key, ':', 1) = $1
		  AND c.claimed_at < now() - make_interval(secs => $2)
		  AND NOT EXISTS (SELECT 1 FROM enrollments e WHERE e.id = CASE
		      WHEN starts_with(c.owner, $3) AND substr(c.owner, length($3) + 1) ~ '^[0-9]{1,18}$'
		      THEN substr(c.owner, length($3) + 1)::bigint END)
		ORDER BY random() LIMIT $4`,
		strconv.FormatInt(classID, 10), abandonedClaimAge.Seconds(), prefix, abandonedSeatsChecked)
	if err != nil {
		return 0, err
	}
	type seat struct{ key, owner string }
	seats, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (seat, error) {
		var c seat
		err := r.Scan(&c.key, &c.owner)
		return c, err
	})
	if err != nil {
		return 0, err
	}
	var freed int64
	for _, c := range seats {
		abandoned, err := abandonedClaim(ctx, tx, s.store, activeEnrollmentScope, c.key, c.owner)
		if err != nil {
			return 0, err
		}
		if !abandoned {
			continue
		}
		tag, err := tx.Exec(ctx, `DELETE FROM unique_claims WHERE scope = $1 AND key = $2 AND owner = $3`,
			activeEnrollmentScope, c.key, c.owner)
		if err != nil {
			return 0, err
		}
		freed += tag.RowsAffected()
	}
	return freed, nil
}

// Release gives back the student's seat in the class if the enrollment
// holds it (a seat another enrollment holds stays taken). Like release, it
// is best effort.
func (s seatReservations) Release(ctx context.Context, classID, studentID int64, enrollment string) {
	_, _ = s.db.Exec(context.WithoutCancel(ctx), `DELETE FROM unique_claims WHERE scope = $1 AND key = $2 AND owner = $3`,
		activeEnrollmentScope, seatKey(classID, studentID), enrollment)
}
