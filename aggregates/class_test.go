package aggregates_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

var (
	classCreated = events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "Period 1", Status: "planned",
		AllowedModelIDs: []int64{}, CreatedBy: 7}
	studentCode = events.InviteCodeIssued{ClassID: 9, OrgID: 1, PartnerID: 6, InviteCodeID: 11, Code: "STUDENT2",
		TargetRole: "student", MaxUses: 2, Status: "active", ExpiresAt: t0.Add(time.Hour), CreatedBy: 7}
	assistantCode = events.InviteCodeIssued{ClassID: 9, OrgID: 1, PartnerID: 6, InviteCodeID: 12, Code: "ASSIST22",
		TargetRole: "assistant", MaxUses: 5, Status: "active", ExpiresAt: t0.Add(time.Hour), CreatedBy: 7}
	aClass = []events.Event{classCreated, studentCode, assistantCode}
)

func classWith(evs ...events.Event) []events.Event { return append(slices.Clone(aClass), evs...) }

// limits is code id's limits changed by user 7.
func limits(id, maxUses int64, expires time.Time, status string) events.InviteCodeLimitsChanged {
	return events.InviteCodeLimitsChanged{ClassID: 9, OrgID: 1, InviteCodeID: id, MaxUses: maxUses, ExpiresAt: expires,
		Status: status, ChangedBy: 7}
}

func used(n int64, status string) events.InviteCodeUsed {
	return events.InviteCodeUsed{ClassID: 9, OrgID: 1, InviteCodeID: 11, Code: "STUDENT2", TargetRole: "student",
		UserID: 40 + n, EnrollmentID: 100 + n, UsedCount: n, MaxUses: 2, Status: status}
}

