package aggregates_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

var enrollmentCreated = events.EnrollmentCreated{EnrollmentID: 31, ClassID: 9, OrgID: 1, PartnerID: 6, StudentID: 40,
	Status: "active", EnrolledAt: t0, Source: "partner", EnrolledBy: 7}

func TestEnrollmentDecisions(t *testing.T) {
	class := given(aggregates.EvolveClass, aClass...)
	base := aggregates.CreateEnrollment{EnrollmentID: 31, Class: class, StudentID: 40, Source: "partner", CallerID: 7, Now: t0}
	with := func(f func(*aggregates.CreateEnrollment)) aggregates.CreateEnrollment {
		c := base
		f(&c)
		return c
	}
	create := func(c aggregates.CreateEnrollment) func(aggregates.Enrollment) ([]events.Event, error) {
		return func(s aggregates.Enrollment) ([]events.Event, error) { return aggregates.DecideCreateEnrollment(s, c) }
	}
	drop := func(c aggregates.DropEnrollment) func(aggregates.Enrollment) ([]events.Event, error) {
		c.EnrollmentID = 31
		return func(s aggregates.Enrollment) ([]events.Event, error) { return aggregates.DecideDropEnrollment(s, c) }
	}
	dropped := events.EnrollmentDropped{EnrollmentID: 31, ClassID: 9, OrgID: 1, StudentID: 40, PreviousStatus: "active"}
	enrolled := t0.Add(-24 * time.Hour)
	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.Enrollment) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{
			name: "active and enrolled now by default",
			when: create(base),
			then: []events.Event{enrollmentCreated},
		},
		{
			name: "the class's course comes along",
			when: create(with(func(c *aggregates.CreateEnrollment) {
				c.Class = given(aggregates.EvolveClass, events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, CourseID: ptr[int64](2), Name: "P", Status: "planned"})
			})),
			then: []events.Event{func() events.EnrollmentCreated {
				e := enrollmentCreated
				e.CourseID = ptr[int64](2)
				return e
			}()},
		},
		{
			name: "explicit status, dates and invite code",
			when: create(with(func(c *aggregates.CreateEnrollment) {
				c.Status, c.EnrolledAt, c.CompletedAt, c.InviteCodeID = ptr("completed"), &enrolled, ptr(t0), ptr[int64](11)
			})),
			then: []events.Event{events.EnrollmentCreated{EnrollmentID: 31, ClassID: 9, OrgID: 1, PartnerID: 6, StudentID: 40,
				InviteCodeID: ptr[int64](11), Status: "completed", EnrolledAt: enrolled, CompletedAt: ptr(t0), Source: "partner", EnrolledBy: 7}},
		},
		{
			name: "completed_at on an enrollment not completed is invalid",
			when: create(with(func(c *aggregates.CreateEnrollment) {
				later := enrolled.Add(time.Hour)
				c.Status, c.EnrolledAt, c.CompletedAt = ptr("active"), &enrolled, &later
			})),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "completed_at before enrolled_at is invalid",
			when:    create(with(func(c *aggregates.CreateEnrollment) { c.CompletedAt = &enrolled })),
			wantErr: &derrors.FieldError{},
		},
		{
			// The partner admits the student: the code only says where they
			// came from (docs/decisions.md), and is not used up.
			name: "a partner may name a revoked assistant code of the class",
			when: create(with(func(c *aggregates.CreateEnrollment) {
				c.Class = given(aggregates.EvolveClass, classWith(events.InviteCodeRevoked{ClassID: 9, OrgID: 1, InviteCodeID: 12, Code: "ASSIST22"})...)
				c.InviteCodeID = ptr[int64](12)
			})),
			then: []events.Event{func() events.EnrollmentCreated {
				e := enrollmentCreated
				e.InviteCodeID = ptr[int64](12)
				return e
			}()},
		},
		{
			name:    "an invite code of another class is invalid",
			when:    create(with(func(c *aggregates.CreateEnrollment) { c.InviteCodeID = ptr[int64](99) })),
			wantErr: &derrors.FieldError{},
		},
		{
			name: "an ended class takes no active student",
			when: create(with(func(c *aggregates.CreateEnrollment) {
				c.Class = given(aggregates.EvolveClass, append(aClass[:len(aClass):len(aClass)],
					events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "ended"})...)
			})),
			wantErr: derrors.ErrConflict,
		},
		{
			name: "an ended class may record a completed enrollment",
			when: create(with(func(c *aggregates.CreateEnrollment) {
				c.Class = given(aggregates.EvolveClass, append(aClass[:len(aClass):len(aClass)],
					events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "ended"})...)
				c.Status, c.EnrolledAt, c.CompletedAt = ptr("completed"), &enrolled, ptr(t0)
			})),
			then: []events.Event{events.EnrollmentCreated{EnrollmentID: 31, ClassID: 9, OrgID: 1, PartnerID: 6, StudentID: 40,
				Status: "completed", EnrolledAt: enrolled, CompletedAt: ptr(t0), Source: "partner", EnrolledBy: 7}},
		},
		{
			name:    "an unknown status is invalid",
			when:    create(with(func(c *aggregates.CreateEnrollment) { c.Status = ptr("paused") })),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "a missing class is not found",
			when:    create(with(func(c *aggregates.CreateEnrollment) { c.Class = aggregates.Class{} })),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:    "create twice conflicts",
			given:   []events.Event{enrollmentCreated},
			when:    create(base),
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "the student may drop",
			given: []events.Event{enrollmentCreated},
			when:  drop(aggregates.DropEnrollment{CallerID: 40}),
			then:  []events.Event{func() events.EnrollmentDropped { e := dropped; e.DroppedBy = 40; return e }()},
		},
		{
			name:  "a partner of the class's organisation may drop",
			given: []events.Event{enrollmentCreated},
			when:  drop(aggregates.DropEnrollment{CallerID: 7, PartnerOrgIDs: []int64{3, 1}}),
			then:  []events.Event{func() events.EnrollmentDropped { e := dropped; e.DroppedBy = 7; return e }()},
		},
		{
			name:  "an admin may drop",
			given: []events.Event{enrollmentCreated},
			when:  drop(aggregates.DropEnrollment{CallerID: 1, Admin: true}),
			then:  []events.Event{func() events.EnrollmentDropped { e := dropped; e.DroppedBy = 1; return e }()},
		},
		{
			name: "an inactive enrollment may be dropped",
			given: []events.Event{func() events.EnrollmentCreated {
				e := enrollmentCreated
				e.Status = "inactive"
				return e
			}()},
			when: drop(aggregates.DropEnrollment{CallerID: 40}),
			then: []events.Event{events.EnrollmentDropped{EnrollmentID: 31, ClassID: 9, OrgID: 1, StudentID: 40, PreviousStatus: "inactive", DroppedBy: 40}},
		},
		{
			name:    "another student cannot see it",
			given:   []events.Event{enrollmentCreated},
			when:    drop(aggregates.DropEnrollment{CallerID: 41}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:    "a partner of another organisation cannot see it",
			given:   []events.Event{enrollmentCreated},
			when:    drop(aggregates.DropEnrollment{CallerID: 8, PartnerOrgIDs: []int64{2}}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:    "dropping twice conflicts",
			given:   []events.Event{enrollmentCreated, dropped},
			when:    drop(aggregates.DropEnrollment{CallerID: 40}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:    "a missing enrollment is not found",
			when:    drop(aggregates.DropEnrollment{CallerID: 1, Admin: true}),
			wantErr: derrors.ErrNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolveEnrollment, tc.given...))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvolveEnrollment(t *testing.T) {
	en := given(aggregates.EvolveEnrollment, enrollmentCreated,
		events.EnrollmentDropped{EnrollmentID: 31, ClassID: 9, OrgID: 1, StudentID: 40, PreviousStatus: "active", DroppedBy: 40})
	want := aggregates.Enrollment{ID: 31, ClassID: 9, OrgID: 1, PartnerID: 6, StudentID: 40, Status: "dropped", EnrolledAt: t0,
		Source: "partner", EnrolledBy: 7, CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), Version: 2}
	if diff := cmp.Diff(want, en); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}
