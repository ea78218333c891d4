package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/eventstore"
)

// school is an organisation with one active partner, the setting of every
// classroom test.
type school struct {
	admin   user
	org     int64
	teacher user // the partner's account
	partner int64
}

// openSchool creates an organisation and its partner through the admin
// endpoints.
func openSchool(t testing.TB, e *env) school {
	t.Helper()
	admin := asAdmin(t, e)
	org := createOrg(t, e, admin)
	teacher := e.signUp(t)
	return school{admin: admin, org: org, teacher: teacher, partner: addPartner(t, e, admin, org, teacher, true)}
}

// addPartner makes u a partner of org.
func addPartner(t testing.TB, e *env, admin user, org int64, u user, active bool) int64 {
	t.Helper()
	res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", org), map[string]any{
		"org_id": org, "full_name": "Teacher " + u.Name, "email": u.Email, "user_id": u.ID, "is_active": active,
	}, admin.Access)
	wantStatus(t, res, http.StatusCreated)
	return num(t, res, "id")
}

// at is a path under the school's partner.
func (s school) at(format string, args ...any) string {
	return fmt.Sprintf("/partner/%d", s.partner) + fmt.Sprintf(format, args...)
}

func (e *env) createCourse(t testing.TB, s school, body any) response {
	t.Helper()
	res := e.do(t, "POST", s.at("/course"), body, s.teacher.Access)
	wantStatus(t, res, http.StatusCreated)
	return res
}

