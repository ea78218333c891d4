package aggregates_test

import (
	"errors"
	"testing"

	"lectern/aggregates"
	"lectern/derrors"
)

func TestDecideSeat(t *testing.T) {
	type class struct {
		capacity *int64
		taken    int64
	}
	cases := []struct {
		name          string
		given         class
		alreadyActive bool // when the student asks for a seat
		then          error
	}{
		{name: "a seat under capacity", given: class{capacity: ptr[int64](3), taken: 2}},
		{name: "the last seat", given: class{capacity: ptr[int64](1), taken: 0}},
		{name: "a full class refuses", given: class{capacity: ptr[int64](2), taken: 2}, then: aggregates.ErrClassFull},
		{name: "an overfilled class refuses (capacity lowered below its enrollments)",
			given: class{capacity: ptr[int64](2), taken: 5}, then: aggregates.ErrClassFull},
		{name: "an unbounded class always has room", given: class{taken: 10_000}},
		{name: "a second active enrollment is refused", given: class{capacity: ptr[int64](3), taken: 1},
			alreadyActive: true, then: aggregates.ErrAlreadyEnrolled},
		{name: "already enrolled in a full class: the enrollment is the reason", given: class{capacity: ptr[int64](1), taken: 1},
			alreadyActive: true, then: aggregates.ErrAlreadyEnrolled},
		{name: "already enrolled in an unbounded class", given: class{}, alreadyActive: true, then: aggregates.ErrAlreadyEnrolled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := aggregates.DecideSeat(tc.given.capacity, tc.given.taken, tc.alreadyActive)
			if !errors.Is(err, tc.then) {
				t.Fatalf("error %v, want %v", err, tc.then)
			}
			if err != nil && !errors.Is(err, derrors.ErrConflict) {
				t.Errorf("error %v is not a conflict", err)
			}
		})
	}
}
