package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func (e *env) createClass(t testing.TB, s school, body any) response {
	t.Helper()
	res := e.do(t, "POST", s.at("/classes"), body, s.teacher.Access)
	wantStatus(t, res, http.StatusCreated)
	return res
}

// inviteCodes returns a class response's invite codes by target role.
func inviteCodes(t testing.TB, res response) map[string]map[string]any {
	t.Helper()
	list, ok := field(t, res, "invite_codes").([]any)
	if !ok {
		t.Fatalf("%s: invite_codes is not a list", res)
	}
	out := map[string]map[string]any{}
	for _, item := range list {
		code := item.(map[string]any)
		out[code["target_role"].(string)] = code
	}
	return out
}

func codeID(t testing.TB, code map[string]any) int64 {
	t.Helper()
	n, err := code["id"].(json.Number).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var codePatternClassroom = regexp.MustCompile(`^[ABCDEFGHJKMNPQRSTUVWXYZ23456789]{8}$`)

func TestCreateClass(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	course := num(t, e.createCourse(t, s, `{"title":"Algebra","course_key":"ALG"}`), "id")

	res := e.do(t, "POST", s.at("/classes"), map[string]any{
		"name": "Period 1", "description": "Mornings", "status": "active",
		"start_at": "2026-09-01T08:00:00+02:00", "end_at": "2027-01-31T17:00:00Z", "capacity": 30,
		"timezone": "Europe/Paris", "location": "Room 4", "online_url": "https://meet.example.com/p1", "invite_only": true,
		"course_id": course, "primary_model_id": 1, "allowed_model_ids": []int{1, 2}, "partner_id": 999,
	}, s.teacher.Access)
	wantStatus(t, res, http.StatusCreated)
	wantHeader(t, res, "X-Projection-Pending", "")
	id := num(t, res, "id")
	createdAt := timestamp(t, res, "created_at").Format(wireTime)
	codes := inviteCodes(t, res)
	student, assistant := codes["student"], codes["assistant"]
	if student == nil || assistant == nil || len(codes) != 2 {
		t.Fatalf("%s: want one student and one assistant code", res)
	}
	for _, c := range []map[string]any{student, assistant} {
		if !codePatternClassroom.MatchString(c["code"].(string)) {
			t.Errorf("code %q is not 8 characters of the unambiguous alphabet", c["code"])
		}
	}
	if student["code"] == assistant["code"] || codeID(t, student) == codeID(t, assistant) {
		t.Errorf("the two codes share a code or an id: %v %v", student, assistant)
	}
	code := func(c map[string]any, role string, maxUses int) string {
		return fmt.Sprintf(`{"id":%d,"partner_id":%d,"class_id":%d,"code":%q,"target_role":%q,"used_count":0,"status":"active",`+
			`"created_at":%q,"expires_at":"2027-01-31T17:00:00.000000Z","max_uses":%d,"created_by":%d}`,
			codeID(t, c), s.partner, id, c["code"], role, createdAt, maxUses, s.teacher.ID)
	}
	want := fmt.Sprintf(`{"id":%d,"partner_id":%d,"org_id":%d,"course_id":%d,"name":"Period 1","description":"Mornings","status":"active",`+
		`"start_at":"2026-09-01T06:00:00.000000Z","end_at":"2027-01-31T17:00:00.000000Z","capacity":30,"timezone":"Europe/Paris",`+
		`"location":"Room 4","online_url":"https://meet.example.com/p1","invite_only":true,"primary_model_id":1,"allowed_model_ids":[1,2],`+
		`"created_at":%q,"updated_at":%q,"invite_codes":[%s,%s]}`,
		id, s.partner, s.org, course, createdAt, createdAt, code(student, "student", 30), code(assistant, "assistant", 5))
	wantBody(t, res, http.StatusCreated, want)

	// Read-your-writes.
	wantBody(t, e.do(t, "GET", s.at("/classes/%d", id), nil, s.teacher.Access), http.StatusOK, want)
	wantBody(t, e.do(t, "GET", s.at("/classes"), nil, s.teacher.Access), http.StatusOK, `{"items":[`+want+`],"total":1,"page":1,"size":50}`)

	// The stream: the class, then its two codes.
	evs := e.streamEvents(t, fmt.Sprintf("class-%d", id))
	if diff := cmp.Diff([]string{"class.created", "class.invite_code_issued", "class.invite_code_issued"}, eventTypes(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	wantPayload := map[string]any{"class_id": jsonNum(id), "org_id": jsonNum(s.org), "partner_id": jsonNum(s.partner),
		"invite_code_id": jsonNum(codeID(t, student)), "code": student["code"], "target_role": "student",
		"max_uses": jsonNum(30), "status": "active", "expires_at": "2027-01-31T17:00:00Z", "created_by": jsonNum(s.teacher.ID)}
	if diff := cmp.Diff(wantPayload, payload(t, evs[1])); diff != "" {
		t.Errorf("class.invite_code_issued payload (-want +got):\n%s", diff)
	}
	created := payload(t, evs[0])
	for k, v := range map[string]any{"course_id": jsonNum(course), "capacity": jsonNum(30), "status": "active",
		"allowed_model_ids": []any{jsonNum(1), jsonNum(2)}, "created_by": jsonNum(s.teacher.ID)} {
		if diff := cmp.Diff(v, created[k]); diff != "" {
			t.Errorf("class.created %s (-want +got):\n%s", k, diff)
		}
	}
}

func TestCreateClassDefaults(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	res := e.createClass(t, s, `{"name":"Drop-in","status":null,"invite_only":null,"allowed_model_ids":null}`)
	id := num(t, res, "id")
	createdAt := timestamp(t, res, "created_at")
	for k, want := range map[string]any{"status": "planned", "course_id": nil, "description": nil, "start_at": nil, "end_at": nil,
		"capacity": nil, "timezone": nil, "location": nil, "online_url": nil, "invite_only": false, "primary_model_id": nil,
		"allowed_model_ids": []any{}} {
		if diff := cmp.Diff(want, field(t, res, k)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	// Without capacity and end, the student code admits 100 and both live 180 days.
	codes := inviteCodes(t, res)
	expires := createdAt.Add(180 * 24 * time.Hour).Format(wireTime)
	for role, maxUses := range map[string]int64{"student": 100, "assistant": 5} {
		c := codes[role]
		if got, _ := c["max_uses"].(json.Number).Int64(); got != maxUses {
			t.Errorf("%s code max_uses %d, want %d", role, got, maxUses)
		}
		// expires_at is 180 days after the command's clock, a moment before the recorded time.
		if got, _ := time.Parse(wireTime, c["expires_at"].(string)); got.After(createdAt.Add(180*24*time.Hour)) || createdAt.Add(180*24*time.Hour).Sub(got) > time.Minute {
			t.Errorf("%s code expires_at %s, want about %s", role, c["expires_at"], expires)
		}
	}
	wantBody(t, e.do(t, "GET", s.at("/classes/%d", id), nil, s.teacher.Access), http.StatusOK, string(res.Body))
}

// course_id comes from the query or the body; both must then agree, and the
// course must be the organisation's.
func TestCreateClassCourse(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s, other := openSchool(t, e), openSchool(t, e)
	course := num(t, e.createCourse(t, s, `{"title":"A","course_key":"A"}`), "id")
	second := num(t, e.createCourse(t, s, `{"title":"B","course_key":"B"}`), "id")
	foreign := num(t, e.createCourse(t, other, `{"title":"A","course_key":"A"}`), "id")

	for _, tc := range []struct {
		name, query, body string
		want              any
	}{
		{"neither", "", `{"name":"n"}`, nil},
		{"the query", fmt.Sprintf("?course_id=%d", course), `{"name":"n"}`, jsonNum(course)},
		{"the body", "", fmt.Sprintf(`{"name":"n","course_id":%d}`, course), jsonNum(course)},
		{"both, equal", fmt.Sprintf("?course_id=%d", course), fmt.Sprintf(`{"name":"n","course_id":%d}`, course), jsonNum(course)},
		{"the query, the body null", fmt.Sprintf("?course_id=%d", course), `{"name":"n","course_id":null}`, jsonNum(course)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(t, "POST", s.at("/classes%s", tc.query), tc.body, s.teacher.Access)
			wantStatus(t, res, http.StatusCreated)
			if diff := cmp.Diff(tc.want, field(t, res, "course_id")); diff != "" {
				t.Errorf("course_id (-want +got):\n%s", diff)
			}
		})
	}
	wantBody(t, e.do(t, "POST", s.at("/classes?course_id=%d", course), fmt.Sprintf(`{"name":"n","course_id":%d}`, second), s.teacher.Access),
		http.StatusUnprocessableEntity, fmt.Sprintf(`{"detail":[{"type":"value_error","loc":["query","course_id"],`+
			`"msg":"Value error, course_id in the query and course_id in the body differ","input":"%d",`+
			`"ctx":{"error":"course_id in the query and course_id in the body differ"}}]}`, course))
	for _, c := range []int64{foreign, 999999999} {
		wantDetail(t, e.do(t, "POST", s.at("/classes?course_id=%d", c), `{"name":"n"}`, s.teacher.Access), http.StatusNotFound, "Course not found")
		wantDetail(t, e.do(t, "POST", s.at("/classes"), fmt.Sprintf(`{"name":"n","course_id":%d}`, c), s.teacher.Access), http.StatusNotFound, "Course not found")
	}
	wantBody(t, e.do(t, "POST", s.at("/classes?course_id=x"), `{"name":"n"}`, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"int_parsing","loc":["query","course_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"}]}`)
}

func TestCreateClassValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	for _, tc := range []struct{ name, body, want string }{
		{"name missing", `{"capacity":5}`,
			`{"detail":[{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"capacity":5}}]}`},
		{"capacity 0", `{"name":"n","capacity":0}`,
			`{"detail":[{"type":"greater_than_equal","loc":["body","capacity"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}]}`},
		{"capacity over 10000", `{"name":"n","capacity":10001}`,
			`{"detail":[{"type":"less_than_equal","loc":["body","capacity"],"msg":"Input should be less than or equal to 10000","input":10001,"ctx":{"le":10000}}]}`},
		{"unknown status", `{"name":"n","status":"closed"}`,
			`{"detail":[{"type":"enum","loc":["body","status"],"msg":"Input should be 'planned', 'active' or 'ended'","input":"closed","ctx":{"expected":"'planned', 'active' or 'ended'"}}]}`},
		{"a new class cannot be ended", `{"name":"n","status":"ended"}`,
			`{"detail":[{"type":"value_error","loc":["body","status"],"msg":"Value error, a new class cannot be ended","input":"ended","ctx":{"error":"a new class cannot be ended"}}]}`},
		{"end_at before start_at", `{"name":"n","start_at":"2026-02-01T10:00:00Z","end_at":"2026-02-01T09:00:00Z"}`,
			`{"detail":[{"type":"value_error","loc":["body","end_at"],"msg":"Value error, end_at must not be before start_at","input":"2026-02-01T09:00:00Z","ctx":{"error":"end_at must not be before start_at"}}]}`},
		{"a model id that is not an integer", `{"name":"n","allowed_model_ids":[1,"two"]}`,
			`{"detail":[{"type":"int_parsing","loc":["body","allowed_model_ids",1],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"two"}]}`},
		{"model ids not a list", `{"name":"n","allowed_model_ids":3}`,
			`{"detail":[{"type":"list_type","loc":["body","allowed_model_ids"],"msg":"Input should be a valid list","input":3}]}`},
		// A class whose models no turn can use would refuse every turn.
		{"models that are not in the catalogue", `{"name":"n","primary_model_id":998,"allowed_model_ids":[1,999]}`,
			`{"detail":[{"type":"value_error","loc":["body","primary_model_id"],"msg":"Value error, no model has id 998; GET /models lists the models","input":998,"ctx":{"error":"no model has id 998; GET /models lists the models"}},{"type":"value_error","loc":["body","allowed_model_ids",1],"msg":"Value error, no model has id 999; GET /models lists the models","input":999,"ctx":{"error":"no model has id 999; GET /models lists the models"}}]}`},
		// No turn could use it: turns would fall back to another model.
		{"a primary model outside the allowed models", `{"name":"n","primary_model_id":2,"allowed_model_ids":[1]}`,
			`{"detail":[{"type":"value_error","loc":["body","primary_model_id"],"msg":"Value error, model 2 is not one of the class's allowed_model_ids","input":2,"ctx":{"error":"model 2 is not one of the class's allowed_model_ids"}}]}`},
		{"a model named twice", `{"name":"n","allowed_model_ids":[2,1,2]}`,
			`{"detail":[{"type":"value_error","loc":["body","allowed_model_ids",2],"msg":"Value error, model 2 is named more than once","input":2,"ctx":{"error":"model 2 is named more than once"}}]}`},
		{"invite_only not a boolean", `{"name":"n","invite_only":"perhaps"}`,
			`{"detail":[{"type":"bool_parsing","loc":["body","invite_only"],"msg":"Input should be a valid boolean, unable to interpret input","input":"perhaps"}]}`},
		{"a date-time past year 9999 in UTC", `{"name":"n","end_at":"9999-12-31T23:00:00-05:00"}`,
			`{"detail":[{"type":"value_error","loc":["body","end_at"],"msg":"Value error, the date-time is out of range once in UTC","input":"9999-12-31T23:00:00-05:00","ctx":{"error":"the date-time is out of range once in UTC"}}]}`},
		// The IANA database's names only, built into the binary.
		{"an unknown time zone", `{"name":"n","timezone":"Not/AZone"}`,
			`{"detail":[{"type":"value_error","loc":["body","timezone"],"msg":"Value error, timezone must be a time zone name of the IANA database, such as Europe/Paris or UTC","input":"Not/AZone","ctx":{"error":"timezone must be a time zone name of the IANA database, such as Europe/Paris or UTC"}}]}`},
		{"an empty time zone", `{"name":"n","timezone":""}`,
			`{"detail":[{"type":"value_error","loc":["body","timezone"],"msg":"Value error, timezone must be a time zone name of the IANA database, such as Europe/Paris or UTC","input":"","ctx":{"error":"timezone must be a time zone name of the IANA database, such as Europe/Paris or UTC"}}]}`},
		{"a time zone that is a path", `{"name":"n","timezone":"../../etc/passwd","end_at":"9999-12-31T23:00:00-05:00"}`,
			`{"detail":[{"type":"value_error","loc":["body","end_at"],"msg":"Value error, the date-time is out of range once in UTC","input":"9999-12-31T23:00:00-05:00","ctx":{"error":"the date-time is out of range once in UTC"}},` +
				`{"type":"value_error","loc":["body","timezone"],"msg":"Value error, timezone must be a time zone name of the IANA database, such as Europe/Paris or UTC","input":"../../etc/passwd","ctx":{"error":"timezone must be a time zone name of the IANA database, such as Europe/Paris or UTC"}}]}`},
		{"blank name", `{"name":" "}`,
			`{"detail":[{"type":"value_error","loc":["body","name"],"msg":"Value error, name must not be blank","input":" ","ctx":{"error":"name must not be blank"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantBody(t, e.do(t, "POST", s.at("/classes"), tc.body, s.teacher.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
	wantBody(t, e.do(t, "GET", s.at("/classes"), nil, s.teacher.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

func TestUpdateClass(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s, other := openSchool(t, e), openSchool(t, e)
	course := num(t, e.createCourse(t, s, `{"title":"A","course_key":"A"}`), "id")
	foreign := num(t, e.createCourse(t, other, `{"title":"A","course_key":"A"}`), "id")
	created := e.createClass(t, s, `{"name":"P1","location":"Room 1","invite_only":true,"allowed_model_ids":[2],"start_at":"2026-01-01T00:00:00Z"}`)
	id := num(t, created, "id")
	path := s.at("/classes/%d", id)
	patch := func(body string) response {
		t.Helper()
		res := e.do(t, "PATCH", path, body, s.teacher.Access)
		wantStatus(t, res, http.StatusOK)
		wantBody(t, e.do(t, "GET", path, nil, s.teacher.Access), http.StatusOK, string(res.Body))
		return res
	}
	check := func(res response, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if diff := cmp.Diff(v, field(t, res, k)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", k, diff)
			}
		}
	}

	res := patch(fmt.Sprintf(`{"name":"P2","capacity":12,"course_id":%d}`, course))
	check(res, map[string]any{"name": "P2", "capacity": jsonNum(12), "course_id": jsonNum(course), "location": "Room 1", "invite_only": true})
	// null resets: to null, to false, to no models.
	res = patch(`{"location":null,"invite_only":null,"allowed_model_ids":null,"course_id":null}`)
	check(res, map[string]any{"location": nil, "invite_only": false, "allowed_model_ids": []any{}, "course_id": nil, "name": "P2"})
	// The student code's bound followed the capacity.
	if got := inviteCodes(t, res)["student"]["max_uses"]; got != jsonNum(12) {
		t.Errorf("student code max_uses %v after the capacity became 12, want 12", got)
	}

	res = patch(`{"status":"active"}`)
	check(res, map[string]any{"status": "active"})
	wantDetail(t, e.do(t, "PATCH", path, `{"status":"planned"}`, s.teacher.Access), http.StatusConflict,
		"Class status cannot move from active to planned; it only moves forward: planned → active → ended")
	last := patch(`{"status":"ended"}`)
	wantDetail(t, e.do(t, "PATCH", path, `{"status":"active","name":"again"}`, s.teacher.Access), http.StatusConflict,
		"Class status cannot move from ended to active; it only moves forward: planned → active → ended")
	wantBody(t, patch(`{"status":"ended","name":"P2"}`), http.StatusOK, string(last.Body))

	wantDetail(t, e.do(t, "PATCH", path, fmt.Sprintf(`{"course_id":%d}`, foreign), s.teacher.Access), http.StatusNotFound, "Course not found")
	wantBody(t, e.do(t, "PATCH", path, `{"end_at":"2025-12-31T23:59:59Z"}`, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["body","end_at"],"msg":"Value error, end_at must not be before start_at","input":"2025-12-31T23:59:59Z","ctx":{"error":"end_at must not be before start_at"}}]}`)
	wantBody(t, e.do(t, "PATCH", path, `{"allowed_model_ids":[7]}`, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["body","allowed_model_ids",0],"msg":"Value error, no model has id 7; GET /models lists the models","input":7,"ctx":{"error":"no model has id 7; GET /models lists the models"}}]}`)
	wantBody(t, e.do(t, "PATCH", path, `{"primary_model_id":7}`, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["body","primary_model_id"],"msg":"Value error, no model has id 7; GET /models lists the models","input":7,"ctx":{"error":"no model has id 7; GET /models lists the models"}}]}`)
	wantBody(t, e.do(t, "PATCH", path, `{"primary_model_id":1,"allowed_model_ids":[2]}`, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["body","primary_model_id"],"msg":"Value error, model 1 is not one of the class's allowed_model_ids","input":1,"ctx":{"error":"model 1 is not one of the class's allowed_model_ids"}}]}`)
	wantBody(t, e.do(t, "PATCH", path, `{"name":null,"status":null}`, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"string_type","loc":["body","name"],"msg":"Input should be a valid string","input":null},`+
			`{"type":"enum","loc":["body","status"],"msg":"Input should be 'planned', 'active' or 'ended'","input":null,"ctx":{"expected":"'planned', 'active' or 'ended'"}}]}`)
	wantBody(t, e.do(t, "GET", path, nil, s.teacher.Access), http.StatusOK, string(last.Body))

	if diff := cmp.Diff([]string{"class.created", "class.invite_code_issued", "class.invite_code_issued", "class.updated",
		"class.invite_code_limits_changed", "class.updated", "class.status_changed", "class.status_changed"},
		eventTypes(e.streamEvents(t, fmt.Sprintf("class-%d", id)))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestClassAccess(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s, other := openSchool(t, e), openSchool(t, e)
	plain := e.signUp(t)
	class := e.createClass(t, s, `{"name":"P"}`)
	id := num(t, class, "id")
	code := codeID(t, inviteCodes(t, class)["student"])

	for _, caller := range []user{plain, other.teacher} {
		wantDetail(t, e.do(t, "POST", s.at("/classes"), `{"name":"x"}`, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "GET", s.at("/classes"), nil, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "GET", s.at("/classes/%d", id), nil, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "PATCH", s.at("/classes/%d", id), `{"name":"x"}`, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "POST", s.at("/classes/%d/invite-codes/%d/revoke", id, code), nil, caller.Access), http.StatusForbidden, "Not enough permissions")
		wantDetail(t, e.do(t, "GET", s.at("/classes/%d/enrollments", id), nil, caller.Access), http.StatusForbidden, "Not enough permissions")
	}
	for _, cid := range []int64{id, 999999999} {
		wantDetail(t, e.do(t, "GET", other.at("/classes/%d", cid), nil, other.teacher.Access), http.StatusNotFound, "Class not found")
		wantDetail(t, e.do(t, "PATCH", other.at("/classes/%d", cid), `{"name":"x"}`, other.teacher.Access), http.StatusNotFound, "Class not found")
		wantDetail(t, e.do(t, "POST", other.at("/classes/%d/invite-codes/%d/revoke", cid, code), nil, other.teacher.Access), http.StatusNotFound, "Class not found")
		wantDetail(t, e.do(t, "GET", other.at("/classes/%d/enrollments", cid), nil, other.teacher.Access), http.StatusNotFound, "Class not found")
	}
	wantBody(t, e.do(t, "GET", other.at("/classes"), nil, other.teacher.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
	// An admin acts for any partner.
	wantBody(t, e.do(t, "GET", s.at("/classes/%d", id), nil, other.admin.Access), http.StatusOK, string(class.Body))
	wantDetail(t, e.do(t, "GET", "/partner/999999999/classes", nil, other.admin.Access), http.StatusNotFound, "Partner not found")
	if n := len(e.streamEvents(t, fmt.Sprintf("class-%d", id))); n != 3 {
		t.Errorf("the class's stream has %d events, want 3", n)
	}
}

func TestRevokeInviteCode(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	class := e.createClass(t, s, `{"name":"P"}`)
	id := num(t, class, "id")
	student := inviteCodes(t, class)["student"]
	path := s.at("/classes/%d/invite-codes/%d/revoke", id, codeID(t, student))

	res := e.do(t, "POST", path, nil, s.teacher.Access)
	wantStatus(t, res, http.StatusOK)
	want := fmt.Sprintf(`{"id":%d,"partner_id":%d,"class_id":%d,"code":%q,"target_role":"student","used_count":0,"status":"revoked",`+
		`"created_at":%q,"expires_at":%q,"max_uses":100,"created_by":%d}`,
		codeID(t, student), s.partner, id, student["code"], student["created_at"], student["expires_at"], s.teacher.ID)
	wantBody(t, res, http.StatusOK, want)
	// Revoking again changes nothing.
	wantBody(t, e.do(t, "POST", path, nil, s.teacher.Access), http.StatusOK, want)

	got := e.do(t, "GET", s.at("/classes/%d", id), nil, s.teacher.Access)
	wantStatus(t, got, http.StatusOK)
	if status := inviteCodes(t, got)["student"]["status"]; status != "revoked" {
		t.Errorf("the class shows the code as %v, want revoked", status)
	}
	if status := inviteCodes(t, got)["assistant"]["status"]; status != "active" {
		t.Errorf("the assistant code is %v, want active", status)
	}
	if n := len(e.streamEvents(t, fmt.Sprintf("class-%d", id))); n != 4 {
		t.Errorf("the class's stream has %d events, want 4", n)
	}

	// A revoked code admits no one.
	joiner := e.signUp(t)
	wantDetail(t, e.do(t, "POST", "/user/class/join", map[string]any{"code": student["code"]}, joiner.Access),
		http.StatusConflict, "The invite code has been revoked")

	other := e.createClass(t, s, `{"name":"Q"}`)
	wantDetail(t, e.do(t, "POST", s.at("/classes/%d/invite-codes/%d/revoke", num(t, other, "id"), codeID(t, student)), nil, s.teacher.Access),
		http.StatusNotFound, "Invite code not found")
	wantBody(t, e.do(t, "POST", s.at("/classes/%d/invite-codes/0/revoke", id), nil, s.teacher.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"greater_than_equal","loc":["path","invite_code_id"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`)
}

// Codes are drawn at random and never shared between classes.
func TestInviteCodesAreDistinct(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	seen := map[string]bool{}
	for range 10 {
		for _, c := range inviteCodes(t, e.createClass(t, s, `{"name":"P"}`)) {
			code := c["code"].(string)
			if seen[code] {
				t.Errorf("code %s issued twice", code)
			}
			if !codePatternClassroom.MatchString(code) {
				t.Errorf("code %q is not 8 characters of the unambiguous alphabet", code)
			}
			seen[code] = true
		}
	}
}

// A class's invite codes follow its capacity and its end: a raised
// capacity lets the student code admit as many (it turned students away
// with seats free), a later end makes an expired code usable again, an
// earlier one ends the codes with it.
func TestInviteCodesFollowTheClass(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	created := e.createClass(t, s, `{"name":"Small","capacity":1}`)
	path := s.at("/classes/%d", num(t, created, "id"))
	code := inviteCodes(t, created)["student"]["code"]
	wantStatus(t, e.join(t, e.signUp(t), code), http.StatusCreated)
	wantDetail(t, e.join(t, e.signUp(t), code), http.StatusConflict, "The invite code has reached its maximum number of uses")
	res := e.do(t, "PATCH", path, `{"capacity":3}`, s.teacher.Access)
	wantStatus(t, res, http.StatusOK)
	if c := inviteCodes(t, res)["student"]; c["max_uses"] != jsonNum(3) || c["status"] != "active" {
		t.Errorf("the student code after the capacity became 3: %v", c)
	}
	wantBody(t, e.do(t, "GET", path, nil, s.teacher.Access), http.StatusOK, string(res.Body))
	wantStatus(t, e.join(t, e.signUp(t), code), http.StatusCreated)
	wantStatus(t, e.join(t, e.signUp(t), code), http.StatusCreated)

	yesterday := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)
	ended := e.createClass(t, s, fmt.Sprintf(`{"name":"Late","end_at":%q}`, yesterday.Format(time.RFC3339)))
	path = s.at("/classes/%d", num(t, ended, "id"))
	code = inviteCodes(t, ended)["student"]["code"]
	wantDetail(t, e.join(t, e.signUp(t), code), http.StatusConflict, "The invite code has expired")
	later := yesterday.Add(31 * 24 * time.Hour)
	res = e.do(t, "PATCH", path, fmt.Sprintf(`{"end_at":%q}`, later.Format(time.RFC3339)), s.teacher.Access)
	wantStatus(t, res, http.StatusOK)
	for role, c := range inviteCodes(t, res) {
		if got, _ := time.Parse(wireTime, c["expires_at"].(string)); !got.Equal(later) || c["status"] != "active" {
			t.Errorf("the %s code after the end moved to %s: %v", role, later, c)
		}
	}
	wantStatus(t, e.join(t, e.signUp(t), code), http.StatusCreated)
	wantStatus(t, e.do(t, "PATCH", path, fmt.Sprintf(`{"end_at":%q}`, yesterday.Format(time.RFC3339)), s.teacher.Access), http.StatusOK)
	wantDetail(t, e.join(t, e.signUp(t), code), http.StatusConflict, "The invite code has expired")
}

// An archived course takes no new class, created in it or moved into it
// (409, nothing recorded); a class already in it keeps its other changes.
func TestArchivedCourseTakesNoNewClasses(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	course := num(t, e.createCourse(t, s, map[string]any{"title": "Old", "course_key": "OLD-" + uniqueEmail()}), "id")
	inside := num(t, e.createClass(t, s, map[string]any{"name": "Inside", "course_id": course}), "id")
	outside := num(t, e.createClass(t, s, map[string]any{"name": "Outside"}), "id")
	wantStatus(t, e.do(t, "PATCH", s.at("/course/%d", course), map[string]any{"status": "archived"}, s.teacher.Access), http.StatusOK)

	const refused = "The course is archived: it takes no new classes"
	wantDetail(t, e.do(t, "POST", s.at("/classes?course_id=%d", course), map[string]any{"name": "New"}, s.teacher.Access),
		http.StatusConflict, refused)
	wantDetail(t, e.do(t, "PATCH", s.at("/classes/%d", outside), map[string]any{"course_id": course}, s.teacher.Access),
		http.StatusConflict, refused)
	wantStatus(t, e.do(t, "PATCH", s.at("/classes/%d", inside), map[string]any{"name": "Inside, renamed", "course_id": course}, s.teacher.Access),
		http.StatusOK)
}