// streamEvents reads a stream from the event store.
func (e *env) streamEvents(t testing.TB, stream string) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := e.events(t).ReadStream(context.Background(), stream, eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func eventTypes(evs []eventstore.RecordedEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// payload decodes a stored event's data.
func payload(t testing.TB, ev eventstore.RecordedEvent) map[string]any {
	t.Helper()
	v, err := decodeJSON(ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func jsonNum(n int64) json.Number { return json.Number(fmt.Sprint(n)) }

// concurrently runs n requests at once and returns their responses.
func concurrently(n int, request func(i int) response) []response {
	results := make([]response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = request(i)
		})
	}
	close(start)
	wg.Wait()
	return results
}

func TestCreateCourse(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)

	res := e.do(t, "POST", s.at("/course"), map[string]any{
		"title": "Algebra I", "course_key": "ALG-1", "status": "active", "start_date": "2026-09-01",
		"end_date": "2027-01-31", "description": "Linear equations", "org_id": 999, "partner_id": 999,
	}, s.teacher.Access)
	wantStatus(t, res, http.StatusCreated)
	if res.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: no X-Event-Position header", res)
	}
	wantHeader(t, res, "X-Projection-Pending", "")
	id := num(t, res, "id")
	createdAt := timestamp(t, res, "created_at")
	want := fmt.Sprintf(`{"id":%d,"org_id":%d,"partner_id":%d,"title":"Algebra I","course_key":"ALG-1","status":"active",`+
		`"start_date":"2026-09-01","end_date":"2027-01-31","description":"Linear equations","created_at":%q,"updated_at":%q}`,
		id, s.org, s.partner, createdAt.Format(wireTime), createdAt.Format(wireTime))
	wantBody(t, res, http.StatusCreated, want)

	// Read-your-writes.
	wantBody(t, e.do(t, "GET", s.at("/course/%d", id), nil, s.teacher.Access), http.StatusOK, want)
	wantBody(t, e.do(t, "GET", s.at("/course"), nil, s.teacher.Access), http.StatusOK, `{"items":[`+want+`],"total":1,"page":1,"size":50}`)

	// The event is complete for downstream subscribers.
	evs := e.streamEvents(t, fmt.Sprintf("course-%d", id))
	if diff := cmp.Diff([]string{"course.created"}, eventTypes(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	wantPayload := map[string]any{"course_id": jsonNum(id), "org_id": jsonNum(s.org), "partner_id": jsonNum(s.partner),
		"title": "Algebra I", "course_key": "ALG-1", "status": "active", "start_date": "2026-09-01", "end_date": "2027-01-31",
		"description": "Linear equations", "created_by": jsonNum(s.teacher.ID)}
	if diff := cmp.Diff(wantPayload, payload(t, evs[0])); diff != "" {
		t.Errorf("course.created payload (-want +got):\n%s", diff)
	}
	if evs[0].SchemaVersion != 1 {
		t.Errorf("schema version %d, want 1", evs[0].SchemaVersion)
	}
}

func TestCreateCourseDefaults(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	res := e.createCourse(t, s, `{"title":"T","course_key":"K","description":null,"start_date":null}`)
	created := str(t, res, "created_at")
	wantBody(t, res, http.StatusCreated, fmt.Sprintf(`{"id":%d,"org_id":%d,"partner_id":%d,"title":"T","course_key":"K","status":"draft",`+
		`"start_date":null,"end_date":null,"description":null,"created_at":%q,"updated_at":%q}`,
		num(t, res, "id"), s.org, s.partner, created, created))
	// A date-time at midnight is a date, as pydantic takes it.
	res = e.createCourse(t, s, `{"title":"T","course_key":"K2","start_date":"2026-02-03T00:00:00"}`)
	if got := str(t, res, "start_date"); got != "2026-02-03" {
		t.Errorf("start_date %q, want 2026-02-03", got)
	}
}

func TestCreateCourseValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	long := strings.Repeat("x", 201)
	for _, tc := range []struct{ name, body, want string }{
		{"nothing", `{}`, `{"detail":[` +
			`{"type":"missing","loc":["body","title"],"msg":"Field required","input":{}},` +
			`{"type":"missing","loc":["body","course_key"],"msg":"Field required","input":{}}]}`},
		{"title too long", `{"title":"` + long + `","course_key":"K"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","title"],"msg":"String should have at most 200 characters","input":"` + long + `","ctx":{"max_length":200}}]}`},
		{"course_key too long", `{"title":"T","course_key":"` + long + `"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","course_key"],"msg":"String should have at most 200 characters","input":"` + long + `","ctx":{"max_length":200}}]}`},
		{"course_key a number", `{"title":"T","course_key":7}`,
			`{"detail":[{"type":"string_type","loc":["body","course_key"],"msg":"Input should be a valid string","input":7}]}`},
		{"unknown status", `{"title":"T","course_key":"K","status":"paused"}`,
			`{"detail":[{"type":"enum","loc":["body","status"],"msg":"Input should be 'draft', 'active' or 'archived'","input":"paused","ctx":{"expected":"'draft', 'active' or 'archived'"}}]}`},
		{"status null", `{"title":"T","course_key":"K","status":null}`,
			`{"detail":[{"type":"enum","loc":["body","status"],"msg":"Input should be 'draft', 'active' or 'archived'","input":null,"ctx":{"expected":"'draft', 'active' or 'archived'"}}]}`},
		{"not a date", `{"title":"T","course_key":"K","start_date":"soon"}`,
			`{"detail":[{"type":"date_from_datetime_parsing","loc":["body","start_date"],"msg":"Input should be a valid date or datetime, input is too short","input":"soon","ctx":{"error":"input is too short"}}]}`},
		{"year 0", `{"title":"T","course_key":"K","start_date":"0000-01-01"}`,
			`{"detail":[{"type":"date_parsing","loc":["body","start_date"],"msg":"Input should be a valid date in the format YYYY-MM-DD, year 0 is out of range","input":"0000-01-01","ctx":{"error":"year 0 is out of range"}}]}`},
		{"year 0 as a date-time", `{"title":"T","course_key":"K","end_date":"0000-12-31T00:00:00"}`,
			`{"detail":[{"type":"date_parsing","loc":["body","end_date"],"msg":"Input should be a valid date in the format YYYY-MM-DD, year 0 is out of range","input":"0000-12-31T00:00:00","ctx":{"error":"year 0 is out of range"}}]}`},
		{"a date-time that is not a date", `{"title":"T","course_key":"K","end_date":"2026-02-03T10:00:00"}`,
			`{"detail":[{"type":"date_from_datetime_inexact","loc":["body","end_date"],"msg":"Datetimes provided to dates should have zero time - e.g. be exact dates","input":"2026-02-03T10:00:00"}]}`},
		{"end_date before start_date", `{"title":"T","course_key":"K","start_date":"2026-02-03","end_date":"2026-02-02"}`,
			`{"detail":[{"type":"value_error","loc":["body","end_date"],"msg":"Value error, end_date must not be before start_date","input":"2026-02-02","ctx":{"error":"end_date must not be before start_date"}}]}`},
		{"blank title", `{"title":"  ","course_key":"K"}`,
			`{"detail":[{"type":"value_error","loc":["body","title"],"msg":"Value error, title must not be blank","input":"  ","ctx":{"error":"title must not be blank"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantBody(t, e.do(t, "POST", s.at("/course"), tc.body, s.teacher.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
	wantBody(t, e.do(t, "POST", "/partner/abc/course", `{"title":"T"}`, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"int_parsing","loc":["path","partner_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"},`+
			`{"type":"missing","loc":["body","course_key"],"msg":"Field required","input":{"title":"T"}}]}`)
	// Nothing was created.
	wantBody(t, e.do(t, "GET", s.at("/course"), nil, s.teacher.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

func TestCourseKeyIsUniquePerOrganisation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s, other := openSchool(t, e), openSchool(t, e)
	const dup = "A course with this course_key already exists in the organisation"

	first := e.createCourse(t, s, `{"title":"A","course_key":"CS-101"}`)
	wantDetail(t, e.do(t, "POST", s.at("/course"), `{"title":"B","course_key":"CS-101"}`, s.teacher.Access), http.StatusConflict, dup)
	// Keys are exact: another case is another key.
	e.createCourse(t, s, `{"title":"B","course_key":"cs-101"}`)
	// Another organisation has keys of its own.
	e.createCourse(t, other, `{"title":"A","course_key":"CS-101"}`)

	// Renaming a key frees the old one and takes the new one.
	path := s.at("/course/%d", num(t, first, "id"))
	res := e.do(t, "PATCH", path, `{"course_key":"CS-102"}`, s.teacher.Access)
	wantStatus(t, res, http.StatusOK)
	e.createCourse(t, s, `{"title":"C","course_key":"CS-101"}`)
	wantDetail(t, e.do(t, "POST", s.at("/course"), `{"title":"D","course_key":"CS-102"}`, s.teacher.Access), http.StatusConflict, dup)
	// A PATCH to a taken key is refused and changes nothing.
	wantDetail(t, e.do(t, "PATCH", path, `{"course_key":"cs-101","title":"Renamed"}`, s.teacher.Access), http.StatusConflict, dup)
	wantBody(t, e.do(t, "GET", path, nil, s.teacher.Access), http.StatusOK, string(res.Body))
	// Setting a course's own key again is no change.
	wantBody(t, e.do(t, "PATCH", path, `{"course_key":"CS-102"}`, s.teacher.Access), http.StatusOK, string(res.Body))

	list := e.do(t, "GET", s.at("/course"), nil, s.teacher.Access)
	if got := num(t, list, "total"); got != 3 {
		t.Errorf("%s: %d courses, want 3", list, got)
	}
}

func TestUpdateCourse(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	created := e.createCourse(t, s, `{"title":"A","course_key":"K","start_date":"2026-01-10","description":"d"}`)
	id := num(t, created, "id")
	path := s.at("/course/%d", id)
	createdAt := str(t, created, "created_at")
	course := func(title, key, status string, start, end, description any, updatedAt string) string {
		return fmt.Sprintf(`{"id":%d,"org_id":%d,"partner_id":%d,"title":%q,"course_key":%q,"status":%q,"start_date":%s,"end_date":%s,"description":%s,"created_at":%q,"updated_at":%q}`,
			id, s.org, s.partner, title, key, status, jsonOf(t, start), jsonOf(t, end), jsonOf(t, description), createdAt, updatedAt)
	}
	patch := func(body string) response {
		t.Helper()
		res := e.do(t, "PATCH", path, body, s.teacher.Access)
		wantStatus(t, res, http.StatusOK)
		wantBody(t, e.do(t, "GET", path, nil, s.teacher.Access), http.StatusOK, string(res.Body))
		return res
	}

	res := patch(`{"title":"B","end_date":"2026-02-01"}`)
	wantBody(t, res, http.StatusOK, course("B", "K", "draft", "2026-01-10", "2026-02-01", "d", str(t, res, "updated_at")))
	if !timestamp(t, res, "updated_at").After(timestamp(t, res, "created_at")) {
		t.Errorf("%s: updated_at is not after created_at", res)
	}
	res = patch(`{"description":null,"start_date":null}`)
	wantBody(t, res, http.StatusOK, course("B", "K", "draft", nil, "2026-02-01", nil, str(t, res, "updated_at")))

	// Status moves forward, one step or more.
	res = patch(`{"status":"active"}`)
	wantBody(t, res, http.StatusOK, course("B", "K", "active", nil, "2026-02-01", nil, str(t, res, "updated_at")))
	wantDetail(t, e.do(t, "PATCH", path, `{"status":"draft","title":"C"}`, s.teacher.Access), http.StatusConflict,
		"Course status cannot move from active to draft; it only moves forward: draft → active → archived")
	last := patch(`{"status":"archived","title":"Final"}`)
	wantBody(t, last, http.StatusOK, course("Final", "K", "archived", nil, "2026-02-01", nil, str(t, last, "updated_at")))
	wantDetail(t, e.do(t, "PATCH", path, `{"status":"active"}`, s.teacher.Access), http.StatusConflict,
		"Course status cannot move from archived to active; it only moves forward: draft → active → archived")

	// A PATCH that changes nothing records nothing.
	wantBody(t, patch(`{}`), http.StatusOK, string(last.Body))
	wantBody(t, patch(`{"status":"archived","title":"Final","course_key":"K"}`), http.StatusOK, string(last.Body))
	if diff := cmp.Diff([]string{"course.created", "course.updated", "course.updated", "course.status_changed",
		"course.updated", "course.status_changed"}, eventTypes(e.streamEvents(t, fmt.Sprintf("course-%d", id)))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ body, want string }{
		// Only the start was sent: it is the field at fault.
		{`{"start_date":"2026-03-01"}`, `{"detail":[{"type":"value_error","loc":["body","start_date"],"msg":"Value error, start_date must not be after end_date","input":"2026-03-01","ctx":{"error":"start_date must not be after end_date"}}]}`},
		{`{"end_date":"0000-12-31"}`, `{"detail":[{"type":"date_parsing","loc":["body","end_date"],"msg":"Input should be a valid date in the format YYYY-MM-DD, year 0 is out of range","input":"0000-12-31","ctx":{"error":"year 0 is out of range"}}]}`},
		{`{"title":null}`, `{"detail":[{"type":"string_type","loc":["body","title"],"msg":"Input should be a valid string","input":null}]}`},
		{`{"course_key":""}`, `{"detail":[{"type":"string_too_short","loc":["body","course_key"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}]}`},
		{`{"status":"closed"}`, `{"detail":[{"type":"enum","loc":["body","status"],"msg":"Input should be 'draft', 'active' or 'archived'","input":"closed","ctx":{"expected":"'draft', 'active' or 'archived'"}}]}`},
		{``, `{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`},
	} {
		wantBody(t, e.do(t, "PATCH", path, tc.body, s.teacher.Access), http.StatusUnprocessableEntity, tc.want)
	}
	wantBody(t, e.do(t, "GET", path, nil, s.teacher.Access), http.StatusOK, string(last.Body))
}

// Who may reach /partner/{partner_id}/course: the partner's own user and
// admins; a course of another organisation does not exist for the caller.
func TestCourseAccess(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s, other := openSchool(t, e), openSchool(t, e)
	plain := e.signUp(t)
	course := e.createCourse(t, s, `{"title":"A","course_key":"K"}`)
	id := num(t, course, "id")

	// A user who is not this partner: 403, whoever they are.
	for _, caller := range []user{plain, other.teacher} {
		wantDetail(t, e.do(t, "POST", s.at("/course"), `{"title":"B","course_key":"K2"}`, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "GET", s.at("/course"), nil, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "GET", s.at("/course/%d", id), nil, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "PATCH", s.at("/course/%d", id), `{"title":"x"}`, caller.Access), http.StatusForbidden, "Not enough permissions")
	}
	wantDetail(t, e.do(t, "GET", "/partner/999999999/course", nil, plain.Access), http.StatusForbidden, "Not enough permissions")

	// Through their own partner, another organisation's course is not found,
	// exactly as a course that does not exist.
	for _, cid := range []int64{id, 999999999} {
		wantDetail(t, e.do(t, "GET", other.at("/course/%d", cid), nil, other.teacher.Access), http.StatusNotFound, "Course not found")
		wantDetail(t, e.do(t, "PATCH", other.at("/course/%d", cid), `{"title":"x"}`, other.teacher.Access), http.StatusNotFound, "Course not found")
	}
	wantBody(t, e.do(t, "GET", other.at("/course"), nil, other.teacher.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)

	// Another partner of the same organisation works on the same courses.
	colleague := e.signUp(t)
	colleaguePartner := addPartner(t, e, s.admin, s.org, colleague, true)
	res := e.do(t, "PATCH", fmt.Sprintf("/partner/%d/course/%d", colleaguePartner, id), `{"title":"Shared"}`, colleague.Access)
	wantStatus(t, res, http.StatusOK)
	if num(t, res, "partner_id") != s.partner {
		t.Errorf("%s: partner_id changed; it is the creating partner", res)
	}

	// An admin may act for any partner; a missing partner is then 404.
	wantStatus(t, e.do(t, "GET", s.at("/course/%d", id), nil, other.admin.Access), http.StatusOK)
	wantDetail(t, e.do(t, "GET", "/partner/999999999/course", nil, other.admin.Access), http.StatusNotFound, "Partner not found")

	// An inactive partner may not.
	idle := openSchool(t, e)
	sleeper := e.signUp(t)
	inactive := addPartner(t, e, idle.admin, idle.org, sleeper, false)
	wantDetail(t, e.do(t, "GET", fmt.Sprintf("/partner/%d/course", inactive), nil, sleeper.Access), http.StatusForbidden, "Not enough permissions")

	// The course is untouched by the refused requests.
	if n := len(e.streamEvents(t, fmt.Sprintf("course-%d", id))); n != 2 {
		t.Errorf("the course's stream has %d events, want 2 (created, the colleague's update)", n)
	}
}

func TestCourseListPages(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	var courses []string
	for i := range 3 {
		courses = append(courses, string(e.createCourse(t, s, map[string]any{"title": "T", "course_key": fmt.Sprint("K", i)}).Body))
	}
	for _, tc := range []struct {
		query string
		items []string
		page  int
		size  int
	}{
		{"?page=1&size=2", courses[:2], 1, 2},
		{"?page=2&size=2", courses[2:], 2, 2},
		{"?page=3&size=2", nil, 3, 2},
	} {
		want := fmt.Sprintf(`{"items":[%s],"total":3,"page":%d,"size":%d}`, strings.Join(tc.items, ","), tc.page, tc.size)
		wantBody(t, e.do(t, "GET", s.at("/course%s", tc.query), nil, s.teacher.Access), http.StatusOK, want)
	}
	wantBody(t, e.do(t, "GET", s.at("/course?size=0"), nil, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"greater_than_equal","loc":["query","size"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`)
}

// A retried create with the same Idempotency-Key creates one course.
func TestCreateCourseIdempotent(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	key := uuid.NewString()
	first := e.do(t, "POST", s.at("/course"), `{"title":"A","course_key":"K"}`, s.teacher.Access, "Idempotency-Key", key)
	wantStatus(t, first, http.StatusCreated)
	again := e.do(t, "POST", s.at("/course"), `{"title":"A","course_key":"K"}`, s.teacher.Access, "Idempotency-Key", key)
	wantBody(t, again, http.StatusCreated, string(first.Body))
	wantHeader(t, again, "Idempotent-Replayed", "true")
	// X-Min-Position makes a read wait for the write.
	res := e.do(t, "GET", s.at("/course"), nil, s.teacher.Access, "X-Min-Position", first.Header.Get("X-Event-Position"))
	wantBody(t, res, http.StatusOK, `{"items":[`+string(first.Body)+`],"total":1,"page":1,"size":50}`)
}

// Every classroom operation needs a token.
func TestClassroomNeedsAToken(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/partner/1/course", `{"title":"T","course_key":"K"}`},
		{"GET", "/partner/1/course", nil},
		{"GET", "/partner/1/course/1", nil},
		{"PATCH", "/partner/1/course/1", `{}`},
		{"POST", "/partner/1/classes", `{"name":"n"}`},
		{"GET", "/partner/1/classes", nil},
		{"GET", "/partner/1/classes/1", nil},
		{"PATCH", "/partner/1/classes/1", `{}`},
		{"POST", "/partner/1/classes/1/invite-codes/1/revoke", nil},
		{"GET", "/partner/1/classes/1/enrollments", nil},
		{"POST", "/partner/1/student/1/enrollments", `{"class_id":1,"student_id":1}`},
		{"GET", "/user/class/enrollments", nil},
		{"DELETE", "/user/class/enrollments/1", nil},
		{"POST", "/user/class/join", `{"code":"ABCDEFGH"}`},
		// Authentication comes before validation.
		{"DELETE", "/user/class/enrollments/abc", nil},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res := e.do(t, tc.method, tc.path, tc.body, "")
			wantDetail(t, res, http.StatusUnauthorized, "Not authenticated")
			wantHeader(t, res, "WWW-Authenticate", "Bearer")
			wantDetail(t, e.do(t, tc.method, tc.path, tc.body, "not-a-token"), http.StatusUnauthorized, "Could not validate credentials")
		})
	}
}