func TestCreateClassDecisions(t *testing.T) {
	codes := func(c *aggregates.CreateClass) {
		c.StudentCode = aggregates.NewInviteCode{ID: 11, Code: "STUDENT2"}
		c.AssistantCode = aggregates.NewInviteCode{ID: 12, Code: "ASSIST22"}
	}
	base := aggregates.CreateClass{ClassID: 9, OrgID: 1, PartnerID: 6, CallerID: 7, Name: "Period 1", Now: t0}
	codes(&base)
	with := func(f func(*aggregates.CreateClass)) aggregates.CreateClass {
		c := base
		f(&c)
		return c
	}
	end := t0.Add(30 * 24 * time.Hour)
	issued := func(id int64, code, role string, maxUses int64, expires time.Time) events.InviteCodeIssued {
		return events.InviteCodeIssued{ClassID: 9, OrgID: 1, PartnerID: 6, InviteCodeID: id, Code: code, TargetRole: role,
			MaxUses: maxUses, Status: "active", ExpiresAt: expires, CreatedBy: 7}
	}
	cases := []struct {
		name    string
		given   []events.Event
		when    aggregates.CreateClass
		then    []events.Event
		wantErr error
	}{
		{
			name: "planned by default, with a student code of 100 uses and an assistant code of 5, for 180 days",
			when: base,
			then: []events.Event{
				classCreated,
				issued(11, "STUDENT2", "student", 100, t0.Add(180*24*time.Hour)),
				issued(12, "ASSIST22", "assistant", 5, t0.Add(180*24*time.Hour)),
			},
		},
		{
			name: "the student code admits the capacity and both codes expire with the class",
			when: with(func(c *aggregates.CreateClass) {
				c.Capacity, c.StartAt, c.EndAt, c.Status, c.InviteOnly = ptr[int64](25), ptr(t0), &end, ptr("active"), ptr(true)
				c.CourseID, c.PrimaryModelID, c.AllowedModelIDs = ptr[int64](2), ptr[int64](1), []int64{1, 2}
				c.Description, c.Timezone, c.Location, c.OnlineURL = ptr("d"), ptr("Europe/Paris"), ptr("Room 4"), ptr("https://x.test")
			}),
			then: []events.Event{
				events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, CourseID: ptr[int64](2), Name: "Period 1", Description: ptr("d"),
					Status: "active", StartAt: ptr(t0), EndAt: &end, Capacity: ptr[int64](25), Timezone: ptr("Europe/Paris"),
					Location: ptr("Room 4"), OnlineURL: ptr("https://x.test"), InviteOnly: true, PrimaryModelID: ptr[int64](1),
					AllowedModelIDs: []int64{1, 2}, CreatedBy: 7},
				issued(11, "STUDENT2", "student", 25, end),
				issued(12, "ASSIST22", "assistant", 5, end),
			},
		},
		{
			name:    "a new class cannot be ended",
			when:    with(func(c *aggregates.CreateClass) { c.Status = ptr("ended") }),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "an unknown status is invalid",
			when:    with(func(c *aggregates.CreateClass) { c.Status = ptr("paused") }),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "end_at before start_at is invalid",
			when:    with(func(c *aggregates.CreateClass) { c.StartAt, c.EndAt = &end, ptr(t0) }),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "a blank name is invalid",
			when:    with(func(c *aggregates.CreateClass) { c.Name = "  " }),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "a capacity below 1 is invalid",
			when:    with(func(c *aggregates.CreateClass) { c.Capacity = ptr[int64](0) }),
			wantErr: &derrors.FieldError{},
		},
		{
			name: "an allowed model outside the catalogue is unknown",
			when: with(func(c *aggregates.CreateClass) {
				c.Catalogue, c.AllowedModelIDs = []int64{1, 2}, []int64{1, 3}
			}),
			wantErr: aggregates.ErrUnknownModel,
		},
		{
			name: "a primary model outside the catalogue is unknown",
			when: with(func(c *aggregates.CreateClass) {
				c.Catalogue, c.PrimaryModelID = []int64{1, 2}, ptr[int64](3)
			}),
			wantErr: aggregates.ErrUnknownModel,
		},
		{
			name: "a model named twice is invalid",
			when: with(func(c *aggregates.CreateClass) {
				c.Catalogue, c.AllowedModelIDs = []int64{1, 2}, []int64{2, 2}
			}),
			wantErr: &derrors.FieldError{},
		},
		{
			name: "a primary model outside the allowed models is invalid",
			when: with(func(c *aggregates.CreateClass) {
				c.Catalogue, c.PrimaryModelID, c.AllowedModelIDs = []int64{1, 2}, ptr[int64](2), []int64{1}
			}),
			wantErr: &derrors.FieldError{},
		},
		{
			name: "any primary model goes with no allowed list",
			when: with(func(c *aggregates.CreateClass) {
				c.Catalogue, c.PrimaryModelID = []int64{1, 2}, ptr[int64](2)
			}),
			then: []events.Event{
				func() events.ClassCreated { e := classCreated; e.PrimaryModelID = ptr[int64](2); return e }(),
				issued(11, "STUDENT2", "student", 100, t0.Add(180*24*time.Hour)),
				issued(12, "ASSIST22", "assistant", 5, t0.Add(180*24*time.Hour)),
			},
		},
		{
			name:    "create twice conflicts",
			given:   aClass,
			when:    base,
			wantErr: derrors.ErrConflict,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := aggregates.DecideCreateClass(given(aggregates.EvolveClass, tc.given...), tc.when)
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the codes must have been prepared", func(t *testing.T) {
		c := base
		c.AssistantCode = c.StudentCode
		if _, err := aggregates.DecideCreateClass(aggregates.Class{}, c); err == nil {
			t.Error("two equal codes were accepted")
		}
	})
}

