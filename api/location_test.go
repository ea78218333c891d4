package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each 201 whose resource has a GET of its own (locatedOperations) says in
// Location where it is: a relative path which, read with the creator's
// token, answers 200 with the same resource. A replay of an idempotent
// create says the same.
func TestCreatedLocation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	u := c.student

	type created struct {
		res     response
		token   string
		want    string // the Location
		idField string // the resource's id in the GET's answer
		id      int64
	}
	agent := e.createAgent(t, u.Access, map[string]any{"name": "Tutor", "system_prompt": "Be kind"})
	course := e.createCourse(t, c.school, map[string]any{"title": "Course", "course_key": "K-" + uniqueEmail()})
	class := e.createClass(t, c.school, map[string]any{"name": "Class " + uniqueEmail()})
	example := e.createFewShot(t, u.Access, map[string]any{"input_text": "in", "output_text": "out"})
	document := e.uploadDocument(t, u.Access, "Notes", "Some notes to read.")
	session, _ := e.startSession(t, u.Access, c.class, map[string]any{"prompt_text": "Hello"})
	cases := map[string]created{
		"create_agent": {res: agent, token: u.Access, idField: "agent_id", id: num(t, agent, "agent_id"),
			want: agentPath(agent, t)},
		"create_course": {res: course, token: c.teacher.Access, idField: "id", id: num(t, course, "id"),
			want: c.at("/course/%d", num(t, course, "id"))},
		"create_class": {res: class, token: c.teacher.Access, idField: "id", id: num(t, class, "id"),
			want: c.at("/classes/%d", num(t, class, "id"))},
		"create_few_shot_example": {res: example, token: u.Access, idField: "example_id", id: num(t, example, "example_id"),
			want: fewShotPath(t, example)},
		"upload_document": {res: document, token: u.Access, idField: "knowledge_id", id: num(t, document, "knowledge_id"),
			want: documentPath(num(t, document, "knowledge_id"))},
		"run_practice_session": {res: session, token: u.Access, idField: "session_id", id: num(t, session, "session_id"),
			want: sessionPath(num(t, session, "session_id"))},
	}
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	slices.Sort(names)
	if diff := cmp.Diff(locatedOperations, names); diff != "" {
		t.Errorf("the operations tested are not those that send Location (-sending +tested):\n%s", diff)
	}
	for _, name := range names {
		tc := cases[name]
		loc := tc.res.Header.Get("Location")
		if loc != tc.want {
			t.Errorf("%s: %s: Location %q, want %q", name, tc.res, loc, tc.want)
			continue
		}
		got := e.do(t, "GET", loc, nil, tc.token)
		wantStatus(t, got, http.StatusOK)
		if id := num(t, got, tc.idField); id != tc.id {
			t.Errorf("%s: GET %s answers %s %d, want %d", name, loc, tc.idField, id, tc.id)
		}
	}

	// A replay repeats the first answer's Location.
	key := "location-" + uniqueEmail()
	body := map[string]any{"name": "Replayed", "system_prompt": "Be kind"}
	first := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", key)
	wantStatus(t, first, http.StatusCreated)
	again := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", key)
	wantStatus(t, again, http.StatusCreated)
	wantHeader(t, again, "Idempotent-Replayed", "true")
	wantHeader(t, first, "Location", agentPath(first, t))
	wantHeader(t, again, "Location", agentPath(first, t))
}

// A 201 whose resource has no GET of its own sends no Location.
func TestCreatedWithoutLocation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	class := e.createClass(t, s, map[string]any{"name": "Class " + uniqueEmail()})
	var joinCode string
	for _, code := range inviteCodes(t, class) {
		if code["target_role"] == "student" {
			joinCode, _ = code["code"].(string)
		}
	}
	student, joiner, partner := e.signUp(t), e.signUp(t), e.signUp(t)

	email := uniqueEmail()
	answers := map[string]response{
		"sign_up": e.do(t, "POST", "/user/signup", map[string]string{
			"email": email, "password": "correct horse battery", "name": "New", "email_verified_token": e.verifiedToken(t, email),
		}, ""),
		"create_organization": e.do(t, "POST", "/admin/organizations", map[string]any{"name": "Org " + uniqueEmail()}, s.admin.Access),
		"create_partner": e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", s.org), map[string]any{
			"org_id": s.org, "full_name": "Teacher", "email": partner.Email, "user_id": partner.ID, "is_active": true,
		}, s.admin.Access),
		"request_partner_promotion": e.do(t, "POST", "/user/partner-promotion-requests",
			map[string]any{"name": "N", "email": student.Email, "org_name": "Org " + uniqueEmail()}, student.Access),
		"enroll_student": e.enroll(t, s, num(t, class, "id"), student.ID),
		"join_class":     e.join(t, joiner, joinCode),
	}
	for _, res := range answers {
		wantStatus(t, res, http.StatusCreated)
		wantHeader(t, res, "Location", "")
	}
}
