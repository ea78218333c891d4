package api_test

import (
	"fmt"
	"net/http"
	"testing"
)

// actors are the callers every operation of the classroom area is tried as.
type actors struct {
	user, student, otherPartner, partner, admin user
	partnerID, otherPartnerID                   int64
	orgID, otherOrgID                           int64
}

// who names an actor in the table.
type who int

const (
	anonymous who = iota
	plainUser
	student
	otherPartner
	thePartner
	admin
)

var whoNames = []string{"anonymous", "plain user", "student", "another organisation's partner", "the partner", "admin"}

func (a actors) token(w who) string {
	switch w {
	case plainUser:
		return a.user.Access
	case student:
		return a.student.Access
	case otherPartner:
		return a.otherPartner.Access
	case thePartner:
		return a.partner.Access
	case admin:
		return a.admin.Access
	}
	return ""
}

// newActors sets up two organisations, each with a partner tied to a user.
func newActors(t *testing.T, e *env) actors {
	t.Helper()
	a := actors{user: e.signUp(t), student: e.signUp(t), otherPartner: e.signUp(t), partner: e.signUp(t), admin: asAdmin(t, e)}
	a.orgID, a.otherOrgID = createOrg(t, e, a.admin), createOrg(t, e, a.admin)
	a.partnerID = createPartner(t, e, a.admin, a.orgID, a.partner.ID)
	a.otherPartnerID = createPartner(t, e, a.admin, a.otherOrgID, a.otherPartner.ID)
	return a
}

func createPartner(t testing.TB, e *env, admin user, org, userID int64) int64 {
	t.Helper()
	res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", org),
		map[string]any{"org_id": org, "full_name": "Partner", "email": "partner@example.com", "user_id": userID}, admin.Access)
	wantStatus(t, res, http.StatusCreated)
	return num(t, res, "id")
}

// authzCase is one operation and the status each actor gets.
type authzCase struct {
	name   string
	method string
	path   func(a actors) string
	body   func(t *testing.T, e *env, a actors) any
	want   [6]int // by who
}

func runAuthz(t *testing.T, e *env, a actors, cases []authzCase) {
	for _, tc := range cases {
		for w := anonymous; w <= admin; w++ {
			t.Run(tc.name+"/"+whoNames[w], func(t *testing.T) {
				var body any
				if tc.body != nil {
					body = tc.body(t, e, a)
				}
				res := e.do(t, tc.method, tc.path(a), body, a.token(w))
				if res.Status != tc.want[w] {
					t.Errorf("%s %s as %s: status %d, want %d: %s", tc.method, tc.path(a), whoNames[w], res.Status, tc.want[w], res.Body)
				}
			})
		}
	}
}

func static(p string) func(actors) string { return func(actors) string { return p } }

