package api

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
	_ "time/tzdata" // class time zones: the same names on every machine

	"lectern/aggregates"
	"lectern/api/validation"
	"lectern/derrors"
	"lectern/projections"
	"lectern/queries"
)

// Limits of the classroom's fields not in the seed.
const (
	maxCapacity   = 10_000
	maxURL        = 2_000
	maxInviteCode = 64
)

var (
	// classroomReadModels serve every classroom read.
	classroomReadModels = []string{projections.ClassroomProjection}
	// partnerAreaReadModels serve the reads under /partner/{partner_id}: the
	// partner record authorises them.
	partnerAreaReadModels = []string{projections.ClassroomProjection, projections.PartnersProjection}

	partnerPath       = []validation.Field{idParam("partner_id")}
	coursePath        = []validation.Field{idParam("partner_id"), idParam("course_id")}
	classPath         = []validation.Field{idParam("partner_id"), idParam("class_id")}
	inviteCodePath    = []validation.Field{idParam("partner_id"), idParam("class_id"), idParam("invite_code_id")}
	studentPath       = []validation.Field{idParam("partner_id"), idParam("student_id")}
	enrollmentPath    = []validation.Field{idParam("enrollment_id")}
	createClassQuery  = []validation.Field{{Name: "course_id", Kind: validation.Int, Ge: bound(1)}}
	courseStatusField = validation.Field{Name: "status", Kind: validation.Enum, Enum: aggregates.CourseStatuses, Default: aggregates.CourseDraft}
	modelIDs          = validation.Field{Name: "allowed_model_ids", Kind: validation.List, Nullable: true, MaxItems: maxAllowedModelIDs,
		Elem: &validation.Field{Kind: validation.Int, Ge: bound(1)}}
	capacityField = validation.Field{Name: "capacity", Kind: validation.Int, Nullable: true, Ge: bound(1), Le: bound(maxCapacity)}

	createCourseBody = validation.Schema{Fields: []validation.Field{
		{Name: "title", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		{Name: "course_key", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		courseStatusField,
		{Name: "start_date", Kind: validation.Date, Nullable: true},
		{Name: "end_date", Kind: validation.Date, Nullable: true},
		optString("description", maxText, true),
	}}
	updateCourseBody = validation.Schema{Fields: []validation.Field{
		{Name: "title", Kind: validation.String, MinLength: 1, MaxLength: maxName},
		{Name: "course_key", Kind: validation.String, MinLength: 1, MaxLength: maxName},
		{Name: "status", Kind: validation.Enum, Enum: aggregates.CourseStatuses},
		{Name: "start_date", Kind: validation.Date, Nullable: true},
		{Name: "end_date", Kind: validation.Date, Nullable: true},
		optString("description", maxText, true),
	}}
	createClassBody = validation.Schema{Fields: classFields(
		validation.Field{Name: "name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		validation.Field{Name: "status", Kind: validation.Enum, Enum: aggregates.ClassStatuses, Nullable: true, Default: aggregates.ClassPlanned,
			Description: "planned (the default) or active; a new class cannot be ended"},
	)}
	updateClassBody = validation.Schema{Fields: classFields(
		validation.Field{Name: "name", Kind: validation.String, MinLength: 1, MaxLength: maxName},
		validation.Field{Name: "status", Kind: validation.Enum, Enum: aggregates.ClassStatuses,
			Description: "moves only forward: planned → active → ended"},
	)}
	enrollBody = validation.Schema{Fields: []validation.Field{
		{Name: "class_id", Kind: validation.Int, Required: true, Ge: bound(1)},
		{Name: "student_id", Kind: validation.Int, Required: true, Ge: bound(1), Description: "must equal student_id in the path"},
		{Name: "invite_code_id", Kind: validation.Int, Nullable: true, Ge: bound(1)},
		{Name: "status", Kind: validation.Enum, Enum: aggregates.EnrollmentStatuses, Nullable: true, Default: aggregates.EnrollmentActive},
		{Name: "enrolled_at", Kind: validation.DateTime, Nullable: true, Description: "defaults to now"},
		{Name: "completed_at", Kind: validation.DateTime, Nullable: true},
	}}
	joinBody = validation.Schema{Fields: []validation.Field{
		{Name: "code", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxInviteCode},
	}}
)

// classFields are a class's body fields (seed 2.6), name and status first.
func classFields(name, status validation.Field) []validation.Field {
	return []validation.Field{
		name,
		optString("description", maxText, true),
		status,
		{Name: "start_at", Kind: validation.DateTime, Nullable: true},
		{Name: "end_at", Kind: validation.DateTime, Nullable: true},
		capacityField,
		optString("timezone", maxName, true),
		optString("location", maxName, true),
		optString("online_url", maxURL, true),
		{Name: "invite_only", Kind: validation.Bool, Nullable: true, Default: false},
		{Name: "course_id", Kind: validation.Int, Nullable: true, Ge: bound(1)},
		{Name: "primary_model_id", Kind: validation.Int, Nullable: true, Ge: bound(1)},
		modelIDs,
	}
}

// classroomOperations are the courses, classes, invite codes and enrollments.
func (s *Server) classroomOperations() []operation {
	partnerErrors := []int{401, 403, 404}
	return []operation{
		// Courses (seed 4.13; DESIGN §7).
		{method: http.MethodPost, path: "/partner/{partner_id}/course", id: "create_course", tag: "courses", auth: true, idempotent: true,
			summary: "Create a course in the partner's organization", pathParams: partnerPath, body: &createCourseBody,
			status: 201, response: "Course", errors: []int{401, 403, 404, 409}, location: &locatedBy{get: "get_course", id: "id"},
			handle: s.createCourse},
		{method: http.MethodGet, path: "/partner/{partner_id}/course", id: "list_courses", tag: "courses", auth: true,
			summary: "List the organization's courses", pathParams: partnerPath, query: pageQuery,
			status: 200, response: "CourseList", errors: partnerErrors, handle: s.listCourses},
		{method: http.MethodGet, path: "/partner/{partner_id}/course/{course_id}", id: "get_course", tag: "courses", auth: true,
			summary: "Read one of the organization's courses", pathParams: coursePath,
			status: 200, response: "Course", errors: partnerErrors, handle: s.getCourse},
		{method: http.MethodPatch, path: "/partner/{partner_id}/course/{course_id}", id: "update_course", tag: "courses", auth: true,
			summary: "Update a course (merge); status moves only forward: draft → active → archived", pathParams: coursePath,
			body: &updateCourseBody, status: 200, response: "Course", errors: []int{401, 403, 404, 409}, handle: s.updateCourse},

		// Classes and their invite codes (seed 4.10; DESIGN §7).
		{method: http.MethodPost, path: "/partner/{partner_id}/classes", id: "create_class", tag: "classes", auth: true, idempotent: true,
			summary: "Create a class with its default invite codes", pathParams: partnerPath, query: createClassQuery,
			body: &createClassBody, status: 201, response: "Class", errors: []int{401, 403, 404, 409},
			location: &locatedBy{get: "get_class", id: "id"}, handle: s.createClass},
		{method: http.MethodGet, path: "/partner/{partner_id}/classes", id: "list_classes", tag: "classes", auth: true,
			summary: "List the organization's classes", pathParams: partnerPath, query: pageQuery,
			status: 200, response: "ClassList", errors: partnerErrors, handle: s.listClasses},
		{method: http.MethodGet, path: "/partner/{partner_id}/classes/{class_id}", id: "get_class", tag: "classes", auth: true,
			summary: "Read one of the organization's classes", pathParams: classPath,
			status: 200, response: "Class", errors: partnerErrors, handle: s.getClass},
		{method: http.MethodPatch, path: "/partner/{partner_id}/classes/{class_id}", id: "update_class", tag: "classes", auth: true,
			summary: "Update a class (merge); status moves only forward: planned → active → ended", pathParams: classPath,
			body: &updateClassBody, status: 200, response: "Class", errors: []int{401, 403, 404, 409}, handle: s.updateClass},
		{method: http.MethodPost, path: "/partner/{partner_id}/classes/{class_id}/invite-codes/{invite_code_id}/revoke",
			id: "revoke_invite_code", tag: "classes", auth: true, summary: "Revoke an invite code of a class",
			pathParams: inviteCodePath, status: 200, response: "InviteCode", errors: partnerErrors, handle: s.revokeInviteCode},

		// Enrollments (seed 4.9, 4.12; DESIGN §7). Their 201s send no
		// Location: no GET reads one enrollment.
		{method: http.MethodGet, path: "/partner/{partner_id}/classes/{class_id}/enrollments", id: "list_class_enrollments",
			tag: "enrollments", auth: true, summary: "List a class's enrollments", pathParams: classPath, query: pageQuery,
			status: 200, response: "EnrollmentList", errors: partnerErrors, handle: s.listClassEnrollments},
		{method: http.MethodPost, path: "/partner/{partner_id}/student/{student_id}/enrollments", id: "enroll_student",
			tag: "enrollments", auth: true, idempotent: true, summary: "Enroll a student in one of the organization's classes",
			pathParams: studentPath, body: &enrollBody, status: 201, response: "Enrollment",
			errors: []int{401, 403, 404, 409}, handle: s.enrollStudent},
		{method: http.MethodGet, path: "/user/class/enrollments", id: "list_my_enrollments", tag: "enrollments", auth: true,
			summary: "List my enrollments", query: pageQuery, status: 200, response: "EnrollmentList",
			errors: []int{401}, handle: s.listMyEnrollments},
		{method: http.MethodDelete, path: "/user/class/enrollments/{enrollment_id}", id: "drop_enrollment", tag: "enrollments",
			auth: true, summary: "Drop an enrollment (its status becomes dropped)", pathParams: enrollmentPath,
			status: 204, errors: []int{401, 404, 409}, handle: s.dropEnrollment},
		{method: http.MethodPost, path: "/user/class/join", id: "join_class", tag: "enrollments", auth: true, idempotent: true,
			summary: "Join a class as a student with an invite code", body: &joinBody, status: 201, response: "Enrollment",
			errors: []int{401, 404, 409, 429}, handle: s.joinClass},
	}
}

func enumOf(values []string) schema { return schema{"type": "string", "enum": values} }

func date() schema { return schema{"type": "string", "format": "date"} }

// classroomComponents are their response schemas.
func classroomComponents() schema {
	course := schema{
		"id": integer(), "org_id": integer(), "partner_id": integer(), "title": str(), "course_key": str(),
		"status": enumOf(aggregates.CourseStatuses), "start_date": nullable(date()), "end_date": nullable(date()),
		"description": nullable(str()), "created_at": dateTime(), "updated_at": dateTime(),
	}
	inviteCode := schema{
		"id": integer(), "partner_id": integer(), "class_id": integer(), "code": str(),
		"target_role": enumOf([]string{aggregates.TargetStudent, aggregates.TargetAssistant}), "used_count": integer(),
		"status":     enumOf([]string{aggregates.CodeActive, aggregates.CodeExpired, aggregates.CodeRevoked, aggregates.CodeExhausted}),
		"created_at": dateTime(), "expires_at": dateTime(), "max_uses": integer(), "created_by": integer(),
	}
	class := schema{
		"id": integer(), "partner_id": integer(), "org_id": integer(), "course_id": nullable(integer()), "name": str(),
		"description": nullable(str()), "status": enumOf(aggregates.ClassStatuses), "start_at": nullable(dateTime()),
		"end_at": nullable(dateTime()), "capacity": nullable(integer()), "timezone": nullable(str()),
		"location": nullable(str()), "online_url": nullable(str()), "invite_only": boolean(),
		"primary_model_id": nullable(integer()), "allowed_model_ids": arrayOf(integer()),
		"created_at": dateTime(), "updated_at": dateTime(), "invite_codes": arrayOf(ref("InviteCode")),
	}
	enrollment := schema{
		"id": integer(), "class_id": integer(), "student_id": integer(), "invite_code_id": nullable(integer()),
		"status": enumOf(aggregates.EnrollmentStatuses), "enrolled_at": dateTime(), "completed_at": nullable(dateTime()),
		"created_at": dateTime(), "updated_at": dateTime(),
	}
	return schema{
		"Course":         object(course, keysOf(course)...),
		"CourseList":     listOf("Course"),
		"InviteCode":     object(inviteCode, keysOf(inviteCode)...),
		"Class":          object(class, keysOf(class)...),
		"ClassList":      listOf("Class"),
		"Enrollment":     object(enrollment, keysOf(enrollment)...),
		"EnrollmentList": listOf("Enrollment"),
	}
}

// keysOf lists every property: the classroom's responses always carry
// every field, null where it has no value.
func keysOf(props schema) []string {
	return slices.Sorted(maps.Keys(props))
}

// Responses.

type courseJSON struct {
	ID          int64   `json:"id"`
	OrgID       int64   `json:"org_id"`
	PartnerID   int64   `json:"partner_id"`
	Title       string  `json:"title"`
	CourseKey   string  `json:"course_key"`
	Status      string  `json:"status"`
	StartDate   *string `json:"start_date"`
	EndDate     *string `json:"end_date"`
	Description *string `json:"description"`
	CreatedAt   string  `json:"created_at"`
	UpdatedAt   string  `json:"updated_at"`
}

// dateFormat is a calendar date on the wire.
const dateFormat = "2006-01-02"

func datePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.Format(dateFormat)
	return &s
}

func courseFromState(c aggregates.Course) courseJSON {
	return courseJSON{ID: c.ID, OrgID: c.OrgID, PartnerID: c.PartnerID, Title: c.Title, CourseKey: c.CourseKey,
		Status: c.Status, StartDate: c.StartDate, EndDate: c.EndDate, Description: c.Description,
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt)}
}

