package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/pgtest"
	"lectern/projections"
)

// asAdmin makes an administrator and logs it in.
func asAdmin(t testing.TB, e *env) user {
	t.Helper()
	// An administrator as lectern users create --admin makes one: roles are
	// read from the users read model with every request, so a token that
	// merely claims the role is not enough.
	u := user{Email: uniqueEmail(), Password: "correct horse battery", Name: "Admin"}
	created, written, err := e.svc.Identity.CreateUser(context.Background(), u.Email, u.Password, u.Name, true)
	if err != nil {
		t.Fatal(err)
	}
	// The role counts once the users read model holds it.
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.ConsistencyWait)
	defer cancel()
	if err := e.svc.Listener.WaitFor(ctx, written.Position, projections.UsersProjection); err != nil {
		t.Fatalf("the admin's read model: %v", err)
	}
	u.ID = created.ID
	res := e.do(t, "POST", "/user/login", map[string]string{"email": u.Email, "password": u.Password}, "")
	wantStatus(t, res, http.StatusOK)
	u.Access, u.Refresh = str(t, res, "access_token"), str(t, res, "refresh_token")
	return u
}

func createOrg(t testing.TB, e *env, admin user) int64 {
	t.Helper()
	res := e.do(t, "POST", "/admin/organizations", map[string]any{"name": "Org " + uniqueEmail()}, admin.Access)
	wantStatus(t, res, http.StatusCreated)
	return num(t, res, "id")
}

