package aggregates_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

var courseCreated = events.CourseCreated{CourseID: 2, OrgID: 1, PartnerID: 6, Title: "Algebra", CourseKey: "ALG-1",
	Status: "draft", CreatedBy: 9}

func withCourseStatus(status string) events.CourseCreated {
	e := courseCreated
	e.Status = status
	return e
}

func TestCourseDecisions(t *testing.T) {
	create := func(c aggregates.CreateCourse) func(aggregates.Course) ([]events.Event, error) {
		return func(s aggregates.Course) ([]events.Event, error) { return aggregates.DecideCreateCourse(s, c) }
	}
	update := func(c aggregates.UpdateCourse) func(aggregates.Course) ([]events.Event, error) {
		c.CourseID, c.CallerID = 2, 9
		if c.OrgID == 0 {
			c.OrgID = 1
		}
		return func(s aggregates.Course) ([]events.Event, error) { return aggregates.DecideUpdateCourse(s, c) }
	}
	base := aggregates.CreateCourse{CourseID: 2, OrgID: 1, PartnerID: 6, CallerID: 9, Title: "Algebra", CourseKey: "ALG-1"}
	with := func(f func(*aggregates.CreateCourse)) aggregates.CreateCourse {
		c := base
		f(&c)
		return c
	}
	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.Course) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{
			name: "create defaults the status to draft",
			when: create(base),
			then: []events.Event{courseCreated},
		},
		{
			name: "create keeps every field",
			when: create(with(func(c *aggregates.CreateCourse) {
				c.Status, c.StartDate, c.EndDate, c.Description = ptr("active"), ptr("2026-01-10"), ptr("2026-03-01"), ptr("Linear")
			})),
			then: []events.Event{events.CourseCreated{CourseID: 2, OrgID: 1, PartnerID: 6, Title: "Algebra", CourseKey: "ALG-1",
				Status: "active", StartDate: ptr("2026-01-10"), EndDate: ptr("2026-03-01"), Description: ptr("Linear"), CreatedBy: 9}},
		},
		{
			name: "a one-day course is fine",
			when: create(with(func(c *aggregates.CreateCourse) { c.StartDate, c.EndDate = ptr("2026-01-10"), ptr("2026-01-10") })),
			then: []events.Event{events.CourseCreated{CourseID: 2, OrgID: 1, PartnerID: 6, Title: "Algebra", CourseKey: "ALG-1",
				Status: "draft", StartDate: ptr("2026-01-10"), EndDate: ptr("2026-01-10"), CreatedBy: 9}},
		},
		{
			name:    "create: end_date before start_date is invalid",
			when:    create(with(func(c *aggregates.CreateCourse) { c.StartDate, c.EndDate = ptr("2026-01-10"), ptr("2026-01-09") })),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "create: a blank title is invalid",
			when:    create(with(func(c *aggregates.CreateCourse) { c.Title = " " })),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "create: a blank course key is invalid",
			when:    create(with(func(c *aggregates.CreateCourse) { c.CourseKey = "" })),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "create: an unknown status is invalid",
			when:    create(with(func(c *aggregates.CreateCourse) { c.Status = ptr("paused") })),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "create twice conflicts",
			given:   []events.Event{courseCreated},
			when:    create(base),
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "update records the changed fields and the full new state",
			given: []events.Event{courseCreated},
			when: update(aggregates.UpdateCourse{Title: aggregates.Set("Algebra I"), CourseKey: aggregates.Set("ALG-1"),
				Description: aggregates.Set(ptr("Linear"))}),
			then: []events.Event{events.CourseUpdated{CourseID: 2, OrgID: 1, Title: "Algebra I", CourseKey: "ALG-1",
				Description: ptr("Linear"), Changed: []string{"title", "description"}, UpdatedBy: 9}},
		},
		{
			name:  "update checks dates against the merged state",
			given: []events.Event{events.CourseCreated{CourseID: 2, OrgID: 1, PartnerID: 6, Title: "A", CourseKey: "K", Status: "draft", StartDate: ptr("2026-05-01")}},
			when:  update(aggregates.UpdateCourse{EndDate: aggregates.Set(ptr("2026-04-30"))}),
			// The stored start_date is later than the new end_date.
			wantErr: &derrors.FieldError{},
		},
		{
			name:  "update resets a date with null",
			given: []events.Event{events.CourseCreated{CourseID: 2, OrgID: 1, PartnerID: 6, Title: "A", CourseKey: "K", Status: "draft", StartDate: ptr("2026-05-01")}},
			when:  update(aggregates.UpdateCourse{StartDate: aggregates.Set[*string](nil)}),
			then: []events.Event{events.CourseUpdated{CourseID: 2, OrgID: 1, Title: "A", CourseKey: "K",
				Changed: []string{"start_date"}, UpdatedBy: 9}},
		},
		{
			name:    "update: a blank title is invalid",
			given:   []events.Event{courseCreated},
			when:    update(aggregates.UpdateCourse{Title: aggregates.Set("")}),
			wantErr: &derrors.FieldError{},
		},
		{
			name:  "status moves draft → active",
			given: []events.Event{courseCreated},
			when:  update(aggregates.UpdateCourse{Status: aggregates.Set("active")}),
			then:  []events.Event{events.CourseStatusChanged{CourseID: 2, OrgID: 1, From: "draft", To: "active", ChangedBy: 9}},
		},
		{
			name:  "status moves active → archived",
			given: []events.Event{courseCreated, events.CourseStatusChanged{CourseID: 2, OrgID: 1, From: "draft", To: "active"}},
			when:  update(aggregates.UpdateCourse{Status: aggregates.Set("archived")}),
			then:  []events.Event{events.CourseStatusChanged{CourseID: 2, OrgID: 1, From: "active", To: "archived", ChangedBy: 9}},
		},
		{
			name:  "status may skip forward: draft → archived",
			given: []events.Event{courseCreated},
			when:  update(aggregates.UpdateCourse{Status: aggregates.Set("archived")}),
			then:  []events.Event{events.CourseStatusChanged{CourseID: 2, OrgID: 1, From: "draft", To: "archived", ChangedBy: 9}},
		},
		{
			name:    "status never moves back: active → draft",
			given:   []events.Event{withCourseStatus("active")},
			when:    update(aggregates.UpdateCourse{Status: aggregates.Set("draft")}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:    "status never moves back: archived → active",
			given:   []events.Event{withCourseStatus("archived")},
			when:    update(aggregates.UpdateCourse{Status: aggregates.Set("active")}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:    "an invalid status move records nothing, not even the other fields",
			given:   []events.Event{withCourseStatus("archived")},
			when:    update(aggregates.UpdateCourse{Title: aggregates.Set("New"), Status: aggregates.Set("draft")}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "fields and status together",
			given: []events.Event{courseCreated},
			when:  update(aggregates.UpdateCourse{Title: aggregates.Set("B"), Status: aggregates.Set("active")}),
			then: []events.Event{
				events.CourseUpdated{CourseID: 2, OrgID: 1, Title: "B", CourseKey: "ALG-1", Changed: []string{"title"}, UpdatedBy: 9},
				events.CourseStatusChanged{CourseID: 2, OrgID: 1, From: "draft", To: "active", ChangedBy: 9},
			},
		},
		{
			name:  "an update that changes nothing records nothing",
			given: []events.Event{courseCreated},
			when:  update(aggregates.UpdateCourse{Title: aggregates.Set("Algebra"), Status: aggregates.Set("draft")}),
			then:  nil,
		},
		{
			name:    "another organisation's course is not found",
			given:   []events.Event{courseCreated},
			when:    update(aggregates.UpdateCourse{OrgID: 2, Title: aggregates.Set("Mine")}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:    "a missing course is not found",
			when:    update(aggregates.UpdateCourse{Title: aggregates.Set("x")}),
			wantErr: derrors.ErrNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolveCourse, tc.given...))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvolveCourse(t *testing.T) {
	c := given(aggregates.EvolveCourse, courseCreated,
		events.CourseUpdated{CourseID: 2, OrgID: 1, Title: "B", CourseKey: "K2", EndDate: ptr("2026-02-01"), Changed: []string{"title", "course_key", "end_date"}},
		events.CourseStatusChanged{CourseID: 2, OrgID: 1, From: "draft", To: "active"})
	want := aggregates.Course{ID: 2, OrgID: 1, PartnerID: 6, Title: "B", CourseKey: "K2", Status: "active",
		EndDate: ptr("2026-02-01"), CreatedBy: 9, CreatedAt: t0, UpdatedAt: t0.Add(2 * time.Minute), Version: 3}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

// An archived course takes no new classes; a draft or active one does.
func TestArchivedCourseTakesNoClasses(t *testing.T) {
	for status, want := range map[string]error{"draft": nil, "active": nil, "archived": derrors.ErrConflict} {
		err := aggregates.Course{Status: status}.CheckTakesClasses()
		if (want == nil) != (err == nil) || want != nil && !errors.Is(err, want) {
			t.Errorf("%s course: %v, want %v", status, err, want)
		}
	}
}