func TestUpdateClassDecisions(t *testing.T) {
	later := t0.Add(time.Hour)
	update := func(c aggregates.UpdateClass) aggregates.UpdateClass {
		c.ClassID, c.CallerID = 9, 7
		if c.OrgID == 0 {
			c.OrgID = 1
		}
		return c
	}
	updated := func(changed ...string) events.ClassUpdated {
		return events.ClassUpdated{ClassID: 9, OrgID: 1, Name: "Period 1", AllowedModelIDs: []int64{}, Changed: changed, UpdatedBy: 7}
	}
	cases := []struct {
		name    string
		given   []events.Event
		when    aggregates.UpdateClass
		then    []events.Event
		wantErr error
	}{
		{
			name:  "update records the changed fields and the full new state",
			given: aClass,
			when: update(aggregates.UpdateClass{Name: aggregates.Set("Period 2"), Capacity: aggregates.Set(ptr[int64](30)),
				AllowedModelIDs: aggregates.Set([]int64{2, 1}), InviteOnly: aggregates.Set(false), EndAt: aggregates.Set(&later)}),
			then: []events.Event{func() events.ClassUpdated {
				e := updated("name", "end_at", "capacity", "allowed_model_ids")
				e.Name, e.Capacity, e.AllowedModelIDs, e.EndAt = "Period 2", ptr[int64](30), []int64{2, 1}, &later
				return e
			}(),
				// The student code's bound follows the capacity; the end is
				// where both codes expire already.
				limits(11, 30, later, "active")},
		},
		{
			name:  "a raised capacity opens an exhausted student code again",
			given: classWith(used(1, "active"), used(2, "exhausted")),
			when:  update(aggregates.UpdateClass{Capacity: aggregates.Set(ptr[int64](3))}),
			then: []events.Event{func() events.ClassUpdated {
				e := updated("capacity")
				e.Capacity = ptr[int64](3)
				return e
			}(), limits(11, 3, t0.Add(time.Hour), "active")},
		},
		{
			name:  "a capacity below the uses exhausts the student code",
			given: classWith(used(1, "active")),
			when:  update(aggregates.UpdateClass{Capacity: aggregates.Set(ptr[int64](1))}),
			then: []events.Event{func() events.ClassUpdated {
				e := updated("capacity")
				e.Capacity = ptr[int64](1)
				return e
			}(), limits(11, 1, t0.Add(time.Hour), "exhausted")},
		},
		{
			name:  "a moved end moves every code's expiry, a revoked code's aside",
			given: classWith(events.InviteCodeRevoked{ClassID: 9, OrgID: 1, InviteCodeID: 12, Code: "ASSIST22"}),
			when:  update(aggregates.UpdateClass{EndAt: aggregates.Set(ptr(t0.Add(30 * 24 * time.Hour)))}),
			then: []events.Event{func() events.ClassUpdated {
				e := updated("end_at")
				e.EndAt = ptr(t0.Add(30 * 24 * time.Hour))
				return e
			}(), limits(11, 2, t0.Add(30*24*time.Hour), "active")},
		},
		{
			name: "an end removed: codes expire 180 days after they were issued",
			given: []events.Event{func() events.ClassCreated { e := classCreated; e.EndAt = ptr(t0.Add(time.Hour)); return e }(),
				studentCode, assistantCode},
			when: update(aggregates.UpdateClass{EndAt: aggregates.Set[*time.Time](nil)}),
			then: []events.Event{updated("end_at"),
				limits(11, 2, t0.Add(time.Minute+aggregates.DefaultCodeLifetime), "active"),
				limits(12, 5, t0.Add(2*time.Minute+aggregates.DefaultCodeLifetime), "active")},
		},
		{
			name:  "other fields leave the codes alone",
			given: aClass,
			when:  update(aggregates.UpdateClass{Name: aggregates.Set("Period 2")}),
			then: []events.Event{func() events.ClassUpdated {
				e := updated("name")
				e.Name = "Period 2"
				return e
			}()},
		},
		{
			name:  "null resets a field",
			given: []events.Event{events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "Period 1", Status: "planned", Location: ptr("Room 1"), CourseID: ptr[int64](3)}},
			when: update(aggregates.UpdateClass{Location: aggregates.Set[*string](nil), CourseID: aggregates.Set[*int64](nil),
				AllowedModelIDs: aggregates.Set[[]int64](nil)}),
			then: []events.Event{updated("course_id", "location")},
		},
		{
			name:    "models set outside the catalogue are unknown",
			given:   aClass,
			when:    update(aggregates.UpdateClass{Catalogue: []int64{1, 2}, AllowedModelIDs: aggregates.Set([]int64{4})}),
			wantErr: aggregates.ErrUnknownModel,
		},
		{
			name: "a model since withdrawn from the catalogue does not block other changes",
			given: []events.Event{events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "Period 1", Status: "planned",
				PrimaryModelID: ptr[int64](4), AllowedModelIDs: []int64{4}}},
			when: update(aggregates.UpdateClass{Catalogue: []int64{1, 2}, Name: aggregates.Set("Period 2"),
				AllowedModelIDs: aggregates.Set([]int64{4}), PrimaryModelID: aggregates.Set(ptr[int64](4))}), // sent back as they are
			then: []events.Event{func() events.ClassUpdated {
				e := updated("name")
				e.Name, e.PrimaryModelID, e.AllowedModelIDs = "Period 2", ptr[int64](4), []int64{4}
				return e
			}()},
		},
		{
			name: "a primary model moved outside the allowed models is invalid",
			given: []events.Event{events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "Period 1", Status: "planned",
				PrimaryModelID: ptr[int64](1), AllowedModelIDs: []int64{1}}},
			when:    update(aggregates.UpdateClass{Catalogue: []int64{1, 2}, PrimaryModelID: aggregates.Set(ptr[int64](2))}),
			wantErr: &derrors.FieldError{},
		},
		{
			name: "allowed models that leave the primary model out are invalid",
			given: []events.Event{events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "Period 1", Status: "planned",
				PrimaryModelID: ptr[int64](1), AllowedModelIDs: []int64{1, 2}}},
			when:    update(aggregates.UpdateClass{Catalogue: []int64{1, 2}, AllowedModelIDs: aggregates.Set([]int64{2})}),
			wantErr: &derrors.FieldError{},
		},
		{
			name: "a class recorded with its primary model outside its allowed ones takes other changes",
			given: []events.Event{events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "Period 1", Status: "planned",
				PrimaryModelID: ptr[int64](1), AllowedModelIDs: []int64{2}}},
			when: update(aggregates.UpdateClass{Catalogue: []int64{1, 2}, Name: aggregates.Set("Period 2")}),
			then: []events.Event{func() events.ClassUpdated {
				e := updated("name")
				e.Name, e.PrimaryModelID, e.AllowedModelIDs = "Period 2", ptr[int64](1), []int64{2}
				return e
			}()},
		},
		{
			name:    "a start_at after the stored end_at is the start's fault",
			given:   []events.Event{events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "P", Status: "planned", EndAt: &t0}},
			when:    update(aggregates.UpdateClass{StartAt: aggregates.Set(&later)}),
			wantErr: &derrors.FieldError{Field: "start_at"},
		},
		{
			name:    "end_at before the stored start_at is invalid",
			given:   []events.Event{events.ClassCreated{ClassID: 9, OrgID: 1, PartnerID: 6, Name: "P", Status: "planned", StartAt: &later}},
			when:    update(aggregates.UpdateClass{EndAt: aggregates.Set(ptr(t0))}),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "a blank name is invalid",
			given:   aClass,
			when:    update(aggregates.UpdateClass{Name: aggregates.Set("")}),
			wantErr: &derrors.FieldError{},
		},
		{
			name:  "status planned → active",
			given: aClass,
			when:  update(aggregates.UpdateClass{Status: aggregates.Set("active")}),
			then:  []events.Event{events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "active", ChangedBy: 7}},
		},
		{
			name:  "status active → ended",
			given: classWith(events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "active"}),
			when:  update(aggregates.UpdateClass{Status: aggregates.Set("ended")}),
			then:  []events.Event{events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "active", To: "ended", ChangedBy: 7}},
		},
		{
			name:  "status may skip forward: planned → ended",
			given: aClass,
			when:  update(aggregates.UpdateClass{Status: aggregates.Set("ended")}),
			then:  []events.Event{events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "ended", ChangedBy: 7}},
		},
		{
			name:    "status never moves back: active → planned",
			given:   classWith(events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "active"}),
			when:    update(aggregates.UpdateClass{Status: aggregates.Set("planned")}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:    "status never moves back: ended → active",
			given:   classWith(events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "ended"}),
			when:    update(aggregates.UpdateClass{Status: aggregates.Set("active"), Name: aggregates.Set("x")}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "an update that changes nothing records nothing",
			given: aClass,
			when: update(aggregates.UpdateClass{Name: aggregates.Set("Period 1"), Status: aggregates.Set("planned"),
				AllowedModelIDs: aggregates.Set([]int64{}), InviteOnly: aggregates.Set(false)}),
			then: nil,
		},
		{
			name:    "another organisation's class is not found",
			given:   aClass,
			when:    update(aggregates.UpdateClass{OrgID: 2, Name: aggregates.Set("Mine")}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:    "a missing class is not found",
			when:    update(aggregates.UpdateClass{Name: aggregates.Set("x")}),
			wantErr: derrors.ErrNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := aggregates.DecideUpdateClass(given(aggregates.EvolveClass, tc.given...), tc.when)
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInviteCodeDecisions(t *testing.T) {
	use := func(code string, n int64, now time.Time) aggregates.UseInviteCode {
		return aggregates.UseInviteCode{Code: code, UserID: 40 + n, EnrollmentID: 100 + n, Now: now}
	}
	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.Class) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{
			name:  "a use counts",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("STUDENT2", 1, t0))
			},
			then: []events.Event{used(1, "active")},
		},
		{
			name:  "the use that reaches max_uses exhausts the code",
			given: classWith(used(1, "active")),
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("STUDENT2", 2, t0))
			},
			then: []events.Event{used(2, "exhausted")},
		},
		{
			name:  "an exhausted code admits no one",
			given: classWith(used(1, "active"), used(2, "exhausted")),
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("STUDENT2", 3, t0))
			},
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "a code is usable until just before it expires",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("STUDENT2", 1, t0.Add(time.Hour-time.Microsecond)))
			},
			then: []events.Event{used(1, "active")},
		},
		{
			name:  "an expired code admits no one",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("STUDENT2", 1, t0.Add(time.Hour)))
			},
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "a revoked code admits no one",
			given: classWith(events.InviteCodeRevoked{ClassID: 9, OrgID: 1, InviteCodeID: 11, Code: "STUDENT2"}),
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("STUDENT2", 1, t0))
			},
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "an assistant code does not enroll a student",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("ASSIST22", 1, t0))
			},
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "an ended class admits no one",
			given: classWith(events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "ended"}),
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("STUDENT2", 1, t0))
			},
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "an unknown code is not found",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideUseInviteCode(c, use("NOPE2345", 1, t0))
			},
			wantErr: derrors.ErrNotFound,
		},
		{
			name:  "revoke",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideRevokeInviteCode(c, aggregates.RevokeInviteCode{ClassID: 9, OrgID: 1, InviteCodeID: 12, CallerID: 7})
			},
			then: []events.Event{events.InviteCodeRevoked{ClassID: 9, OrgID: 1, InviteCodeID: 12, Code: "ASSIST22", RevokedBy: 7}},
		},
		{
			name:  "revoking a revoked code records nothing",
			given: classWith(events.InviteCodeRevoked{ClassID: 9, OrgID: 1, InviteCodeID: 12, Code: "ASSIST22"}),
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideRevokeInviteCode(c, aggregates.RevokeInviteCode{ClassID: 9, OrgID: 1, InviteCodeID: 12, CallerID: 7})
			},
		},
		{
			name:  "revoking another class's code: not found",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideRevokeInviteCode(c, aggregates.RevokeInviteCode{ClassID: 9, OrgID: 1, InviteCodeID: 13, CallerID: 7})
			},
			wantErr: derrors.ErrNotFound,
		},
		{
			name:  "revoking in another organisation's class: not found",
			given: aClass,
			when: func(c aggregates.Class) ([]events.Event, error) {
				return aggregates.DecideRevokeInviteCode(c, aggregates.RevokeInviteCode{ClassID: 9, OrgID: 2, InviteCodeID: 11, CallerID: 7})
			},
			wantErr: derrors.ErrNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolveClass, tc.given...))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvolveClass(t *testing.T) {
	c := given(aggregates.EvolveClass, classWith(used(1, "active"), used(2, "exhausted"),
		events.InviteCodeRevoked{ClassID: 9, OrgID: 1, InviteCodeID: 12, Code: "ASSIST22"},
		events.ClassStatusChanged{ClassID: 9, OrgID: 1, From: "planned", To: "active"})...)
	want := aggregates.Class{ID: 9, OrgID: 1, PartnerID: 6, Name: "Period 1", Status: "active", AllowedModelIDs: []int64{}, CreatedBy: 7,
		InviteCodes: []aggregates.InviteCode{
			{ID: 11, Code: "STUDENT2", TargetRole: "student", MaxUses: 2, UsedCount: 2, Status: "exhausted", ExpiresAt: t0.Add(time.Hour), CreatedBy: 7, CreatedAt: t0.Add(time.Minute)},
			{ID: 12, Code: "ASSIST22", TargetRole: "assistant", MaxUses: 5, Status: "revoked", ExpiresAt: t0.Add(time.Hour), CreatedBy: 7, CreatedAt: t0.Add(2 * time.Minute)},
		},
		CreatedAt: t0, UpdatedAt: t0.Add(6 * time.Minute), Version: 7}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	// An earlier state is not changed by folding later events.
	before := given(aggregates.EvolveClass, aClass...)
	_ = aggregates.EvolveClass(before, events.Envelope{Meta: events.Meta{Version: 4}, Event: used(1, "active")})
	if before.InviteCodes[0].UsedCount != 0 {
		t.Error("evolving a state changed the state it came from")
	}
}

func TestInviteCodeStatusAt(t *testing.T) {
	code := aggregates.InviteCode{Status: "active", ExpiresAt: t0}
	for _, tc := range []struct {
		code aggregates.InviteCode
		now  time.Time
		want string
	}{
		{code, t0.Add(-time.Microsecond), "active"},
		{code, t0, "expired"},
		{aggregates.InviteCode{Status: "revoked", ExpiresAt: t0}, t0.Add(time.Hour), "revoked"},
		{aggregates.InviteCode{Status: "exhausted", ExpiresAt: t0}, t0.Add(time.Hour), "exhausted"},
	} {
		if got := tc.code.StatusAt(tc.now); got != tc.want {
			t.Errorf("%+v at %s: %q, want %q", tc.code, tc.now, got, tc.want)
		}
	}
}
