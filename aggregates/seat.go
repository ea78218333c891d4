package aggregates

import "lectern/derrors"

// The seat rule spans aggregates: a Class's capacity bounds how many of its
// Enrollments are active, and a student holds at most one active enrollment
// in a class, while each enrollment is an aggregate of its own. No one
// stream can decide it, so the commands package reserves a seat before it
// creates an active enrollment (the reservation pattern) and asks DecideSeat
// while it holds the class's seats still.

// Errors of the seat rule.
var (
	// ErrAlreadyEnrolled: the student already holds an active enrollment in
	// the class.
	ErrAlreadyEnrolled = derrors.New(derrors.ErrConflict, "The student already has an active enrollment in this class")
	// ErrClassFull: the class's active enrollments fill its capacity.
	ErrClassFull = derrors.New(derrors.ErrConflict, "The class is full")
)

// DecideSeat decides whether a student may take a seat in a class whose
// active enrollments number taken: not when the student already holds one
// of them (alreadyActive), nor when taken has reached capacity (nil: the
// class is unbounded).
func DecideSeat(capacity *int64, taken int64, alreadyActive bool) error {
	switch {
	case alreadyActive:
		return ErrAlreadyEnrolled
	case capacity != nil && taken >= *capacity:
		return ErrClassFull
	}
	return nil
}