func courseFromRow(c queries.Course) courseJSON {
	return courseJSON{ID: c.ID, OrgID: c.OrgID, PartnerID: c.PartnerID, Title: c.Title, CourseKey: c.CourseKey,
		Status: c.Status, StartDate: datePtr(c.StartDate), EndDate: datePtr(c.EndDate), Description: c.Description,
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt)}
}

type inviteCodeJSON struct {
	ID         int64  `json:"id"`
	PartnerID  int64  `json:"partner_id"`
	ClassID    int64  `json:"class_id"`
	Code       string `json:"code"`
	TargetRole string `json:"target_role"`
	UsedCount  int64  `json:"used_count"`
	Status     string `json:"status"`
	CreatedAt  string `json:"created_at"`
	ExpiresAt  string `json:"expires_at"`
	MaxUses    int64  `json:"max_uses"`
	CreatedBy  int64  `json:"created_by"`
}

func inviteCodeFromState(c aggregates.Class, ic aggregates.InviteCode, now time.Time) inviteCodeJSON {
	return inviteCodeJSON{ID: ic.ID, PartnerID: c.PartnerID, ClassID: c.ID, Code: ic.Code, TargetRole: ic.TargetRole,
		UsedCount: ic.UsedCount, Status: ic.StatusAt(now), CreatedAt: ts(ic.CreatedAt), ExpiresAt: ts(ic.ExpiresAt),
		MaxUses: ic.MaxUses, CreatedBy: ic.CreatedBy}
}