func TestAuthorizationOrganisations(t *testing.T) {
	t.Parallel()
	pendingRequest := func(t *testing.T, e *env) int64 { return e.requestPromotion(t, e.signUp(t), "Org "+uniqueEmail()) }
	var approveID, rejectID int64
	e := sharedEnv(t)
	runAuthz(t, e, newActors(t, e), []authzCase{
		{name: "create organization", method: "POST", path: static("/admin/organizations"),
			body: func(*testing.T, *env, actors) any { return map[string]any{"name": "Org " + uniqueEmail()} },
			want: [6]int{401, 403, 403, 403, 403, 201}},
		{name: "list organizations", method: "GET", path: static("/admin/organizations"),
			want: [6]int{401, 403, 403, 403, 403, 200}},
		{name: "create partner", method: "POST",
			path: func(a actors) string { return fmt.Sprintf("/partner/partners?org_id=%d", a.orgID) },
			body: func(_ *testing.T, _ *env, a actors) any {
				return map[string]any{"org_id": a.orgID, "full_name": "P", "email": "p@example.com"}
			},
			want: [6]int{401, 403, 403, 403, 403, 201}},
		{name: "request promotion", method: "POST", path: static("/user/partner-promotion-requests"),
			body: func(*testing.T, *env, actors) any {
				return map[string]any{"name": "N", "email": "n@example.com", "org_name": "Org " + uniqueEmail()}
			},
			want: [6]int{401, 201, 201, 201, 201, 201}},
		{name: "list promotion requests", method: "GET", path: static("/admin/partner-promotion-requests"),
			want: [6]int{401, 403, 403, 403, 403, 200}},
		{name: "approve promotion", method: "POST",
			path: func(actors) string { return fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", approveID) },
			body: func(t *testing.T, e *env, _ actors) any {
				approveID = pendingRequest(t, e)
				return map[string]any{"organization": "new"}
			},
			want: [6]int{401, 403, 403, 403, 403, 200}},
		{name: "reject promotion", method: "POST",
			path: func(actors) string { return fmt.Sprintf("/admin/partner-promotion-requests/%d/reject", rejectID) },
			body: func(t *testing.T, e *env, _ actors) any { rejectID = pendingRequest(t, e); return map[string]any{} },
			want: [6]int{401, 403, 403, 403, 403, 200}},
	})
}

// classroomSetting adds to the actors a course and two classes of the
// partner's organisation; the student is enrolled in the first.
type classroomSetting struct {
	actors
	courseID, classID, class2ID, inviteCodeID int64
	joinCode                                  string
}

func newClassroomSetting(t *testing.T, e *env) classroomSetting {
	t.Helper()
	c := classroomSetting{actors: newActors(t, e)}
	at := func(p string, args ...any) string {
		return fmt.Sprintf("/partner/%d", c.partnerID) + fmt.Sprintf(p, args...)
	}
	res := e.do(t, "POST", at("/course"), map[string]any{"title": "Course", "course_key": "K-" + uniqueEmail()}, c.partner.Access)
	wantStatus(t, res, http.StatusCreated)
	c.courseID = num(t, res, "id")
	res = e.do(t, "POST", at("/classes"), map[string]any{"name": "Class", "course_id": c.courseID}, c.partner.Access)
	wantStatus(t, res, http.StatusCreated)
	c.classID = num(t, res, "id")
	codes := field(t, res, "invite_codes").([]any)
	c.inviteCodeID, _ = codes[0].(map[string]any)["id"].(interface{ Int64() (int64, error) }).Int64()
	res = e.do(t, "POST", at("/classes"), map[string]any{"name": "Open class"}, c.partner.Access)
	wantStatus(t, res, http.StatusCreated)
	c.class2ID = num(t, res, "id")
	for _, code := range field(t, res, "invite_codes").([]any) {
		if m := code.(map[string]any); m["target_role"] == "student" {
			c.joinCode = m["code"].(string)
		}
	}
	c.enroll(t, e, c.student)
	return c
}

// enroll makes u an active student of the first class and returns the enrollment.
func (c classroomSetting) enroll(t *testing.T, e *env, u user) int64 {
	t.Helper()
	res := e.do(t, "POST", fmt.Sprintf("/partner/%d/student/%d/enrollments", c.partnerID, u.ID),
		map[string]any{"class_id": c.classID, "student_id": u.ID}, c.partner.Access)
	wantStatus(t, res, http.StatusCreated)
	return num(t, res, "id")
}

func TestAuthorizationClassroom(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := newClassroomSetting(t, e)
	partnerOnly := [6]int{401, 403, 403, 403, 0, 0} // 0: filled in per case
	with := func(ok int) [6]int { w := partnerOnly; w[thePartner], w[admin] = ok, ok; return w }
	p := func(format string, args ...any) func(actors) string {
		return func(actors) string { return fmt.Sprintf("/partner/%d", c.partnerID) + fmt.Sprintf(format, args...) }
	}
	var newStudent user
	var dropID int64
	cases := []authzCase{
		{name: "create course", method: "POST", path: p("/course"), want: with(201),
			body: func(*testing.T, *env, actors) any {
				return map[string]any{"title": "T", "course_key": "K-" + uniqueEmail()}
			}},
		{name: "list courses", method: "GET", path: p("/course"), want: with(200)},
		{name: "read course", method: "GET", path: p("/course/%d", c.courseID), want: with(200)},
		{name: "update course", method: "PATCH", path: p("/course/%d", c.courseID), want: with(200),
			body: func(*testing.T, *env, actors) any { return map[string]any{"description": uniqueEmail()} }},
		{name: "create class", method: "POST", path: p("/classes"), want: with(201),
			body: func(*testing.T, *env, actors) any { return map[string]any{"name": "C"} }},
		{name: "list classes", method: "GET", path: p("/classes"), want: with(200)},
		{name: "read class", method: "GET", path: p("/classes/%d", c.classID), want: with(200)},
		{name: "update class", method: "PATCH", path: p("/classes/%d", c.classID), want: with(200),
			body: func(*testing.T, *env, actors) any { return map[string]any{"description": uniqueEmail()} }},
		{name: "revoke invite code", method: "POST", path: p("/classes/%d/invite-codes/%d/revoke", c.classID, c.inviteCodeID), want: with(200)},
		{name: "list class enrollments", method: "GET", path: p("/classes/%d/enrollments", c.classID), want: with(200)},
		{name: "enroll a student", method: "POST",
			path: func(actors) string {
				return fmt.Sprintf("/partner/%d/student/%d/enrollments", c.partnerID, newStudent.ID)
			},
			body: func(t *testing.T, e *env, _ actors) any {
				newStudent = e.signUp(t)
				return map[string]any{"class_id": c.classID, "student_id": newStudent.ID}
			},
			want: with(201)},
		{name: "my enrollments", method: "GET", path: static("/user/class/enrollments"), want: [6]int{401, 200, 200, 200, 200, 200}},
		{name: "drop the student's enrollment", method: "DELETE",
			path: func(actors) string { return fmt.Sprintf("/user/class/enrollments/%d", dropID) },
			body: func(t *testing.T, e *env, _ actors) any {
				// A fresh enrollment of the student each time (the previous one may be dropped).
				res := e.do(t, "GET", "/user/class/enrollments", nil, c.student.Access)
				for _, item := range field(t, res, "items").([]any) {
					m := item.(map[string]any)
					if m["status"] == "active" {
						id, _ := m["id"].(interface{ Int64() (int64, error) }).Int64()
						dropID = id
						return nil
					}
				}
				dropID = c.enroll(t, e, c.student)
				return nil
			},
			want: [6]int{401, 404, 204, 404, 204, 204}},
		{name: "join with an invite code", method: "POST", path: static("/user/class/join"),
			body: func(*testing.T, *env, actors) any { return map[string]any{"code": c.joinCode} },
			want: [6]int{401, 201, 201, 201, 201, 201}},
	}
	runAuthz(t, e, c.actors, cases)
}
