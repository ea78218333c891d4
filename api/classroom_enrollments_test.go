package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// enrollPath is where the school's partner enrolls a student.
func (s school) enrollPath(student int64) string { return s.at("/student/%d/enrollments", student) }

func (e *env) enroll(t testing.TB, s school, class, student int64) response {
	t.Helper()
	return e.do(t, "POST", s.enrollPath(student), map[string]any{"class_id": class, "student_id": student}, s.teacher.Access)
}

func (e *env) join(t testing.TB, u user, code any) response {
	t.Helper()
	return e.do(t, "POST", "/user/class/join", map[string]any{"code": code}, u.Access)
}

func enrollmentPath(t testing.TB, res response) string {
	t.Helper()
	return fmt.Sprintf("/user/class/enrollments/%d", num(t, res, "id"))
}

const (
	alreadyEnrolled = "The student already has an active enrollment in this class"
	classFull       = "The class is full"
	codeUsedUp      = "The invite code has reached its maximum number of uses"
)

func TestEnrollStudent(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	student := e.signUp(t)
	class := num(t, e.createClass(t, s, `{"name":"P"}`), "id")

	res := e.enroll(t, s, class, student.ID)
	wantStatus(t, res, http.StatusCreated)
	wantHeader(t, res, "X-Projection-Pending", "")
	id := num(t, res, "id")
	createdAt := timestamp(t, res, "created_at")
	enrolledAt := timestamp(t, res, "enrolled_at")
	if enrolledAt.After(createdAt) || createdAt.Sub(enrolledAt) > time.Minute {
		t.Errorf("enrolled_at %s, want now (created_at %s)", enrolledAt, createdAt)
	}
	want := fmt.Sprintf(`{"id":%d,"class_id":%d,"student_id":%d,"invite_code_id":null,"status":"active","enrolled_at":%q,`+
		`"completed_at":null,"created_at":%q,"updated_at":%q}`, id, class, student.ID, enrolledAt.Format(wireTime),
		createdAt.Format(wireTime), createdAt.Format(wireTime))
	wantBody(t, res, http.StatusCreated, want)

	// The partner's and the student's lists show it at once.
	wantBody(t, e.do(t, "GET", s.at("/classes/%d/enrollments", class), nil, s.teacher.Access), http.StatusOK,
		`{"items":[`+want+`],"total":1,"page":1,"size":50}`)
	wantBody(t, e.do(t, "GET", "/user/class/enrollments", nil, student.Access), http.StatusOK,
		`{"items":[`+want+`],"total":1,"page":1,"size":50}`)

	evs := e.streamEvents(t, fmt.Sprintf("enrollment-%d", id))
	if diff := cmp.Diff([]string{"enrollment.created"}, eventTypes(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	wantPayload := map[string]any{"enrollment_id": jsonNum(id), "class_id": jsonNum(class), "org_id": jsonNum(s.org),
		"partner_id": jsonNum(s.partner), "course_id": nil, "student_id": jsonNum(student.ID), "invite_code_id": nil,
		"status": "active", "enrolled_at": enrolledAt.Format(time.RFC3339Nano), "completed_at": nil,
		"source": "partner", "enrolled_by": jsonNum(s.teacher.ID)}
	if diff := cmp.Diff(wantPayload, payload(t, evs[0])); diff != "" {
		t.Errorf("enrollment.created payload (-want +got):\n%s", diff)
	}

	// One active enrollment per student and class.
	wantDetail(t, e.enroll(t, s, class, student.ID), http.StatusConflict, alreadyEnrolled)
	// Enrollments that are not active do not count.
	res = e.do(t, "POST", s.enrollPath(student.ID), map[string]any{"class_id": class, "student_id": student.ID, "status": "inactive"}, s.teacher.Access)
	wantStatus(t, res, http.StatusCreated)
	if got := str(t, res, "status"); got != "inactive" {
		t.Errorf("status %q, want inactive", got)
	}
}

func TestEnrollStudentFields(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	student := e.signUp(t)
	created := e.createClass(t, s, `{"name":"P"}`)
	class := num(t, created, "id")
	code := codeID(t, inviteCodes(t, created)["student"])

	res := e.do(t, "POST", s.enrollPath(student.ID), map[string]any{
		"class_id": class, "student_id": student.ID, "invite_code_id": code, "status": "completed",
		"enrolled_at": "2026-01-05T09:00:00+01:00", "completed_at": "2026-03-01T00:00:00Z",
	}, s.teacher.Access)
	wantStatus(t, res, http.StatusCreated)
	createdAt := str(t, res, "created_at")
	wantBody(t, res, http.StatusCreated, fmt.Sprintf(`{"id":%d,"class_id":%d,"student_id":%d,"invite_code_id":%d,"status":"completed",`+
		`"enrolled_at":"2026-01-05T08:00:00.000000Z","completed_at":"2026-03-01T00:00:00.000000Z","created_at":%q,"updated_at":%q}`,
		num(t, res, "id"), class, student.ID, code, createdAt, createdAt))

	other := e.createClass(t, s, `{"name":"Q"}`)
	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"path and body students differ", map[string]any{"class_id": class, "student_id": student.ID + 1},
			fmt.Sprintf(`{"detail":[{"type":"value_error","loc":["body","student_id"],"msg":"Value error, student_id must equal the student_id in the path","input":%d,"ctx":{"error":"student_id must equal the student_id in the path"}}]}`, student.ID+1)},
		{"completed before enrolled", map[string]any{"class_id": class, "student_id": student.ID, "enrolled_at": "2026-02-01T00:00:00Z", "completed_at": "2026-01-01T00:00:00Z", "status": "completed"},
			`{"detail":[{"type":"value_error","loc":["body","completed_at"],"msg":"Value error, completed_at must not be before enrolled_at","input":"2026-01-01T00:00:00Z","ctx":{"error":"completed_at must not be before enrolled_at"}}]}`},
		{"active, yet completed", map[string]any{"class_id": class, "student_id": student.ID, "status": "active", "completed_at": "2026-12-01T00:00:00Z"},
			`{"detail":[{"type":"value_error","loc":["body","completed_at"],"msg":"Value error, completed_at is for a completed enrollment (status completed)","input":"2026-12-01T00:00:00Z","ctx":{"error":"completed_at is for a completed enrollment (status completed)"}}]}`},
		{"another class's invite code", map[string]any{"class_id": num(t, other, "id"), "student_id": student.ID, "invite_code_id": code},
			fmt.Sprintf(`{"detail":[{"type":"value_error","loc":["body","invite_code_id"],"msg":"Value error, invite_code_id is not an invite code of this class","input":%d,"ctx":{"error":"invite_code_id is not an invite code of this class"}}]}`, code)},
		{"a date-time before year 1 in UTC", map[string]any{"class_id": class, "student_id": student.ID, "enrolled_at": "0001-01-01T00:00:00+01:00"},
			`{"detail":[{"type":"value_error","loc":["body","enrolled_at"],"msg":"Value error, the date-time is out of range once in UTC","input":"0001-01-01T00:00:00+01:00","ctx":{"error":"the date-time is out of range once in UTC"}}]}`},
		{"unknown status", map[string]any{"class_id": class, "student_id": student.ID, "status": "paused"},
			`{"detail":[{"type":"enum","loc":["body","status"],"msg":"Input should be 'active', 'inactive', 'completed' or 'dropped'","input":"paused","ctx":{"expected":"'active', 'inactive', 'completed' or 'dropped'"}}]}`},
		{"class missing", map[string]any{"student_id": student.ID},
			fmt.Sprintf(`{"detail":[{"type":"missing","loc":["body","class_id"],"msg":"Field required","input":{"student_id":%d}}]}`, student.ID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantBody(t, e.do(t, "POST", s.enrollPath(student.ID), tc.body, s.teacher.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
	wantBody(t, e.do(t, "POST", s.at("/student/abc/enrollments"), map[string]any{"class_id": class, "student_id": student.ID}, s.teacher.Access),
		http.StatusUnprocessableEntity, `{"detail":[{"type":"int_parsing","loc":["path","student_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}]}`)

	// Nothing else was enrolled.
	list := e.do(t, "GET", "/user/class/enrollments", nil, student.Access)
	if got := num(t, list, "total"); got != 1 {
		t.Errorf("%s: %d enrollments, want 1", list, got)
	}
}

func TestEnrollStudentAccess(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s, other := openSchool(t, e), openSchool(t, e)
	student, plain := e.signUp(t), e.signUp(t)
	class := num(t, e.createClass(t, s, `{"name":"P"}`), "id")
	body := map[string]any{"class_id": class, "student_id": student.ID}

	for _, caller := range []user{plain, other.teacher, student} {
		wantDetail(t, e.do(t, "POST", s.enrollPath(student.ID), body, caller.Access), http.StatusForbidden, "Not enough permissions")
	}
	// Another organisation's class, or none, is not found.
	for _, c := range []int64{class, 999999999} {
		wantDetail(t, e.do(t, "POST", other.enrollPath(student.ID), map[string]any{"class_id": c, "student_id": student.ID}, other.teacher.Access),
			http.StatusNotFound, "Class not found")
	}
	// The student must have an account.
	wantDetail(t, e.do(t, "POST", s.enrollPath(999999999), map[string]any{"class_id": class, "student_id": 999999999}, s.teacher.Access),
		http.StatusNotFound, "Student not found")
	// An erased user is gone.
	erased := e.signUp(t)
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": erased.Password}, erased.Access), http.StatusNoContent)
	wantDetail(t, e.do(t, "POST", s.enrollPath(erased.ID), map[string]any{"class_id": class, "student_id": erased.ID}, s.teacher.Access),
		http.StatusNotFound, "Student not found")
	// An admin may enroll for the partner.
	wantStatus(t, e.do(t, "POST", s.enrollPath(student.ID), body, other.admin.Access), http.StatusCreated)
	wantBody(t, e.do(t, "GET", "/user/class/enrollments", nil, plain.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

// A class with a capacity takes that many active enrollments; a dropped one
// frees its seat.
func TestClassCapacity(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	class := num(t, e.createClass(t, s, `{"name":"Small","capacity":2}`), "id")
	a, b, c := e.signUp(t), e.signUp(t), e.signUp(t)

	first := e.enroll(t, s, class, a.ID)
	wantStatus(t, first, http.StatusCreated)
	wantStatus(t, e.enroll(t, s, class, b.ID), http.StatusCreated)
	wantDetail(t, e.enroll(t, s, class, c.ID), http.StatusConflict, classFull)
	// A student already in the class hears that, not that it is full.
	wantDetail(t, e.enroll(t, s, class, a.ID), http.StatusConflict, alreadyEnrolled)
	// Inactive enrollments take no seat.
	res := e.do(t, "POST", s.enrollPath(c.ID), map[string]any{"class_id": class, "student_id": c.ID, "status": "inactive"}, s.teacher.Access)
	wantStatus(t, res, http.StatusCreated)

	wantStatus(t, e.do(t, "DELETE", enrollmentPath(t, first), nil, a.Access), http.StatusNoContent)
	wantStatus(t, e.enroll(t, s, class, c.ID), http.StatusCreated)
	wantDetail(t, e.enroll(t, s, class, a.ID), http.StatusConflict, classFull)

	// Raising the capacity makes room.
	wantStatus(t, e.do(t, "PATCH", s.at("/classes/%d", class), `{"capacity":3}`, s.teacher.Access), http.StatusOK)
	wantStatus(t, e.enroll(t, s, class, a.ID), http.StatusCreated)
}

func TestJoinClass(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	created := e.createClass(t, s, `{"name":"P","capacity":5}`)
	class := num(t, created, "id")
	codes := inviteCodes(t, created)
	student := codes["student"]
	joiner := e.signUp(t)

	// Codes are matched whatever their case and surrounding spaces.
	res := e.join(t, joiner, "  "+strings.ToLower(student["code"].(string))+" ")
	wantStatus(t, res, http.StatusCreated)
	wantHeader(t, res, "X-Projection-Pending", "")
	id := num(t, res, "id")
	createdAt := str(t, res, "created_at")
	want := fmt.Sprintf(`{"id":%d,"class_id":%d,"student_id":%d,"invite_code_id":%d,"status":"active","enrolled_at":%q,`+
		`"completed_at":null,"created_at":%q,"updated_at":%q}`, id, class, joiner.ID, codeID(t, student), str(t, res, "enrolled_at"), createdAt, createdAt)
	wantBody(t, res, http.StatusCreated, want)
	wantBody(t, e.do(t, "GET", "/user/class/enrollments", nil, joiner.Access), http.StatusOK, `{"items":[`+want+`],"total":1,"page":1,"size":50}`)
	wantBody(t, e.do(t, "GET", s.at("/classes/%d/enrollments", class), nil, s.teacher.Access), http.StatusOK, `{"items":[`+want+`],"total":1,"page":1,"size":50}`)

	// The use is counted on the class, at once.
	got := e.do(t, "GET", s.at("/classes/%d", class), nil, s.teacher.Access)
	wantStatus(t, got, http.StatusOK)
	if n := inviteCodes(t, got)["student"]["used_count"]; n != jsonNum(1) {
		t.Errorf("used_count %v, want 1", n)
	}
	if !timestamp(t, got, "updated_at").After(timestamp(t, got, "created_at")) {
		t.Errorf("%s: the class's updated_at did not follow the use", got)
	}
	evs := e.streamEvents(t, fmt.Sprintf("class-%d", class))
	used := payload(t, evs[len(evs)-1])
	wantUsed := map[string]any{"class_id": jsonNum(class), "org_id": jsonNum(s.org), "invite_code_id": jsonNum(codeID(t, student)),
		"code": student["code"], "target_role": "student", "user_id": jsonNum(joiner.ID), "enrollment_id": jsonNum(id),
		"used_count": jsonNum(1), "max_uses": jsonNum(5), "status": "active"}
	if diff := cmp.Diff(wantUsed, used); diff != "" || evs[len(evs)-1].Type != "class.invite_code_used" {
		t.Errorf("%s payload (-want +got):\n%s", evs[len(evs)-1].Type, diff)
	}
	enrolled := payload(t, e.streamEvents(t, fmt.Sprintf("enrollment-%d", id))[0])
	if enrolled["source"] != "invite_code" || enrolled["enrolled_by"] != jsonNum(joiner.ID) {
		t.Errorf("enrollment.created: %v", enrolled)
	}

	// Joining twice: one active enrollment, and the use is not counted.
	wantDetail(t, e.join(t, joiner, student["code"]), http.StatusConflict, alreadyEnrolled)
	// An assistant code does not enroll a student.
	wantDetail(t, e.join(t, e.signUp(t), codes["assistant"]["code"]), http.StatusConflict,
		"This is an assistant invite code; it cannot be used to join a class as a student")
	wantDetail(t, e.join(t, joiner, "ZZZZZZZZ"), http.StatusNotFound, "Invite code not found")
	got = e.do(t, "GET", s.at("/classes/%d", class), nil, s.teacher.Access)
	for role, n := range map[string]int64{"student": 1, "assistant": 0} {
		if used := inviteCodes(t, got)[role]["used_count"]; used != jsonNum(n) {
			t.Errorf("%s code used_count %v, want %d", role, used, n)
		}
	}

	for _, tc := range []struct{ body, want string }{
		{`{"code":""}`, `{"detail":[{"type":"string_too_short","loc":["body","code"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}]}`},
		{`{"code":12345678}`, `{"detail":[{"type":"string_type","loc":["body","code"],"msg":"Input should be a valid string","input":12345678}]}`},
		{`{}`, `{"detail":[{"type":"missing","loc":["body","code"],"msg":"Field required","input":{}}]}`},
	} {
		wantBody(t, e.do(t, "POST", "/user/class/join", tc.body, joiner.Access), http.StatusUnprocessableEntity, tc.want)
	}
}

func TestJoinRefusedCodes(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)

	t.Run("expired", func(t *testing.T) {
		// A class whose end is past: its codes expired with it.
		past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		created := e.createClass(t, s, map[string]any{"name": "Over", "start_at": "2020-01-01T00:00:00Z", "end_at": past})
		code := inviteCodes(t, created)["student"]
		if code["status"] != "expired" {
			t.Errorf("the code reads as %v, want expired", code["status"])
		}
		wantDetail(t, e.join(t, e.signUp(t), code["code"]), http.StatusConflict, "The invite code has expired")
	})
	t.Run("exhausted", func(t *testing.T) {
		created := e.createClass(t, s, `{"name":"One seat","capacity":1}`)
		code := inviteCodes(t, created)["student"]["code"]
		wantStatus(t, e.join(t, e.signUp(t), code), http.StatusCreated)
		got := e.do(t, "GET", s.at("/classes/%d", num(t, created, "id")), nil, s.teacher.Access)
		if c := inviteCodes(t, got)["student"]; c["status"] != "exhausted" || c["used_count"] != jsonNum(1) {
			t.Errorf("the code after its last use: %v", c)
		}
		wantDetail(t, e.join(t, e.signUp(t), code), http.StatusConflict, codeUsedUp)
	})
	t.Run("ended class", func(t *testing.T) {
		created := e.createClass(t, s, `{"name":"Done"}`)
		wantStatus(t, e.do(t, "PATCH", s.at("/classes/%d", num(t, created, "id")), `{"status":"ended"}`, s.teacher.Access), http.StatusOK)
		wantDetail(t, e.join(t, e.signUp(t), inviteCodes(t, created)["student"]["code"]), http.StatusConflict, "The class has ended")
	})
	t.Run("full class", func(t *testing.T) {
		created := e.createClass(t, s, `{"name":"Two seats","capacity":2}`)
		class := num(t, created, "id")
		wantStatus(t, e.enroll(t, s, class, e.signUp(t).ID), http.StatusCreated)
		wantStatus(t, e.enroll(t, s, class, e.signUp(t).ID), http.StatusCreated)
		wantDetail(t, e.join(t, e.signUp(t), inviteCodes(t, created)["student"]["code"]), http.StatusConflict, classFull)
		// The refused join used nothing.
		got := e.do(t, "GET", s.at("/classes/%d", class), nil, s.teacher.Access)
		if n := inviteCodes(t, got)["student"]["used_count"]; n != jsonNum(0) {
			t.Errorf("used_count %v, want 0", n)
		}
	})
}

// An invite code expires by the service's clock.
func TestJoinAfterExpiry(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now})
	s := openSchool(t, e)
	end := clk.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339Nano)
	created := e.createClass(t, s, map[string]any{"name": "Short", "end_at": end})
	code := inviteCodes(t, created)["student"]
	if code["status"] != "active" {
		t.Fatalf("a fresh code is %v", code["status"])
	}
	clk.Advance(10 * time.Minute)
	got := e.do(t, "GET", s.at("/classes/%d", num(t, created, "id")), nil, s.teacher.Access)
	if status := inviteCodes(t, got)["student"]["status"]; status != "expired" {
		t.Errorf("the code at its expiry reads as %v, want expired", status)
	}
	wantDetail(t, e.join(t, e.signUp(t), code["code"]), http.StatusConflict, "The invite code has expired")
}

func TestDropEnrollment(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s, other := openSchool(t, e), openSchool(t, e)
	student, stranger := e.signUp(t), e.signUp(t)
	class := num(t, e.createClass(t, s, `{"name":"P"}`), "id")

	res := e.enroll(t, s, class, student.ID)
	wantStatus(t, res, http.StatusCreated)
	path := enrollmentPath(t, res)
	id := num(t, res, "id")

	// Nobody else can see it: another student, another organisation's partner.
	for _, caller := range []user{stranger, other.teacher} {
		wantDetail(t, e.do(t, "DELETE", path, nil, caller.Access), http.StatusNotFound, "Enrollment not found")
	}
	wantDetail(t, e.do(t, "DELETE", "/user/class/enrollments/999999999", nil, student.Access), http.StatusNotFound, "Enrollment not found")

	dropped := e.do(t, "DELETE", path, nil, student.Access)
	wantStatus(t, dropped, http.StatusNoContent)
	if dropped.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: no X-Event-Position", dropped)
	}
	list := e.do(t, "GET", "/user/class/enrollments", nil, student.Access)
	wantStatus(t, list, http.StatusOK)
	item := field(t, list, "items").([]any)[0].(map[string]any)
	if item["status"] != "dropped" || item["updated_at"] == item["created_at"] {
		t.Errorf("after the drop: %v", item)
	}
	wantDetail(t, e.do(t, "DELETE", path, nil, student.Access), http.StatusConflict, "The enrollment is already dropped")

	evs := e.streamEvents(t, fmt.Sprintf("enrollment-%d", id))
	if diff := cmp.Diff([]string{"enrollment.created", "enrollment.dropped"}, eventTypes(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	wantPayload := map[string]any{"enrollment_id": jsonNum(id), "class_id": jsonNum(class), "org_id": jsonNum(s.org),
		"student_id": jsonNum(student.ID), "previous_status": "active", "dropped_by": jsonNum(student.ID)}
	if diff := cmp.Diff(wantPayload, payload(t, evs[1])); diff != "" {
		t.Errorf("enrollment.dropped payload (-want +got):\n%s", diff)
	}

	// The student may be enrolled again.
	again := e.enroll(t, s, class, student.ID)
	wantStatus(t, again, http.StatusCreated)
	// A partner of the class's organisation may drop, and so may an admin.
	wantStatus(t, e.do(t, "DELETE", enrollmentPath(t, again), nil, s.teacher.Access), http.StatusNoContent)
	third := e.enroll(t, s, class, student.ID)
	wantStatus(t, third, http.StatusCreated)
	wantStatus(t, e.do(t, "DELETE", enrollmentPath(t, third), nil, other.admin.Access), http.StatusNoContent)

	wantBody(t, e.do(t, "DELETE", "/user/class/enrollments/abc", nil, student.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"int_parsing","loc":["path","enrollment_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}]}`)
	wantBody(t, e.do(t, "DELETE", "/user/class/enrollments/0", nil, student.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"greater_than_equal","loc":["path","enrollment_id"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`)
}

func TestListEnrollments(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	student := e.signUp(t)
	var mine []string
	for i := range 3 {
		class := num(t, e.createClass(t, s, map[string]any{"name": fmt.Sprint("P", i)}), "id")
		res := e.enroll(t, s, class, student.ID)
		wantStatus(t, res, http.StatusCreated)
		mine = append(mine, string(res.Body))
		// Someone else in the same class is not in the student's list.
		wantStatus(t, e.enroll(t, s, class, e.signUp(t).ID), http.StatusCreated)
	}
	for _, tc := range []struct {
		query string
		items []string
		page  int
		size  int
	}{
		{"", mine, 1, 50},
		{"?size=2", mine[:2], 1, 2},
		{"?size=2&page=2", mine[2:], 2, 2},
	} {
		want := fmt.Sprintf(`{"items":[%s],"total":3,"page":%d,"size":%d}`, strings.Join(tc.items, ","), tc.page, tc.size)
		wantBody(t, e.do(t, "GET", "/user/class/enrollments"+tc.query, nil, student.Access), http.StatusOK, want)
	}
	wantBody(t, e.do(t, "GET", "/user/class/enrollments?page=0", nil, student.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"greater_than_equal","loc":["query","page"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`)
}

// A partner cannot enroll a student, as active, into an ended class, as
// a join by its invite code cannot; a completed enrollment may still be
// recorded there.
func TestNoActiveEnrollmentInAnEndedClass(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	created := e.createClass(t, s, `{"name":"Ended"}`)
	class := num(t, created, "id")
	wantStatus(t, e.do(t, "PATCH", s.at("/classes/%d", class), `{"status":"ended"}`, s.teacher.Access), http.StatusOK)
	student := e.signUp(t)
	wantDetail(t, e.enroll(t, s, class, student.ID), http.StatusConflict, "The class has ended")
	wantDetail(t, e.join(t, student, inviteCodes(t, created)["student"]["code"]), http.StatusConflict, "The class has ended")
	wantStatus(t, e.do(t, "POST", s.enrollPath(student.ID), map[string]any{"class_id": class, "student_id": student.ID,
		"status": "completed", "enrolled_at": "2026-01-05T09:00:00Z", "completed_at": "2026-03-01T09:00:00Z"}, s.teacher.Access), http.StatusCreated)
}

// A seat left by an enrollment that stopped between its seat and its event
// (a crash; a database gone, so that its release failed too) does not leave
// the student "already enrolled" for good: past a grace far longer than a
// write may run, the next enrollment of the student takes it. A younger
// seat (an enrollment perhaps under way) still answers 409.
func TestAnAbandonedSeatDoesNotHoldTheStudentOut(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	class := num(t, e.createClass(t, s, `{"name":"Seats"}`), "id")
	abandoned, young := e.signUp(t), e.signUp(t)
	for _, c := range []struct {
		student int64
		age     string
	}{{abandoned.ID, "11 minutes"}, {young.ID, "1 minute"}} {
		if _, err := e.pool.Exec(context.Background(), `INSERT INTO unique_claims (scope, key, owner, claimed_at)
			VALUES ('active_enrollment', $1, $2, now() - $3::interval)`,
			fmt.Sprintf("%d:%d", class, c.student), fmt.Sprintf("enrollment-%d", 900_000_000+c.student), c.age); err != nil {
			t.Fatal(err)
		}
	}
	wantStatus(t, e.enroll(t, s, class, abandoned.ID), http.StatusCreated)
	wantDetail(t, e.enroll(t, s, class, young.ID), http.StatusConflict, "The student already has an active enrollment in this class")
}

// A seat another student's enrollment abandoned (it stopped between its seat
// and its event) does not keep a full class full for good: an enrollment or
// a join that finds the class full frees such seats past the same grace, and
// counts again. A younger seat, or a recorded enrollment's however old,
// still fills the class.
func TestAFullClassFreesAnotherStudentsAbandonedSeat(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	// seat claims a seat of the class for a student by hand, age ago, as an
	// enrollment that never recorded its event would have left it.
	seat := func(t *testing.T, class, student int64, age string) {
		t.Helper()
		if _, err := e.pool.Exec(context.Background(), `INSERT INTO unique_claims (scope, key, owner, claimed_at)
			VALUES ('active_enrollment', $1, $2, now() - $3::interval)`,
			fmt.Sprintf("%d:%d", class, student), fmt.Sprintf("enrollment-%d", 900_000_000+student), age); err != nil {
			t.Fatal(err)
		}
	}
	oneSeat := func(t *testing.T) (class int64, code any) {
		t.Helper()
		created := e.createClass(t, s, `{"name":"One seat","capacity":1}`)
		return num(t, created, "id"), inviteCodes(t, created)["student"]["code"]
	}
	t.Run("a partner's enrollment takes an abandoned seat", func(t *testing.T) {
		class, _ := oneSeat(t)
		seat(t, class, e.signUp(t).ID, "11 minutes")
		wantStatus(t, e.enroll(t, s, class, e.signUp(t).ID), http.StatusCreated)
	})
	t.Run("a join takes an abandoned seat", func(t *testing.T) {
		class, code := oneSeat(t)
		seat(t, class, e.signUp(t).ID, "11 minutes")
		wantStatus(t, e.join(t, e.signUp(t), code), http.StatusCreated)
	})
	t.Run("a young seat fills the class", func(t *testing.T) {
		class, code := oneSeat(t)
		seat(t, class, e.signUp(t).ID, "9 minutes")
		wantDetail(t, e.enroll(t, s, class, e.signUp(t).ID), http.StatusConflict, classFull)
		wantDetail(t, e.join(t, e.signUp(t), code), http.StatusConflict, classFull)
	})
	t.Run("a recorded enrollment's old seat fills the class", func(t *testing.T) {
		class, code := oneSeat(t)
		held := e.signUp(t)
		wantStatus(t, e.enroll(t, s, class, held.ID), http.StatusCreated)
		if _, err := e.pool.Exec(context.Background(), `UPDATE unique_claims SET claimed_at = now() - interval '1 hour'
			WHERE scope = 'active_enrollment' AND key = $1`, fmt.Sprintf("%d:%d", class, held.ID)); err != nil {
			t.Fatal(err)
		}
		wantDetail(t, e.enroll(t, s, class, e.signUp(t).ID), http.StatusConflict, classFull)
		wantDetail(t, e.join(t, e.signUp(t), code), http.StatusConflict, classFull)
	})
}