type classJSON struct {
	ID              int64            `json:"id"`
	PartnerID       int64            `json:"partner_id"`
	OrgID           int64            `json:"org_id"`
	CourseID        *int64           `json:"course_id"`
	Name            string           `json:"name"`
	Description     *string          `json:"description"`
	Status          string           `json:"status"`
	StartAt         *string          `json:"start_at"`
	EndAt           *string          `json:"end_at"`
	Capacity        *int64           `json:"capacity"`
	Timezone        *string          `json:"timezone"`
	Location        *string          `json:"location"`
	OnlineURL       *string          `json:"online_url"`
	InviteOnly      bool             `json:"invite_only"`
	PrimaryModelID  *int64           `json:"primary_model_id"`
	AllowedModelIDs []int64          `json:"allowed_model_ids"`
	CreatedAt       string           `json:"created_at"`
	UpdatedAt       string           `json:"updated_at"`
	InviteCodes     []inviteCodeJSON `json:"invite_codes"`
}

func classFromState(c aggregates.Class, now time.Time) classJSON {
	out := classJSON{ID: c.ID, PartnerID: c.PartnerID, OrgID: c.OrgID, CourseID: c.CourseID, Name: c.Name,
		Description: c.Description, Status: c.Status, StartAt: tsPtr(c.StartAt), EndAt: tsPtr(c.EndAt), Capacity: c.Capacity,
		Timezone: c.Timezone, Location: c.Location, OnlineURL: c.OnlineURL, InviteOnly: c.InviteOnly,
		PrimaryModelID: c.PrimaryModelID, AllowedModelIDs: nonNilIDs(c.AllowedModelIDs),
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt), InviteCodes: []inviteCodeJSON{}}
	for _, ic := range c.InviteCodes {
		out.InviteCodes = append(out.InviteCodes, inviteCodeFromState(c, ic, now))
	}
	return out
}