func TestOrganizations(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	plain := e.signUp(t)
	name := "Riverside " + uniqueEmail()

	res := e.do(t, "POST", "/admin/organizations", map[string]any{"name": name}, admin.Access)
	wantStatus(t, res, http.StatusCreated)
	if got := str(t, res, "name"); got != name {
		t.Errorf("name %q, want %q", got, name)
	}
	id := num(t, res, "id")

	wantDetail(t, e.do(t, "POST", "/admin/organizations", map[string]any{"name": strings.ToUpper(name)}, admin.Access),
		http.StatusConflict, "An organization with this name already exists")
	wantDetail(t, e.do(t, "POST", "/admin/organizations", map[string]any{"name": "x"}, plain.Access), http.StatusForbidden, "Not enough permissions")
	wantDetail(t, e.do(t, "POST", "/admin/organizations", map[string]any{"name": "x"}, ""), http.StatusUnauthorized, "Not authenticated")
	wantBody(t, e.do(t, "POST", "/admin/organizations", map[string]any{"name": ""}, admin.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"string_too_short","loc":["body","name"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}]}`)

	// Listed, on whichever page: the package's database holds every other
	// test's organisations too (and more on each run of go test -count=N).
	for page := 1; ; page++ {
		list := e.do(t, "GET", fmt.Sprintf("/admin/organizations?size=200&page=%d", page), nil, admin.Access)
		wantStatus(t, list, http.StatusOK)
		if strings.Contains(string(list.Body), fmt.Sprintf(`"id":%d,`, id)) {
			break
		}
		if !strings.Contains(string(list.Body), `"id":`) {
			t.Fatalf("organization %d missing from every page (the last: %s)", id, list.Body)
		}
	}
	wantStatus(t, e.do(t, "GET", "/admin/organizations", nil, plain.Access), http.StatusForbidden)
}

func TestCreatePartner(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	org := createOrg(t, e, admin)
	person := e.signUp(t)
	body := func(overrides map[string]any) map[string]any {
		b := map[string]any{"org_id": org, "full_name": "Grace Hopper", "email": "grace@example.com", "user_id": person.ID}
		for k, v := range overrides {
			b[k] = v
		}
		return b
	}
	path := fmt.Sprintf("/partner/partners?org_id=%d", org)

	res := e.do(t, "POST", path, body(nil), admin.Access)
	wantStatus(t, res, http.StatusCreated)
	got := res.JSON.(map[string]any)
	for k, want := range map[string]any{"org_id": json.Number(fmt.Sprint(org)), "full_name": "Grace Hopper", "email": "grace@example.com",
		"phone": nil, "role": "partner", "is_active": true, "user_id": json.Number(fmt.Sprint(person.ID)), "last_login_at": nil} {
		if diff := cmp.Diff(want, got[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	partnerID := num(t, res, "id")

	// The user now holds the role and the partner record.
	me := e.do(t, "GET", "/user/me", nil, person.Access)
	wantStatus(t, me, http.StatusOK)
	if diff := cmp.Diff([]any{"user", "partner"}, field(t, me, "roles")); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{json.Number(fmt.Sprint(partnerID))}, field(t, me, "partner_ids")); diff != "" {
		t.Errorf("partner_ids (-want +got):\n%s", diff)
	}

	wantDetail(t, e.do(t, "POST", path, body(nil), admin.Access), http.StatusConflict, "This user is already a partner of this organization")
	wantBody(t, e.do(t, "POST", path, body(map[string]any{"org_id": org + 1000}), admin.Access), http.StatusUnprocessableEntity,
		fmt.Sprintf(`{"detail":[{"type":"value_error","loc":["body","org_id"],"msg":"Value error, org_id must equal the org_id query parameter","input":%d,"ctx":{"error":"org_id must equal the org_id query parameter"}}]}`, org+1000))
	wantBody(t, e.do(t, "POST", "/partner/partners", body(nil), admin.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"missing","loc":["query","org_id"],"msg":"Field required","input":null}]}`)
	wantBody(t, e.do(t, "POST", path, body(map[string]any{"role": "dean", "user_id": nil}), admin.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"enum","loc":["body","role"],"msg":"Input should be 'partner' or 'assistant'","input":"dean","ctx":{"expected":"'partner' or 'assistant'"}}]}`)
	missingOrg := int64(1 << 40)
	wantDetail(t, e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", missingOrg), body(map[string]any{"org_id": missingOrg}), admin.Access),
		http.StatusNotFound, "Organization not found")
	wantDetail(t, e.do(t, "POST", path, body(map[string]any{"user_id": 1 << 40}), admin.Access), http.StatusNotFound, "User not found")
	wantDetail(t, e.do(t, "POST", path, body(nil), person.Access), http.StatusForbidden, "Not enough permissions")
	wantStatus(t, e.do(t, "POST", path, body(nil), ""), http.StatusUnauthorized)

	// A partner without an account, and an assistant.
	res = e.do(t, "POST", path, body(map[string]any{"user_id": nil, "role": "assistant", "phone": "+1 555 0100", "is_active": false}), admin.Access)
	wantStatus(t, res, http.StatusCreated)
	if str(t, res, "role") != "assistant" || field(t, res, "user_id") != nil || field(t, res, "is_active") != false {
		t.Errorf("assistant partner: %s", res.Body)
	}
}

// Concurrent creations of the same user's partner record in one organisation
// produce exactly one.
func TestCreatePartnerRace(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	org := createOrg(t, e, admin)
	person := e.signUp(t)
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", org),
				map[string]any{"org_id": org, "full_name": "Twin", "email": "twin@example.com", "user_id": person.ID}, admin.Access)
			statuses[i] = res.Status
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Errorf("status %d, want 201 or 409", s)
		}
	}
	if created != 1 {
		t.Errorf("%d partners created, want exactly 1 (statuses %v)", created, statuses)
	}
}

func TestPromotionRequests(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	applicant := e.signUp(t)
	orgName := "Academy " + uniqueEmail()

	res := e.do(t, "POST", "/user/partner-promotion-requests",
		map[string]any{"name": "Ada", "email": applicant.Email, "org_name": orgName}, applicant.Access)
	wantStatus(t, res, http.StatusCreated)
	for k, want := range map[string]any{"status": "pending", "target_role": "partner", "edu_category": nil, "org_name": orgName} {
		if diff := cmp.Diff(want, field(t, res, k)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	requestID := num(t, res, "request_id")

	wantBody(t, e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Ada", "email": "not-an-email", "org_name": "X", "target_role": "king"}, applicant.Access),
		http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["body","email"],"msg":"value is not a valid email address: An email address must have an @-sign.","input":"not-an-email","ctx":{"reason":"An email address must have an @-sign."}},{"type":"enum","loc":["body","target_role"],"msg":"Input should be 'partner' or 'assistant'","input":"king","ctx":{"expected":"'partner' or 'assistant'"}}]}`)
	wantStatus(t, e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Ada", "email": applicant.Email, "org_name": orgName}, ""), http.StatusUnauthorized)

	pending := e.do(t, "GET", "/admin/partner-promotion-requests?status=pending&size=200", nil, admin.Access)
	wantStatus(t, pending, http.StatusOK)
	if !strings.Contains(string(pending.Body), fmt.Sprintf(`"request_id":%d,`, requestID)) {
		t.Errorf("request %d not listed as pending: %s", requestID, pending.Body)
	}
	wantStatus(t, e.do(t, "GET", "/admin/partner-promotion-requests", nil, applicant.Access), http.StatusForbidden)
	asNew := map[string]any{"organization": "new"}
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", requestID), asNew, applicant.Access), http.StatusForbidden)

	// The e-mail of a request is the requester's own, whatever is sent.
	spoofed := e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Ada", "email": "someone.else@example.com", "org_name": "Spoofed " + uniqueEmail()}, applicant.Access)
	wantStatus(t, spoofed, http.StatusCreated)
	if got := str(t, spoofed, "email"); got != applicant.Email {
		t.Errorf("a request recorded the e-mail %q, not the requester's own %q", got, applicant.Email)
	}

	approved := e.do(t, "POST", fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", requestID), asNew, admin.Access)
	wantStatus(t, approved, http.StatusOK)
	if str(t, approved, "status") != "approved" || field(t, approved, "partner_id") == nil || field(t, approved, "org_id") == nil {
		t.Fatalf("approval: %s", approved.Body)
	}
	partnerID, orgID := num(t, approved, "partner_id"), num(t, approved, "org_id")
	me := e.do(t, "GET", "/user/me", nil, applicant.Access)
	if diff := cmp.Diff([]any{json.Number(fmt.Sprint(partnerID))}, field(t, me, "partner_ids")); diff != "" {
		t.Errorf("partner_ids after approval (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"user", "partner"}, field(t, me, "roles")); diff != "" {
		t.Errorf("roles after approval (-want +got):\n%s", diff)
	}
	wantDetail(t, e.do(t, "POST", fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", requestID), asNew, admin.Access),
		http.StatusConflict, "Promotion request is already approved")
	wantDetail(t, e.do(t, "POST", fmt.Sprintf("/admin/partner-promotion-requests/%d/reject", requestID), map[string]any{}, admin.Access),
		http.StatusConflict, "Promotion request is already approved")

	// A second applicant naming the same organisation (in other letters and
	// spaces) never joins it by its name: the admin sees the match and
	// chooses.
	other := e.signUp(t)
	res = e.do(t, "POST", "/user/partner-promotion-requests",
		map[string]any{"name": "Bo", "email": other.Email, "org_name": " " + strings.ToUpper(orgName) + " ", "target_role": "assistant"}, other.Access)
	second := num(t, res, "request_id")
	approveSecond := fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", second)
	listed := e.do(t, "GET", "/admin/partner-promotion-requests?status=pending&size=200", nil, admin.Access)
	wantMatch := fmt.Sprintf(`"request_id":%d,`, second)
	if i := strings.Index(string(listed.Body), wantMatch); i < 0 ||
		!strings.Contains(string(listed.Body[i:]), fmt.Sprintf(`"matching_organizations":[{"id":%d,"name":%q}]`, orgID, orgName)) {
		t.Errorf("the list does not show request %d's match with organization %d: %s", second, orgID, listed.Body)
	}
	for _, body := range []any{map[string]any{}, map[string]any{"organization": "new", "org_id": orgID}} {
		res := e.do(t, "POST", approveSecond, body, admin.Access)
		wantStatus(t, res, http.StatusUnprocessableEntity)
	}
	wantStatus(t, e.do(t, "POST", approveSecond, nil, admin.Access), http.StatusUnprocessableEntity)
	wantDetail(t, e.do(t, "POST", approveSecond, asNew, admin.Access), http.StatusConflict,
		fmt.Sprintf("An organization named %q already exists: approve with its org_id to make the requester its partner, or reject the request", " "+strings.ToUpper(orgName)+" "))
	wantDetail(t, e.do(t, "POST", approveSecond, map[string]any{"org_id": 999999999}, admin.Access), http.StatusNotFound, "Organization not found")
	if me := e.do(t, "GET", "/user/me", nil, other.Access); len(field(t, me, "partner_ids").([]any)) != 0 {
		t.Errorf("refused approvals made a partner: %s", me.Body)
	}
	approved = e.do(t, "POST", approveSecond, map[string]any{"org_id": orgID}, admin.Access)
	wantStatus(t, approved, http.StatusOK)
	if got := num(t, approved, "org_id"); got != orgID {
		t.Errorf("the approval that names organization %d joined %d", orgID, got)
	}

	// Rejection records why.
	third := e.signUp(t)
	res = e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Cy", "email": third.Email, "org_name": "Elsewhere"}, third.Access)
	thirdID := num(t, res, "request_id")
	rejected := e.do(t, "POST", fmt.Sprintf("/admin/partner-promotion-requests/%d/reject", thirdID), map[string]any{"reason": "No such school"}, admin.Access)
	wantStatus(t, rejected, http.StatusOK)
	if str(t, rejected, "status") != "rejected" || str(t, rejected, "reason") != "No such school" {
		t.Errorf("rejection: %s", rejected.Body)
	}
	wantDetail(t, e.do(t, "POST", "/admin/partner-promotion-requests/999999999/approve", asNew, admin.Access), http.StatusNotFound, "Promotion request not found")
	wantBody(t, e.do(t, "POST", "/admin/partner-promotion-requests/abc/approve", asNew, admin.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"int_parsing","loc":["path","request_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}]}`)
}

// requestPromotion has u ask for the partner role in a new organisation
// named orgName, and returns the request's id.
func (e *env) requestPromotion(t testing.TB, u user, orgName string) int64 {
	t.Helper()
	res := e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Applicant", "email": u.Email, "org_name": orgName}, u.Access)
	wantStatus(t, res, http.StatusCreated)
	return num(t, res, "request_id")
}

// Decisions on one request sent at once: one wins, and nothing of the
// others stays behind. A request left rejected made its requester no
// partner and no organisation; an approval made one partner.
func TestPromotionDecisionsDoNotInterleave(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	s := openSchool(t, e)
	for range 3 {
		u := e.signUp(t)
		orgName := "Raced " + uniqueEmail()
		path := fmt.Sprintf("/admin/partner-promotion-requests/%d/", e.requestPromotion(t, u, orgName))
		decisions := []struct {
			action string
			body   map[string]any
		}{{"approve", map[string]any{"organization": "new"}}, {"approve", map[string]any{"org_id": s.org}}, {"reject", map[string]any{"reason": "no"}}}
		results := concurrently(len(decisions), func(i int) response {
			return e.do(t, "POST", path+decisions[i].action, decisions[i].body, admin.Access)
		})
		won := -1
		for i, res := range results {
			switch res.Status {
			case http.StatusOK:
				if won >= 0 {
					t.Fatalf("two decisions on one request succeeded: %s and %s", results[won], res)
				}
				won = i
			case http.StatusConflict:
			default:
				t.Fatalf("%s: want 200 or 409", res)
			}
		}
		if won < 0 {
			t.Fatalf("no decision succeeded: %v", results)
		}
		me := e.do(t, "GET", "/user/me", nil, u.Access)
		partners := len(field(t, me, "partner_ids").([]any))
		if wantPartners := map[bool]int{true: 0, false: 1}[decisions[won].action == "reject"]; partners != wantPartners {
			t.Errorf("%s won: the requester has %d partner records, want %d (%s)", decisions[won].action, partners, wantPartners, me.Body)
		}
		var orgs int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM unique_claims WHERE scope = 'org_name' AND key = $1`,
			strings.ToLower(orgName)).Scan(&orgs); err != nil {
			t.Fatal(err)
		}
		if wantOrgs := map[bool]int{true: 1, false: 0}[won == 0]; orgs != wantOrgs {
			t.Errorf("decision %d won: %d organisations are named %q, want %d", won, orgs, orgName, wantOrgs)
		}
	}
}

// Approving the request of a user erased since is 404 and leaves nothing
// behind: no organisation named after the request's placeholder.
func TestApprovingAnErasedUsersRequest(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	u := e.signUp(t)
	path := fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", e.requestPromotion(t, u, "Gone "+uniqueEmail()))
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusNoContent)
	for range 2 { // the second would meet the first's organisation
		wantDetail(t, e.do(t, "POST", path, map[string]any{"organization": "new"}, admin.Access), http.StatusNotFound,
			"The user this data is about was erased")
	}
	var orgs int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM unique_claims WHERE scope = 'org_name' AND key = $1`,
		strings.ToLower("[erased]")).Scan(&orgs); err != nil {
		t.Fatal(err)
	}
	if orgs != 0 {
		t.Errorf("approving an erased user's request made an organisation named %q", "[erased]")
	}
}

// A decision under way on a request makes another one 409; a claim left by
// a process that stopped mid-decision is taken over once its lease is out.
func TestPromotionDecisionClaim(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	u := e.signUp(t)
	id := e.requestPromotion(t, u, "Claimed "+uniqueEmail())
	path := fmt.Sprintf("/admin/partner-promotion-requests/%d/reject", id)
	claimAged := func(age string) {
		t.Helper()
		if _, err := e.pool.Exec(context.Background(), `INSERT INTO unique_claims (scope, key, owner, claimed_at)
			VALUES ('promotion_decision', $1, 'another process', now() - $2::interval)
			ON CONFLICT (scope, key) DO UPDATE SET claimed_at = EXCLUDED.claimed_at`, fmt.Sprint(id), age); err != nil {
			t.Fatal(err)
		}
	}
	claimAged("1 second")
	wantDetail(t, e.do(t, "POST", path, map[string]any{}, admin.Access), http.StatusConflict,
		"Another decision on this promotion request is under way")
	claimAged("2 minutes")
	wantStatus(t, e.do(t, "POST", path, map[string]any{}, admin.Access), http.StatusOK)
}

// Each request waits in the admins' list: one user files five at once
// (one for each of a few organisations), then is told to wait, nothing
// filed; another user is not. The bucket is in the user's export.
func TestPromotionRequestsAreLimitedPerUser(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, other := e.signUp(t), e.signUp(t)
	for i := range 5 {
		e.requestPromotion(t, u, fmt.Sprintf("School %d of %s", i, u.Email))
	}
	res := e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Applicant", "email": u.Email, "org_name": "One more"}, u.Access)
	wantDetail(t, res, http.StatusTooManyRequests, "Too many partner-role requests; wait for the admins' decision, or try again later")
	if res.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	e.requestPromotion(t, other, "Another school of "+other.Email)
	export := e.do(t, "GET", "/user/me/export", nil, u.Access)
	wantStatus(t, export, http.StatusOK)
	var got struct {
		Requests []json.RawMessage `json:"promotion_requests"`
		Buckets  []struct {
			Kind string `json:"kind"`
		} `json:"rate_limit_buckets"`
	}
	if err := json.Unmarshal(export.Body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Requests) != 5 {
		t.Errorf("%d requests filed, want 5", len(got.Requests))
	}
	if !slices.ContainsFunc(got.Buckets, func(b struct {
		Kind string `json:"kind"`
	}) bool {
		return b.Kind == "promotion-requests"
	}) {
		t.Errorf("the export's buckets %+v have no promotion-requests", got.Buckets)
	}
}
