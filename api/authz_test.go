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

func runAuthz(t *testing.T, cases []authzCase) {
	e := sharedEnv(t)
	a := newActors(t, e)
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
	pendingRequest := func(t *testing.T, e *env) int64 {
		u := e.signUp(t)
		res := e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "N", "email": u.Email, "org_name": "Org " + uniqueEmail()}, u.Access)
		wantStatus(t, res, http.StatusCreated)
		return num(t, res, "request_id")
	}
	var approveID, rejectID int64
	runAuthz(t, []authzCase{
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
			body: func(t *testing.T, e *env, _ actors) any { approveID = pendingRequest(t, e); return nil },
			want: [6]int{401, 403, 403, 403, 403, 200}},
		{name: "reject promotion", method: "POST",
			path: func(actors) string { return fmt.Sprintf("/admin/partner-promotion-requests/%d/reject", rejectID) },
			body: func(t *testing.T, e *env, _ actors) any { rejectID = pendingRequest(t, e); return map[string]any{} },
			want: [6]int{401, 403, 403, 403, 403, 200}},
	})
}