func classFromRow(c queries.Class, now time.Time) classJSON {
	out := classJSON{ID: c.ID, PartnerID: c.PartnerID, OrgID: c.OrgID, CourseID: c.CourseID, Name: c.Name,
		Description: c.Description, Status: c.Status, StartAt: tsPtr(c.StartAt), EndAt: tsPtr(c.EndAt), Capacity: c.Capacity,
		Timezone: c.Timezone, Location: c.Location, OnlineURL: c.OnlineURL, InviteOnly: c.InviteOnly,
		PrimaryModelID: c.PrimaryModelID, AllowedModelIDs: nonNilIDs(c.AllowedModelIDs),
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt), InviteCodes: []inviteCodeJSON{}}
	for _, ic := range c.InviteCodes {
		code := aggregates.InviteCode{Status: ic.Status, ExpiresAt: ic.ExpiresAt}
		out.InviteCodes = append(out.InviteCodes, inviteCodeJSON{ID: ic.ID, PartnerID: ic.PartnerID, ClassID: ic.ClassID,
			Code: ic.Code, TargetRole: ic.TargetRole, UsedCount: ic.UsedCount, Status: code.StatusAt(now),
			CreatedAt: ts(ic.CreatedAt), ExpiresAt: ts(ic.ExpiresAt), MaxUses: ic.MaxUses, CreatedBy: ic.CreatedBy})
	}
	return out
}

func nonNilIDs(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

type enrollmentJSON struct {
	ID           int64   `json:"id"`
	ClassID      int64   `json:"class_id"`
	StudentID    int64   `json:"student_id"`
	InviteCodeID *int64  `json:"invite_code_id"`
	Status       string  `json:"status"`
	EnrolledAt   string  `json:"enrolled_at"`
	CompletedAt  *string `json:"completed_at"`
	CreatedAt    string  `json:"created_at"`
	UpdatedAt    string  `json:"updated_at"`
}

func enrollmentFromState(e aggregates.Enrollment) enrollmentJSON {
	return enrollmentJSON{ID: e.ID, ClassID: e.ClassID, StudentID: e.StudentID, InviteCodeID: e.InviteCodeID,
		Status: e.Status, EnrolledAt: ts(e.EnrolledAt), CompletedAt: tsPtr(e.CompletedAt),
		CreatedAt: ts(e.CreatedAt), UpdatedAt: ts(e.UpdatedAt)}
}

func enrollmentFromRow(e queries.Enrollment) enrollmentJSON {
	return enrollmentJSON{ID: e.ID, ClassID: e.ClassID, StudentID: e.StudentID, InviteCodeID: e.InviteCodeID,
		Status: e.Status, EnrolledAt: ts(e.EnrolledAt), CompletedAt: tsPtr(e.CompletedAt),
		CreatedAt: ts(e.CreatedAt), UpdatedAt: ts(e.UpdatedAt)}
}

// Request values.

// optionalDate reads a nullable date field as YYYY-MM-DD.
func optionalDate(v validation.Values, name string) *string {
	t, ok := v.Time(name)
	if !ok {
		return nil
	}
	s := t.Format(dateFormat)
	return &s
}

// optionalTime reads a nullable date-time field, in UTC.
func optionalTime(v validation.Values, name string) *time.Time {
	t, ok := v.Time(name)
	if !ok {
		return nil
	}
	t = t.UTC()
	return &t
}

// checkTimes refuses date-times that leave years 1 to 9999 once in UTC
// ("9999-12-31T23:00:00-05:00"): events and responses could not carry them.
func checkTimes(v validation.Values, names ...string) error {
	var errs []error
	for _, name := range names {
		if t, ok := v.Time(name); ok {
			if y := t.UTC().Year(); y < 1 || y > 9999 {
				raw, _ := v.Input(name)
				errs = append(errs, derrors.InvalidField(name, raw, "the date-time is out of range once in UTC"))
			}
		}
	}
	return errors.Join(errs...)
}

// checkTimezone refuses a class's timezone that is not a time zone name of
// the IANA database ("Europe/Paris", "UTC"; the database is built in, so
// every replica knows the same names): clients show the class's times in
// it.
func checkTimezone(v validation.Values) error {
	tz, ok := v.String("timezone")
	if !ok {
		return nil // absent, or null
	}
	if _, err := time.LoadLocation(tz); err != nil || tz == "" || tz == "Local" {
		return derrors.InvalidField("timezone", tz, "timezone must be a time zone name of the IANA database, such as Europe/Paris or UTC")
	}
	return nil
}

// asSent puts in err's field errors about the named body fields the input
// the request carried: a command sees those values normalised (in UTC, a
// date-time as a date), and an error item echoes its input as sent.
func asSent(err error, body validation.Values, names ...string) error {
	var visit func(error)
	visit = func(e error) {
		switch x := e.(type) { //nolint:errorlint // a walk of the whole tree, joined errors too
		case *derrors.FieldError:
			if slices.Contains(names, x.Field) {
				if raw, ok := body.Input(x.Field); ok {
					x.Input = raw
				}
			}
		case interface{ Unwrap() []error }:
			for _, inner := range x.Unwrap() {
				visit(inner)
			}
		case interface{ Unwrap() error }:
			visit(x.Unwrap())
		}
	}
	visit(err)
	return err
}

// optionalInt reads a nullable integer field.
func optionalInt(v validation.Values, name string) *int64 {
	if n, ok := v.Int(name); ok {
		return &n
	}
	return nil
}

// Courses.

func (s *Server) createCourse(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerFor(r.Context(), in)
	if err != nil {
		return err
	}
	c := aggregates.CreateCourse{OrgID: p.OrgID, PartnerID: p.ID, CallerID: in.user.UserID}
	c.Title, _ = in.body.String("title")
	c.CourseKey, _ = in.body.String("course_key")
	if v, ok := in.body.String("status"); ok {
		c.Status = &v
	}
	c.StartDate, c.EndDate = optionalDate(in.body, "start_date"), optionalDate(in.body, "end_date")
	c.Description = optionalString(in.body, "description")
	course, res, err := s.deps.Commands.Classroom.CreateCourse(r.Context(), c)
	if err != nil {
		return asSent(err, in.body, "start_date", "end_date")
	}
	s.settle(w, r, res, classroomReadModels...)
	writeJSON(w, http.StatusCreated, courseFromState(course))
	return nil
}

func (s *Server) updateCourse(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerFor(r.Context(), in)
	if err != nil {
		return err
	}
	c := aggregates.UpdateCourse{OrgID: p.OrgID, CallerID: in.user.UserID}
	c.CourseID, _ = in.path.Int("course_id")
	if v, ok := in.body.String("title"); ok {
		c.Title = aggregates.Set(v)
	}
	if v, ok := in.body.String("course_key"); ok {
		c.CourseKey = aggregates.Set(v)
	}
	if v, ok := in.body.String("status"); ok {
		c.Status = aggregates.Set(v)
	}
	if in.body.Has("start_date") {
		c.StartDate = aggregates.Set(optionalDate(in.body, "start_date"))
	}
	if in.body.Has("end_date") {
		c.EndDate = aggregates.Set(optionalDate(in.body, "end_date"))
	}
	if in.body.Has("description") {
		c.Description = aggregates.Set(optionalString(in.body, "description"))
	}
	course, res, err := s.deps.Commands.Classroom.UpdateCourse(r.Context(), c)
	if err != nil {
		return asSent(err, in.body, "start_date", "end_date")
	}
	s.settle(w, r, res, classroomReadModels...)
	writeJSON(w, http.StatusOK, courseFromState(course))
	return nil
}

func (s *Server) listCourses(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerRead(w, r, in)
	if err != nil {
		return err
	}
	list, err := s.deps.Queries.Courses(r.Context(), p.OrgID, pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, courseFromRow)
	return nil
}

func (s *Server) getCourse(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerRead(w, r, in)
	if err != nil {
		return err
	}
	id, _ := in.path.Int("course_id")
	c, err := s.deps.Queries.Course(r.Context(), p.OrgID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, courseFromRow(c))
	return nil
}

// Classes.

func (s *Server) createClass(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerFor(r.Context(), in)
	if err != nil {
		return err
	}
	if err := errors.Join(checkTimes(in.body, "start_at", "end_at"), checkTimezone(in.body)); err != nil {
		return err
	}
	c := aggregates.CreateClass{OrgID: p.OrgID, PartnerID: p.ID, CallerID: in.user.UserID}
	// The course comes from the query or the body; both must then agree.
	// Every other field of the command is the body's (sources).
	var sources validation.Sources
	queryCourse, inQuery := in.query.Int("course_id")
	bodyCourse, inBody := in.body.Int("course_id")
	switch {
	case inQuery && inBody && queryCourse != bodyCourse:
		return derrors.Invalid([]any{"query", "course_id"}, strconv.FormatInt(queryCourse, 10),
			"course_id in the query and course_id in the body differ")
	case inQuery:
		c.CourseID = &queryCourse
		sources = validation.Sources{"course_id": "query"}
	case inBody:
		c.CourseID = &bodyCourse
	}
	c.Name, _ = in.body.String("name")
	c.Description = optionalString(in.body, "description")
	if v, ok := in.body.String("status"); ok {
		c.Status = &v
	}
	c.StartAt, c.EndAt = optionalTime(in.body, "start_at"), optionalTime(in.body, "end_at")
	c.Capacity = optionalInt(in.body, "capacity")
	c.Timezone = optionalString(in.body, "timezone")
	c.Location = optionalString(in.body, "location")
	c.OnlineURL = optionalString(in.body, "online_url")
	if v, ok := in.body.Bool("invite_only"); ok {
		c.InviteOnly = &v
	}
	c.PrimaryModelID = optionalInt(in.body, "primary_model_id")
	c.AllowedModelIDs, _ = in.body.Ints("allowed_model_ids")
	class, res, err := s.deps.Commands.Classroom.CreateClass(r.Context(), c)
	if err != nil {
		return validation.WithSources(asSent(err, in.body, "start_at", "end_at"), sources)
	}
	s.settle(w, r, res, classroomReadModels...)
	writeJSON(w, http.StatusCreated, classFromState(class, s.deps.Commands.Classroom.Now()))
	return nil
}

func (s *Server) updateClass(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerFor(r.Context(), in)
	if err != nil {
		return err
	}
	if err := errors.Join(checkTimes(in.body, "start_at", "end_at"), checkTimezone(in.body)); err != nil {
		return err
	}
	c := aggregates.UpdateClass{OrgID: p.OrgID, CallerID: in.user.UserID}
	c.ClassID, _ = in.path.Int("class_id")
	b := in.body
	if v, ok := b.String("name"); ok {
		c.Name = aggregates.Set(v)
	}
	if v, ok := b.String("status"); ok {
		c.Status = aggregates.Set(v)
	}
	setIf := func(name string, set func()) {
		if b.Has(name) {
			set()
		}
	}
	setIf("course_id", func() { c.CourseID = aggregates.Set(optionalInt(b, "course_id")) })
	setIf("description", func() { c.Description = aggregates.Set(optionalString(b, "description")) })
	setIf("start_at", func() { c.StartAt = aggregates.Set(optionalTime(b, "start_at")) })
	setIf("end_at", func() { c.EndAt = aggregates.Set(optionalTime(b, "end_at")) })
	setIf("capacity", func() { c.Capacity = aggregates.Set(optionalInt(b, "capacity")) })
	setIf("timezone", func() { c.Timezone = aggregates.Set(optionalString(b, "timezone")) })
	setIf("location", func() { c.Location = aggregates.Set(optionalString(b, "location")) })
	setIf("online_url", func() { c.OnlineURL = aggregates.Set(optionalString(b, "online_url")) })
	setIf("primary_model_id", func() { c.PrimaryModelID = aggregates.Set(optionalInt(b, "primary_model_id")) })
	setIf("invite_only", func() {
		v, _ := b.Bool("invite_only") // null resets to false
		c.InviteOnly = aggregates.Set(v)
	})
	setIf("allowed_model_ids", func() {
		ids, _ := b.Ints("allowed_model_ids") // null resets to none
		c.AllowedModelIDs = aggregates.Set(ids)
	})
	class, res, err := s.deps.Commands.Classroom.UpdateClass(r.Context(), c)
	if err != nil {
		return asSent(err, in.body, "start_at", "end_at")
	}
	s.settle(w, r, res, classroomReadModels...)
	writeJSON(w, http.StatusOK, classFromState(class, s.deps.Commands.Classroom.Now()))
	return nil
}

func (s *Server) revokeInviteCode(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerFor(r.Context(), in)
	if err != nil {
		return err
	}
	c := aggregates.RevokeInviteCode{OrgID: p.OrgID, CallerID: in.user.UserID}
	c.ClassID, _ = in.path.Int("class_id")
	c.InviteCodeID, _ = in.path.Int("invite_code_id")
	class, res, err := s.deps.Commands.Classroom.RevokeInviteCode(r.Context(), c)
	if err != nil {
		return err
	}
	code, _ := class.CodeByID(c.InviteCodeID)
	s.settle(w, r, res, classroomReadModels...)
	writeJSON(w, http.StatusOK, inviteCodeFromState(class, code, s.deps.Commands.Classroom.Now()))
	return nil
}

func (s *Server) listClasses(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerRead(w, r, in)
	if err != nil {
		return err
	}
	list, err := s.deps.Queries.Classes(r.Context(), p.OrgID, pageOf(in.query))
	if err != nil {
		return err
	}
	now := s.deps.Commands.Classroom.Now()
	writeList(w, list, func(c queries.Class) classJSON { return classFromRow(c, now) })
	return nil
}

func (s *Server) getClass(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerRead(w, r, in)
	if err != nil {
		return err
	}
	id, _ := in.path.Int("class_id")
	c, err := s.deps.Queries.Class(r.Context(), p.OrgID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, classFromRow(c, s.deps.Commands.Classroom.Now()))
	return nil
}

// Enrollments.

func (s *Server) listClassEnrollments(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerRead(w, r, in)
	if err != nil {
		return err
	}
	classID, _ := in.path.Int("class_id")
	if _, err := s.deps.Queries.Class(r.Context(), p.OrgID, classID); err != nil {
		return err
	}
	list, err := s.deps.Queries.ClassEnrollments(r.Context(), classID, pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, enrollmentFromRow)
	return nil
}

func (s *Server) enrollStudent(w http.ResponseWriter, r *http.Request, in input) error {
	p, err := s.partnerFor(r.Context(), in)
	if err != nil {
		return err
	}
	pathStudent, _ := in.path.Int("student_id")
	bodyStudent, _ := in.body.Int("student_id")
	if pathStudent != bodyStudent {
		return derrors.Invalid([]any{"body", "student_id"}, bodyStudent, "student_id must equal the student_id in the path")
	}
	if err := checkTimes(in.body, "enrolled_at", "completed_at"); err != nil {
		return err
	}
	classID, _ := in.body.Int("class_id")
	c := aggregates.CreateEnrollment{StudentID: bodyStudent, Source: aggregates.SourcePartner, CallerID: in.user.UserID}
	c.InviteCodeID = optionalInt(in.body, "invite_code_id")
	if v, ok := in.body.String("status"); ok {
		c.Status = &v
	}
	c.EnrolledAt, c.CompletedAt = optionalTime(in.body, "enrolled_at"), optionalTime(in.body, "completed_at")
	en, res, err := s.deps.Commands.Classroom.Enroll(r.Context(), p.OrgID, classID, c)
	if err != nil {
		return asSent(err, in.body, "enrolled_at", "completed_at")
	}
	s.settle(w, r, res, classroomReadModels...)
	writeJSON(w, http.StatusCreated, enrollmentFromState(en))
	return nil
}

func (s *Server) listMyEnrollments(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, classroomReadModels...); err != nil {
		return err
	}
	list, err := s.deps.Queries.StudentEnrollments(r.Context(), in.user.UserID, pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, enrollmentFromRow)
	return nil
}

func (s *Server) dropEnrollment(w http.ResponseWriter, r *http.Request, in input) error {
	orgs, err := s.deps.Queries.ActivePartnerOrgs(r.Context(), in.user.UserID)
	if err != nil {
		return err
	}
	c := aggregates.DropEnrollment{CallerID: in.user.UserID, Admin: in.user.HasRole(aggregates.RoleAdmin), PartnerOrgIDs: orgs}
	c.EnrollmentID, _ = in.path.Int("enrollment_id")
	_, res, err := s.deps.Commands.Classroom.DropEnrollment(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, classroomReadModels...)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) joinClass(w http.ResponseWriter, r *http.Request, in input) error {
	code, _ := in.body.String("code")
	en, res, err := s.deps.Commands.Classroom.Join(r.Context(), code, in.user.UserID, s.clientAddr(r))
	if err != nil {
		return err
	}
	s.settle(w, r, res, classroomReadModels...)
	writeJSON(w, http.StatusCreated, enrollmentFromState(en))
	return nil
}
