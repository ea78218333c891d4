package api_test

// The authorization matrix: every operation of the served OpenAPI document,
// asked by every kind of caller, about resources of their own, of their
// organisation, and of another user or organisation. The expected statuses
// are docs/decisions.md's and docs/security.md's:
//
//   - no token, or a malformed, expired or foreign-signed one: 401 on every
//     operation the document marks as authenticated; the public ones answer
//     as without a token;
//   - another user's resource: 404, never 403 or 200, admins included
//     (security.md "Object-level authorisation"; README "someone else's
//     agent is 404");
//   - /partner/{partner_id}/...: the partner's own user while the partner is
//     active, and admins; anyone else 403 whether or not the partner exists;
//     an admin naming a missing partner 404 (decisions.md "Organisations and
//     partners"); another organisation's course or class 404 (decisions.md
//     "Classroom");
//   - admin routes: 403 for anyone but an admin (security.md
//     "Function-level authorisation");
//   - practice turns: an active enrollment in the class, an active partner
//     or assistant of its organisation, or an admin, else 403; a missing
//     class 404, a session not the caller's 404, another user's agent 404
//     (decisions.md "Practice sessions");
//   - dropping an enrollment: the student, an active partner of the class's
//     organisation, or an admin; anyone else 404 (decisions.md "Classroom").
//
// Every row's refused callers are asked first, then the allowed ones, whose
// bodies would succeed: a refusal is about who asks, not what is sent. Every
// answer is also checked against the document (the harness), and a 5xx
// always fails.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"lectern/auth"
)

// caller is a kind of caller: a column of the matrix.
type caller int

const (
	noToken caller = iota
	malformedToken
	expiredToken
	foreignToken
	plainCaller     // a signed-up user with no enrollment and no partner record
	studentCaller   // actively enrolled in class A
	partnerACaller  // active partner of organisation A
	assistantCaller // active partner record of organisation A with role assistant
	inactiveCaller  // inactive partner of organisation A
	partnerBCaller  // active partner of organisation B
	adminCaller
	nCallers
)

var callerNames = [nCallers]string{"no token", "malformed token", "expired token", "foreign signature",
	"plain user", "student", "partner of A", "assistant of A", "inactive partner of A", "partner of B", "admin"}

// signedIn are the callers with a valid token.
var signedIn = []caller{plainCaller, studentCaller, partnerACaller, assistantCaller, inactiveCaller, partnerBCaller, adminCaller}

// expect is a row's statuses for the signed-in callers; the token-less ones
// follow from the document (401, or as without a token for public operations).
type expect [nCallers]int

// seven fills the signed-in callers in their order: plain user, student,
// partner of A, assistant of A, inactive partner of A, partner of B, admin.
func seven(p, s, pa, aa, ia, pb, ad int) expect {
	var w expect
	w[plainCaller], w[studentCaller], w[partnerACaller], w[assistantCaller] = p, s, pa, aa
	w[inactiveCaller], w[partnerBCaller], w[adminCaller] = ia, pb, ad
	return w
}

// everyone is the same status for every signed-in caller.
func everyone(status int) expect {
	return seven(status, status, status, status, status, status, status)
}

// adminOnly: admins get status, everyone else 403.
func adminOnly(status int) expect { return seven(403, 403, 403, 403, 403, 403, status) }

// owned is what a user owns: an agent, a few-shot example, a knowledge
// document with a reindex job, a practice session.
type owned struct {
	agent, example, document, job, session int64
}

// authzWorld is the matrix's fixtures, built once.
type authzWorld struct {
	e      *env
	users  [nCallers]user
	tokens [nCallers]string

	orgA, orgB                                  int64
	partnerA, assistantA, inactiveA, partnerB   int64 // partner records
	courseA, courseB                            int64
	classA, classA2, classA3, classB            int64 // A2: practice then dropped; A3: joined by code
	assistantCodeA, assistantCodeB, studentCode int64 // invite code ids (studentCode: class B's)
	joinCode                                    string

	owner  user // another user: owns the "another user's" resources
	theirs owned
	// ownerKey and a request's path are the Idempotency-Key the owner's
	// create_agent, run and chat were sent with (ownerKeyed).
	ownerKey string
	own      [nCallers]owned
	login    user // the public operations' account
	dropping int64
}

// missingPartner is a partner id no record has.
const missingPartner = 9_000_000_000_000

func (w *authzWorld) token(c caller) string { return w.tokens[c] }

// ownPartner is the partner record the caller's own account holds (a
// missing one for the callers without a record).
func (w *authzWorld) ownPartner(c caller) int64 {
	switch c {
	case partnerACaller:
		return w.partnerA
	case assistantCaller:
		return w.assistantA
	case inactiveCaller:
		return w.inactiveA
	case partnerBCaller:
		return w.partnerB
	}
	return missingPartner
}

func newAuthzWorld(t *testing.T, e *env) *authzWorld {
	t.Helper()
	w := &authzWorld{e: e}
	admin := asAdmin(t, e)
	w.users[adminCaller] = admin
	for _, c := range []caller{plainCaller, studentCaller, partnerACaller, assistantCaller, inactiveCaller, partnerBCaller} {
		w.users[c] = e.signUp(t)
	}
	w.owner, w.login = e.signUp(t), e.signUp(t)
	for _, c := range signedIn {
		w.tokens[c] = w.users[c].Access
	}
	w.badTokens(t)

	// Organisations A and B, their partners.
	w.orgA, w.orgB = createOrg(t, e, admin), createOrg(t, e, admin)
	partner := func(org int64, u user, role string, active bool) int64 {
		res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", org), map[string]any{
			"org_id": org, "full_name": "Partner " + u.Name, "email": u.Email, "user_id": u.ID, "role": role, "is_active": active,
		}, admin.Access)
		wantStatus(t, res, http.StatusCreated)
		return num(t, res, "id")
	}
	w.partnerA = partner(w.orgA, w.users[partnerACaller], "partner", true)
	w.assistantA = partner(w.orgA, w.users[assistantCaller], "assistant", true)
	w.inactiveA = partner(w.orgA, w.users[inactiveCaller], "partner", false)
	w.partnerB = partner(w.orgB, w.users[partnerBCaller], "partner", true)

	// Courses and classes.
	pa, pb := w.users[partnerACaller].Access, w.users[partnerBCaller].Access
	created := func(res response) response { t.Helper(); wantStatus(t, res, http.StatusCreated); return res }
	w.courseA = num(t, created(e.do(t, "POST", fmt.Sprintf("/partner/%d/course", w.partnerA),
		map[string]any{"title": "Algebra", "course_key": "ALG-" + uniqueEmail()}, pa)), "id")
	w.courseB = num(t, created(e.do(t, "POST", fmt.Sprintf("/partner/%d/course", w.partnerB),
		map[string]any{"title": "Biology", "course_key": "BIO-" + uniqueEmail()}, pb)), "id")
	class := func(partner int64, token string) (int64, map[string]map[string]any) {
		res := created(e.do(t, "POST", fmt.Sprintf("/partner/%d/classes", partner), map[string]any{"name": "Class " + uniqueEmail()}, token))
		return num(t, res, "id"), inviteCodes(t, res)
	}
	var codes map[string]map[string]any
	w.classA, codes = class(w.partnerA, pa)
	w.assistantCodeA = codeID(t, codes["assistant"])
	w.classA2, _ = class(w.partnerA, pa)
	w.classA3, codes = class(w.partnerA, pa)
	w.joinCode = codes["student"]["code"].(string)
	w.classB, codes = class(w.partnerB, pb)
	w.assistantCodeB, w.studentCode = codeID(t, codes["assistant"]), codeID(t, codes["student"])

	// The student and the owner are enrolled in class A.
	for _, u := range []user{w.users[studentCaller], w.owner} {
		created(e.do(t, "POST", fmt.Sprintf("/partner/%d/student/%d/enrollments", w.partnerA, u.ID),
			map[string]any{"class_id": w.classA, "student_id": u.ID}, pa))
	}

	// What each user owns. The plain user and the inactive partner practised
	// in class A2 while enrolled there, then were dropped: their sessions
	// are theirs, and their class no longer admits them.
	w.theirs = w.give(t, w.owner.Access, w.classA)
	w.ownerKey = "key-" + uniqueEmail()
	for _, k := range ownerKeyed(w) {
		wantStatus(t, e.do(t, "POST", k.path, k.body, w.owner.Access, "Idempotency-Key", w.ownerKey+k.path), k.status)
	}
	for _, c := range signedIn {
		switch c {
		case plainCaller, inactiveCaller:
			u := w.users[c]
			res := created(e.do(t, "POST", fmt.Sprintf("/partner/%d/student/%d/enrollments", w.partnerA, u.ID),
				map[string]any{"class_id": w.classA2, "student_id": u.ID}, pa))
			w.own[c] = w.give(t, u.Access, w.classA2)
			wantStatus(t, e.do(t, "DELETE", enrollmentPath(t, res), nil, pa), http.StatusNoContent)
		case partnerBCaller:
			w.own[c] = w.give(t, w.tokens[c], w.classB)
		default:
			w.own[c] = w.give(t, w.tokens[c], w.classA)
		}
	}
	return w
}

// keyedRequest is a request the owner sent under its Idempotency-Key.
type keyedRequest struct {
	path   string
	body   any
	status int
}

func ownerKeyed(w *authzWorld) map[string]keyedRequest {
	return map[string]keyedRequest{
		"create_agent":              {"/agents", map[string]any{"name": "Keyed", "system_prompt": "Be brief"}, 201},
		"run_practice_session":      {fmt.Sprintf("/user/practice/sessions/run?class_id=%d", w.classA), map[string]any{"prompt_text": "Keyed?", "model_names": []string{"echo"}}, 201},
		"continue_practice_session": {fmt.Sprintf("/user/practice/sessions/%d/chat", w.theirs.session), map[string]any{"prompt_text": "Keyed again?"}, 200},
	}
}

// badTokens makes the expired and the foreign-signed tokens: the admin's
// own claims, session included, so that only the expiry or the signature
// is wrong.
func (w *authzWorld) badTokens(t *testing.T) {
	t.Helper()
	admin := w.users[adminCaller]
	own, err := auth.NewTokens(w.e.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := own.ParseAccess(admin.Access)
	if err != nil {
		t.Fatal(err)
	}
	past, err := auth.NewTokens(w.e.key, func() time.Time { return time.Now().Add(-time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	expired, _, err := past.IssueSessionAccess(admin.ID, claims.Roles, claims.Session)
	if err != nil {
		t.Fatal(err)
	}
	otherKey := []byte(strings.Repeat("k", 32))
	foreign, err := auth.NewTokens(otherKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := foreign.IssueSessionAccess(admin.ID, claims.Roles, claims.Session)
	if err != nil {
		t.Fatal(err)
	}
	w.tokens[malformedToken] = "not-a-jwt"
	w.tokens[expiredToken] = expired
	w.tokens[foreignToken] = forged
}

// give gives the token's user an agent, a few-shot example, a document
// with a reindex job and a session in class.
func (w *authzWorld) give(t *testing.T, token string, class int64) owned {
	t.Helper()
	e := w.e
	var p owned
	p.agent = num(t, e.createAgent(t, token, map[string]any{"name": "Tutor", "system_prompt": "Be kind"}), "agent_id")
	p.example = num(t, e.createFewShot(t, token, map[string]any{"input_text": "2+2", "output_text": "4"}), "example_id")
	p.document = num(t, e.uploadDocument(t, token, "Notes", "Photosynthesis makes sugar from light, water and air."), "knowledge_id")
	res := e.do(t, "POST", fmt.Sprintf("/user/document/%d/reindex", p.document), nil, token)
	wantStatus(t, res, http.StatusAccepted)
	p.job = num(t, res, "job_id")
	_, turn := e.startSession(t, token, class, map[string]any{"prompt_text": "What is a prime?", "model_names": []string{"echo"}})
	p.session = turn.SessionID
	return p
}

// authzRow is one operation asked about one target.
type authzRow struct {
	op     string // the document's operationId
	target string // what the path (or body) names
	// req is the request caller c sends: its path (with query) and body
	// (nil: none). It is called for each caller, just before the request.
	req  func(t *testing.T, c caller) (path string, body any)
	want expect
	// headers, when set, are sent with the request (name, value pairs).
	headers func(c caller) []string
	// check, when set, looks at a 2xx answer (a list holds only what the
	// caller may see).
	check func(t *testing.T, c caller, res response)
}

// docOp is an operation of the document.
type docOp struct {
	method, pattern string
	authenticated   bool
	bodyRequired    bool
}

func documentOperations(t *testing.T, e *env) map[string]docOp {
	t.Helper()
	ops := map[string]docOp{}
	for pattern, methods := range e.doc.Paths {
		for method, op := range methods {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, pattern)
				continue
			}
			ops[op.OperationID] = docOp{method: strings.ToUpper(method), pattern: pattern,
				authenticated: len(op.Security) > 0, bodyRequired: op.RequestBody != nil && op.RequestBody.Required}
		}
	}
	return ops
}

func TestAuthzMatrix(t *testing.T) {
	t.Parallel()
	// A client address of its own: the per-address limits (joins, logins)
	// count this test's requests alone.
	e := sharedEnv(t).from(t)
	w := newAuthzWorld(t, e)
	rows := w.rows(t)

	ops := documentOperations(t, e)
	covered := map[string]bool{}
	for _, r := range rows {
		if _, ok := ops[r.op]; !ok {
			t.Errorf("the matrix has a row for %q, which the document does not have", r.op)
		}
		covered[r.op] = true
	}
	var missing []string
	for id, op := range ops {
		if !covered[id] {
			missing = append(missing, fmt.Sprintf("%s (%s %s)", id, op.method, op.pattern))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("operations of the document without a row in the authorization matrix:\n%s", strings.Join(missing, "\n"))
	}

	cells := 0
	for _, r := range rows {
		op := ops[r.op]
		want := r.want
		for _, c := range signedIn {
			if want[c] == 0 {
				t.Fatalf("%s [%s]: no status for %s", r.op, r.target, callerNames[c])
			}
		}
		for c := noToken; c < plainCaller; c++ {
			if op.authenticated {
				want[c] = http.StatusUnauthorized
			} else {
				want[c] = want[plainCaller] // the token is not read
			}
		}
		// The refused first, then the allowed.
		order := make([]caller, 0, nCallers)
		for _, allowed := range []bool{false, true} {
			for c := noToken; c < nCallers; c++ {
				if (want[c] < 300) == allowed {
					order = append(order, c)
				}
			}
		}
		for _, c := range order {
			cells++
			path, body := r.req(t, c)
			if body == nil && op.bodyRequired {
				t.Fatalf("%s [%s]: the document requires a body", r.op, r.target)
			}
			w.checkRoute(t, r, op, path)
			var headers []string
			if r.headers != nil {
				headers = r.headers(c)
			}
			res := e.send(t, op.method, path, body, w.token(c), headers...)
			if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				wantEvent(t, res, "turn")
			} else {
				e.check(t, res)
			}
			name := fmt.Sprintf("%s [%s] as %s", r.op, r.target, callerNames[c])
			switch {
			case res.Status != want[c] && res.Status < 300 && want[c] >= 300:
				t.Errorf("LEAK: %s: %s, want %d", name, res, want[c])
			case res.Status != want[c]:
				t.Errorf("%s: %s, want %d", name, res, want[c])
			case res.Status == http.StatusUnauthorized && c < plainCaller:
				w.checkUnauthorized(t, name, c, res)
			case res.Status < 300 && r.check != nil:
				r.check(t, c, res)
			}
		}
	}
	t.Logf("authorization matrix: %d operations, %d rows, %d callers, %d requests", len(ops), len(rows), nCallers, cells)
}

// checkRoute makes sure the row's path is the operation's route.
func (w *authzWorld) checkRoute(t *testing.T, r authzRow, op docOp, path string) {
	t.Helper()
	p, _, _ := strings.Cut(path, "?")
	rctx := chi.NewRouteContext()
	if !w.e.svc.Handler.Router().Match(rctx, op.method, p) || rctx.RoutePattern() != op.pattern {
		t.Fatalf("%s [%s]: %s %s is not the route %s", r.op, r.target, op.method, path, op.pattern)
	}
}

// checkUnauthorized: no token is "Not authenticated", a token refused is
// "Could not validate credentials"; both ask for a bearer token.
func (w *authzWorld) checkUnauthorized(t *testing.T, name string, c caller, res response) {
	t.Helper()
	detail := "Could not validate credentials"
	if c == noToken {
		detail = "Not authenticated"
	}
	if got, _ := res.JSON.(map[string]any)["detail"].(string); got != detail {
		t.Errorf("%s: %s, want the detail %q", name, res, detail)
	}
	if got := res.Header.Get("WWW-Authenticate"); got != "Bearer" {
		t.Errorf("%s: WWW-Authenticate is %q, want Bearer", name, got)
	}
}

// wantEvent checks that a streamed answer holds the event name.
func wantEvent(t *testing.T, res response, name string) {
	t.Helper()
	if !strings.Contains(string(res.Body), "event: "+name+"\n") {
		t.Errorf("%s: no %s event in the stream", res, name)
	}
}

// Paths and bodies.

func at(format string, args ...any) func(*testing.T, caller) (string, any) {
	return func(*testing.T, caller) (string, any) { return fmt.Sprintf(format, args...), nil }
}

func withBody(path string, body func() any) func(*testing.T, caller) (string, any) {
	return func(*testing.T, caller) (string, any) { return path, body() }
}

// items are a list answer's items.
func items(t *testing.T, res response) []map[string]any {
	t.Helper()
	list, ok := field(t, res, "items").([]any)
	if !ok {
		t.Fatalf("%s: items is not a list", res)
	}
	out := make([]map[string]any, len(list))
	for i, it := range list {
		out[i] = it.(map[string]any)
	}
	return out
}

func idIn(t *testing.T, m map[string]any, name string) int64 {
	t.Helper()
	n, ok := m[name].(json.Number)
	if !ok {
		t.Fatalf("%v: %s is not a number", m, name)
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatalf("%v: %s is not an integer", m, name)
	}
	return v
}

// onlyOwn checks that every item of a list names the wanted value in field.
func onlyOwn(field string, want func(c caller) int64) func(*testing.T, caller, response) {
	return func(t *testing.T, c caller, res response) {
		t.Helper()
		for _, it := range items(t, res) {
			if got := idIn(t, it, field); got != want(c) {
				t.Errorf("LEAK: %s as %s lists an item whose %s is %d, want %d: %v", res.Path, callerNames[c], field, got, want(c), it)
			}
		}
	}
}

func (w *authzWorld) userID(c caller) int64 { return w.users[c].ID }

func (w *authzWorld) rows(t *testing.T) []authzRow {
	t.Helper()
	e := w.e
	own := func(format string, pick func(owned) int64) func(*testing.T, caller) (string, any) {
		return func(_ *testing.T, c caller) (string, any) { return fmt.Sprintf(format, pick(w.own[c])), nil }
	}
	ownWith := func(format string, pick func(owned) int64, body func() any) func(*testing.T, caller) (string, any) {
		return func(_ *testing.T, c caller) (string, any) { return fmt.Sprintf(format, pick(w.own[c])), body() }
	}
	agent := func(p owned) int64 { return p.agent }
	example := func(p owned) int64 { return p.example }
	document := func(p owned) int64 { return p.document }
	session := func(p owned) int64 { return p.session }
	agentBody := func() any { return map[string]any{"name": "Tutor " + uniqueEmail()} }
	exampleBody := func() any { return map[string]any{"title": "T " + uniqueEmail()} }
	settingsBody := func() any { return map[string]any{"top_k": 8, "reranker_top_n": 2} }
	searchBody := func() any { return map[string]any{"query": "photosynthesis"} }
	turnBody := func() any { return map[string]any{"prompt_text": "And 7?", "model_names": []string{"echo"}} }
	sessionSettings := func() any { return map[string]any{"style_preset": "creative"} }
	run := func(class int64, extra map[string]any) func(*testing.T, caller) (string, any) {
		return func(*testing.T, caller) (string, any) {
			body := map[string]any{"prompt_text": "What is a prime?", "model_names": []string{"echo"}}
			for k, v := range extra {
				body[k] = v
			}
			return fmt.Sprintf("/user/practice/sessions/run?class_id=%d", class), body
		}
	}

	sse := func(caller) []string { return []string{"Accept", "text/event-stream"} }
	ownerKey := func(op string) func(caller) []string {
		return func(caller) []string { return []string{"Idempotency-Key", w.ownerKey + ownerKeyed(w)[op].path} }
	}
	keyed := func(op string) func(*testing.T, caller) (string, any) {
		return func(*testing.T, caller) (string, any) { k := ownerKeyed(w)[op]; return k.path, k.body }
	}
	// notReplayed: a request under another user's key is the caller's own,
	// never the owner's stored answer.
	notReplayed := func(field string, want func(caller) int64) func(*testing.T, caller, response) {
		return func(t *testing.T, c caller, res response) {
			if res.Header.Get("Idempotent-Replayed") != "" {
				t.Errorf("LEAK: %s as %s replays the owner's answer: %s", res.Path, callerNames[c], res)
			}
			got := num(t, res, field)
			if field == "session_id" && got == want(c) || field != "session_id" && got != want(c) {
				t.Errorf("LEAK: %s as %s answers %s %d: %s", res.Path, callerNames[c], field, got, res)
			}
		}
	}
	// Partner routes: A's partner record, the caller's own record (a
	// missing one for callers without), and A's record naming B's resources.
	aPartner := func(format string, args ...any) func(*testing.T, caller) (string, any) {
		return func(*testing.T, caller) (string, any) {
			return fmt.Sprintf("/partner/%d", w.partnerA) + fmt.Sprintf(format, args...), nil
		}
	}
	ownPartner := func(format string, args ...any) func(*testing.T, caller) (string, any) {
		return func(_ *testing.T, c caller) (string, any) {
			return fmt.Sprintf("/partner/%d", w.ownPartner(c)) + fmt.Sprintf(format, args...), nil
		}
	}
	body := func(req func(*testing.T, caller) (string, any), b func() any) func(*testing.T, caller) (string, any) {
		return func(t *testing.T, c caller) (string, any) { p, _ := req(t, c); return p, b() }
	}
	courseBody := func() any { return map[string]any{"title": "Course", "course_key": "K-" + uniqueEmail()} }
	describe := func() any { return map[string]any{"description": "Edited " + uniqueEmail()} }
	classBody := func() any { return map[string]any{"name": "Class " + uniqueEmail()} }
	// Partner routes. The partner of A and admins, through A's record;
	// anyone else 403 (decisions.md: "anyone else gets 403 whether or not
	// the partner exists").
	aOK := func(status int) expect { return seven(403, 403, status, 403, 403, 403, status) }
	// Through the caller's own record: the assistant's is an active partner
	// record of A (the rule names no role); the inactive partner's is not
	// active; B's partner reaches B (a list, a create) and gets 404 for A's
	// resources; the admin names a missing partner (404).
	ownOK := func(status, partnerB int) expect { return seven(403, 403, status, status, 403, partnerB, 404) }
	// A's record naming B's course or class: 404 for those A's record
	// admits (decisions.md: "another organisation's course or class is 404").
	bRes := seven(403, 403, 404, 403, 403, 403, 404)
	enrollNew := func(partner func(caller) int64, class func() int64, extra map[string]any) func(*testing.T, caller) (string, any) {
		return func(t *testing.T, c caller) (string, any) {
			student := e.signUp(t)
			b := map[string]any{"class_id": class(), "student_id": student.ID}
			for k, v := range extra {
				b[k] = v
			}
			return fmt.Sprintf("/partner/%d/student/%d/enrollments", partner(c), student.ID), b
		}
	}
	fixed := func(id int64) func(caller) int64 { return func(caller) int64 { return id } }
	classOf := func(id int64) func() int64 { return func() int64 { return id } }
	inOrg := func(org func(caller) int64) func(*testing.T, caller, response) { return onlyOwn("org_id", org) }
	ownOrg := func(c caller) int64 {
		if c == partnerBCaller {
			return w.orgB
		}
		return w.orgA
	}

	// A fresh active enrollment of the student in class A2 to drop (the
	// previous one, if a refused caller left it active).
	dropTarget := func(t *testing.T, _ caller) (string, any) {
		res := e.do(t, "POST", fmt.Sprintf("/partner/%d/student/%d/enrollments", w.partnerA, w.users[studentCaller].ID),
			map[string]any{"class_id": w.classA2, "student_id": w.users[studentCaller].ID}, w.tokens[partnerACaller])
		switch res.Status {
		case http.StatusCreated:
			w.dropping = num(t, res, "id")
		case http.StatusConflict: // still active: a refused caller left it
		default:
			t.Fatalf("%s: want 201 or 409", res)
		}
		return fmt.Sprintf("/user/class/enrollments/%d", w.dropping), nil
	}
	pending := func(decision string, b func() any) func(*testing.T, caller) (string, any) {
		return func(t *testing.T, _ caller) (string, any) {
			// A new asker each time: a user files five requests at once.
			id := e.requestPromotion(t, e.signUp(t), "Org "+uniqueEmail())
			return fmt.Sprintf("/admin/partner-promotion-requests/%d/%s", id, decision), b()
		}
	}
	userlessPartner := func(t *testing.T, _ caller) (string, any) {
		res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", w.orgA),
			map[string]any{"org_id": w.orgA, "full_name": "Guest", "email": uniqueEmail()}, w.tokens[adminCaller])
		wantStatus(t, res, http.StatusCreated)
		return fmt.Sprintf("/admin/partners/%d/erase", num(t, res, "id")), nil
	}
	// Public operations: each request brings what it spends.
	freshCode := func(t *testing.T, _ caller) (string, any) {
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		return "/user/email/verify-code", map[string]any{"email": email, "code": code, "verification_token": token}
	}
	freshSignUp := func(t *testing.T, _ caller) (string, any) {
		email := uniqueEmail()
		return "/user/signup", map[string]any{"email": email, "password": "correct horse battery", "name": "New",
			"email_verified_token": e.verifiedToken(t, email)}
	}
	freshRefresh := func(path string) func(*testing.T, caller) (string, any) {
		return func(t *testing.T, _ caller) (string, any) {
			res := login(t, e, w.login.Email, w.login.Password)
			wantStatus(t, res, http.StatusOK)
			return path, map[string]any{"refresh_token": str(t, res, "refresh_token")}
		}
	}

	return []authzRow{
		// Identity.
		{op: "send_email_code", target: "a new address", req: withBody("/user/email/send-code", func() any {
			return map[string]any{"email": uniqueEmail()}
		}), want: everyone(200)},
		{op: "verify_email_code", target: "a fresh code", req: freshCode, want: everyone(200)},
		{op: "sign_up", target: "a verified address", req: freshSignUp, want: everyone(201)},
		{op: "login", target: "an account", req: withBody("/user/login", func() any {
			return map[string]any{"email": w.login.Email, "password": w.login.Password}
		}), want: everyone(200)},
		{op: "refresh_token", target: "a fresh refresh token", req: freshRefresh("/user/token/refresh"), want: everyone(200)},
		{op: "logout", target: "a fresh refresh token", req: freshRefresh("/user/logout"), want: everyone(204)},
		{op: "who_am_i", target: "self", req: at("/user/me"), want: everyone(200),
			check: func(t *testing.T, c caller, res response) {
				if got := num(t, res, "id"); got != w.userID(c) {
					t.Errorf("LEAK: /user/me as %s is user %d, want %d", callerNames[c], got, w.userID(c))
				}
			}},
		{op: "change_password", target: "self", req: func(_ *testing.T, c caller) (string, any) {
			pw := w.users[c].Password
			if pw == "" {
				pw = "correct horse battery"
			}
			return "/user/me/password", map[string]any{"current_password": pw, "new_password": pw}
		}, want: everyone(204)},

		// Agents.
		{op: "create_agent", target: "self", req: withBody("/agents", func() any {
			return map[string]any{"name": "Tutor", "system_prompt": "Be kind"}
		}), want: everyone(201)},
		{op: "create_agent", target: "the owner's Idempotency-Key and body", req: keyed("create_agent"), headers: ownerKey("create_agent"),
			want: everyone(201), check: notReplayed("owner_id", w.userID)},
		{op: "list_agents", target: "self", req: at("/agents"), want: everyone(200), check: onlyOwn("owner_id", w.userID)},
		{op: "get_agent", target: "own", req: own("/agents/%d", agent), want: everyone(200)},
		{op: "get_agent", target: "another user's", req: at("/agents/%d", w.theirs.agent), want: everyone(404)},
		{op: "update_agent", target: "own", req: ownWith("/agents/%d", agent, agentBody), want: everyone(200)},
		{op: "update_agent", target: "another user's", req: withBody(fmt.Sprintf("/agents/%d", w.theirs.agent), agentBody), want: everyone(404)},

		// Few-shot examples.
		{op: "create_few_shot_example", target: "self", req: withBody(fewShotsPath, func() any {
			return map[string]any{"input_text": "3+3", "output_text": "6"}
		}), want: everyone(201)},
		{op: "list_few_shot_examples", target: "self", req: at(fewShotsPath), want: everyone(200), check: onlyOwn("user_id", w.userID)},
		{op: "get_few_shot_example", target: "own", req: own(fewShotsPath+"/%d", example), want: everyone(200)},
		{op: "get_few_shot_example", target: "another user's", req: at(fewShotsPath+"/%d", w.theirs.example), want: everyone(404)},
		{op: "update_few_shot_example", target: "own", req: ownWith(fewShotsPath+"/%d", example, exampleBody), want: everyone(200)},
		{op: "update_few_shot_example", target: "another user's", req: withBody(fmt.Sprintf(fewShotsPath+"/%d", w.theirs.example), exampleBody),
			want: everyone(404)},

		// Knowledge documents.
		{op: "upload_document", target: "self", req: withBody(documentsPath, func() any {
			return map[string]any{"title": "More notes", "content": "Mitochondria make ATP."}
		}), want: everyone(201)},
		{op: "list_documents", target: "self", req: at(documentsPath), want: everyone(200), check: onlyOwn("user_id", w.userID)},
		{op: "get_document", target: "own", req: own(documentsPath+"/%d", document), want: everyone(200)},
		{op: "get_document", target: "another user's", req: at(documentsPath+"/%d", w.theirs.document), want: everyone(404)},
		{op: "get_knowledge_search_settings", target: "own", req: own(documentsPath+"/%d/settings/search", document), want: everyone(200)},
		{op: "get_knowledge_search_settings", target: "another user's", req: at(documentsPath+"/%d/settings/search", w.theirs.document),
			want: everyone(404)},
		{op: "update_knowledge_search_settings", target: "own", req: ownWith(documentsPath+"/%d/settings/search", document, settingsBody),
			want: everyone(200)},
		{op: "update_knowledge_search_settings", target: "another user's",
			req: withBody(fmt.Sprintf(documentsPath+"/%d/settings/search", w.theirs.document), settingsBody), want: everyone(404)},
		{op: "search_document", target: "own", req: ownWith(documentsPath+"/%d/search", document, searchBody), want: everyone(200)},
		{op: "search_document", target: "another user's", req: withBody(fmt.Sprintf(documentsPath+"/%d/search", w.theirs.document), searchBody),
			want: everyone(404)},
		{op: "reindex_document", target: "own", req: own(documentsPath+"/%d/reindex", document), want: everyone(202)},
		{op: "reindex_document", target: "another user's", req: at(documentsPath+"/%d/reindex", w.theirs.document), want: everyone(404)},
		{op: "get_reindex_job", target: "own", req: func(_ *testing.T, c caller) (string, any) {
			return fmt.Sprintf(documentsPath+"/%d/reindex/%d", w.own[c].document, w.own[c].job), nil
		}, want: everyone(200)},
		{op: "get_reindex_job", target: "another user's", req: at(documentsPath+"/%d/reindex/%d", w.theirs.document, w.theirs.job),
			want: everyone(404)},
		{op: "get_reindex_job", target: "own document, another user's job", req: func(_ *testing.T, c caller) (string, any) {
			return fmt.Sprintf(documentsPath+"/%d/reindex/%d", w.own[c].document, w.theirs.job), nil
		}, want: everyone(404)},

		// Models.
		{op: "list_models", target: "catalogue", req: at("/models"), want: everyone(200)},

		// Practice sessions (decisions.md "Practice sessions": an active
		// enrollment, an active partner or assistant of the class's
		// organisation, or an admin, else 403; missing class 404 first;
		// another user's agent 404 after the 403).
		{op: "run_practice_session", target: "class A", req: run(w.classA, nil), want: seven(403, 201, 201, 201, 403, 403, 201)},
		{op: "run_practice_session", target: "class A2 (the student is not enrolled there)", req: run(w.classA2, nil),
			want: seven(403, 403, 201, 201, 403, 403, 201)},
		{op: "run_practice_session", target: "class B", req: run(w.classB, nil), want: seven(403, 403, 403, 403, 403, 201, 201)},
		{op: "run_practice_session", target: "a missing class", req: run(missingPartner, nil), want: everyone(404)},
		{op: "run_practice_session", target: "class A, another user's agent", req: run(w.classA, map[string]any{"agent_id": w.theirs.agent}),
			want: seven(403, 404, 404, 404, 403, 403, 404)},
		{op: "run_practice_session", target: "class A, another user's few-shot example",
			req: run(w.classA, map[string]any{"few_shot_example_ids": []int64{w.theirs.example}}), want: seven(403, 422, 422, 422, 403, 403, 422)},
		{op: "run_practice_session", target: "class A, another user's document",
			req: run(w.classA, map[string]any{"knowledge_ids": []int64{w.theirs.document}}), want: seven(403, 422, 422, 422, 403, 403, 422)},
		{op: "run_practice_session", target: "class A, streamed", req: run(w.classA, nil), headers: sse,
			want: seven(403, 201, 201, 201, 403, 403, 201)},
		{op: "run_practice_session", target: "class A, the owner's Idempotency-Key and body", req: keyed("run_practice_session"), headers: ownerKey("run_practice_session"),
			want: seven(403, 201, 201, 201, 403, 403, 201), check: notReplayed("session_id", fixed(w.theirs.session))},
		// The plain user's and the inactive partner's own sessions are in a
		// class that dropped them: checked again on every chat.
		{op: "continue_practice_session", target: "own", req: ownWith("/user/practice/sessions/%d/chat", session, turnBody),
			want: seven(403, 200, 200, 200, 403, 200, 200)},
		{op: "continue_practice_session", target: "another user's",
			req: withBody(fmt.Sprintf("/user/practice/sessions/%d/chat", w.theirs.session), turnBody), want: everyone(404)},
		{op: "continue_practice_session", target: "another user's, streamed",
			req: withBody(fmt.Sprintf("/user/practice/sessions/%d/chat", w.theirs.session), turnBody), headers: sse, want: everyone(404)},
		{op: "continue_practice_session", target: "another user's, the owner's Idempotency-Key and body",
			req: keyed("continue_practice_session"), headers: ownerKey("continue_practice_session"), want: everyone(404)},
		{op: "update_session_settings", target: "own", req: ownWith("/user/practice/sessions/%d/settings", session, sessionSettings),
			want: everyone(200)},
		{op: "update_session_settings", target: "another user's",
			req: withBody(fmt.Sprintf("/user/practice/sessions/%d/settings", w.theirs.session), sessionSettings), want: everyone(404)},
		{op: "update_session_settings", target: "own, another user's few-shot example",
			req: ownWith("/user/practice/sessions/%d/settings", session, func() any {
				return map[string]any{"few_shot_example_ids": []int64{w.theirs.example}}
			}), want: everyone(422)},
		{op: "list_practice_sessions", target: "self", req: at("/user/practice/sessions"), want: everyone(200), check: onlyOwn("user_id", w.userID)},
		{op: "get_practice_session", target: "own", req: own("/user/practice/sessions/%d", session), want: everyone(200)},
		{op: "get_practice_session", target: "another user's", req: at("/user/practice/sessions/%d", w.theirs.session), want: everyone(404)},

		// Courses.
		{op: "create_course", target: "A's partner", req: body(aPartner("/course"), courseBody), want: aOK(201)},
		{op: "create_course", target: "own partner record", req: body(ownPartner("/course"), courseBody), want: ownOK(201, 201)},
		{op: "list_courses", target: "A's partner", req: aPartner("/course"), want: aOK(200), check: inOrg(fixed(w.orgA))},
		{op: "list_courses", target: "own partner record", req: ownPartner("/course"), want: ownOK(200, 200), check: inOrg(ownOrg)},
		{op: "get_course", target: "A's partner, A's course", req: aPartner("/course/%d", w.courseA), want: aOK(200)},
		{op: "get_course", target: "own partner record, A's course", req: ownPartner("/course/%d", w.courseA), want: ownOK(200, 404)},
		{op: "get_course", target: "A's partner, B's course", req: aPartner("/course/%d", w.courseB), want: bRes},
		{op: "update_course", target: "A's partner, A's course", req: body(aPartner("/course/%d", w.courseA), describe), want: aOK(200)},
		{op: "update_course", target: "own partner record, A's course", req: body(ownPartner("/course/%d", w.courseA), describe),
			want: ownOK(200, 404)},
		{op: "update_course", target: "A's partner, B's course", req: body(aPartner("/course/%d", w.courseB), describe), want: bRes},

		// Classes and invite codes.
		{op: "create_class", target: "A's partner", req: body(aPartner("/classes"), classBody), want: aOK(201)},
		{op: "create_class", target: "own partner record", req: body(ownPartner("/classes"), classBody), want: ownOK(201, 201)},
		{op: "create_class", target: "A's partner, B's course", req: body(aPartner("/classes?course_id=%d", w.courseB), classBody), want: bRes},
		{op: "list_classes", target: "A's partner", req: aPartner("/classes"), want: aOK(200), check: inOrg(fixed(w.orgA))},
		{op: "list_classes", target: "own partner record", req: ownPartner("/classes"), want: ownOK(200, 200), check: inOrg(ownOrg)},
		{op: "get_class", target: "A's partner, A's class", req: aPartner("/classes/%d", w.classA), want: aOK(200)},
		{op: "get_class", target: "own partner record, A's class", req: ownPartner("/classes/%d", w.classA), want: ownOK(200, 404)},
		{op: "get_class", target: "A's partner, B's class", req: aPartner("/classes/%d", w.classB), want: bRes},
		{op: "update_class", target: "A's partner, A's class", req: body(aPartner("/classes/%d", w.classA), describe), want: aOK(200)},
		{op: "update_class", target: "own partner record, A's class", req: body(ownPartner("/classes/%d", w.classA), describe),
			want: ownOK(200, 404)},
		{op: "update_class", target: "A's partner, B's class", req: body(aPartner("/classes/%d", w.classB), describe), want: bRes},
		{op: "update_class", target: "A's partner, A's class moved to B's course",
			req: body(aPartner("/classes/%d", w.classA), func() any { return map[string]any{"course_id": w.courseB} }), want: bRes},
		{op: "revoke_invite_code", target: "A's partner, A's code",
			req: aPartner("/classes/%d/invite-codes/%d/revoke", w.classA, w.assistantCodeA), want: aOK(200)},
		{op: "revoke_invite_code", target: "own partner record, A's code",
			req: ownPartner("/classes/%d/invite-codes/%d/revoke", w.classA, w.assistantCodeA), want: ownOK(200, 404)},
		{op: "revoke_invite_code", target: "A's partner, B's code",
			req: aPartner("/classes/%d/invite-codes/%d/revoke", w.classB, w.assistantCodeB), want: bRes},
		{op: "revoke_invite_code", target: "A's partner, A's class, B's code",
			req: aPartner("/classes/%d/invite-codes/%d/revoke", w.classA, w.assistantCodeB), want: bRes},

		// Enrollments.
		{op: "list_class_enrollments", target: "A's partner, A's class", req: aPartner("/classes/%d/enrollments", w.classA), want: aOK(200),
			check: onlyOwn("class_id", fixed(w.classA))},
		{op: "list_class_enrollments", target: "own partner record, A's class", req: ownPartner("/classes/%d/enrollments", w.classA),
			want: ownOK(200, 404), check: onlyOwn("class_id", fixed(w.classA))},
		{op: "list_class_enrollments", target: "A's partner, B's class", req: aPartner("/classes/%d/enrollments", w.classB), want: bRes},
		{op: "enroll_student", target: "A's partner, A's class", req: enrollNew(fixed(w.partnerA), classOf(w.classA), nil), want: aOK(201)},
		{op: "enroll_student", target: "own partner record, A's class", req: enrollNew(w.ownPartner, classOf(w.classA), nil),
			want: ownOK(201, 404)},
		{op: "enroll_student", target: "A's partner, B's class", req: enrollNew(fixed(w.partnerA), classOf(w.classB), nil), want: bRes},
		// decisions.md: an invite_code_id "must be a code of the class (422 otherwise)".
		{op: "enroll_student", target: "A's partner, A's class, B's invite code",
			req:  enrollNew(fixed(w.partnerA), classOf(w.classA), map[string]any{"invite_code_id": w.studentCode}),
			want: seven(403, 403, 422, 403, 403, 403, 422)},
		{op: "list_my_enrollments", target: "self", req: at("/user/class/enrollments"), want: everyone(200), check: onlyOwn("student_id", w.userID)},
		// decisions.md: "Dropping is allowed to the student, an active
		// partner of the class's organisation, or an admin; anyone else gets 404".
		{op: "drop_enrollment", target: "the student's enrollment in A", req: dropTarget, want: seven(404, 204, 204, 204, 404, 404, 204)},
		{op: "drop_enrollment", target: "another student's enrollment in A", req: func(t *testing.T, _ caller) (string, any) {
			u := e.signUp(t)
			res := e.do(t, "POST", fmt.Sprintf("/partner/%d/student/%d/enrollments", w.partnerA, u.ID),
				map[string]any{"class_id": w.classA2, "student_id": u.ID}, w.tokens[partnerACaller])
			wantStatus(t, res, http.StatusCreated)
			return enrollmentPath(t, res), nil
		}, want: seven(404, 404, 204, 204, 404, 404, 204)},
		{op: "drop_enrollment", target: "a missing enrollment", req: at("/user/class/enrollments/9000000000000"), want: everyone(404)},
		{op: "join_class", target: "class A3's student code", req: withBody("/user/class/join", func() any {
			return map[string]any{"code": w.joinCode}
		}), want: everyone(201)},

		// Organisations, partners, promotion requests.
		{op: "create_organization", target: "new", req: withBody("/admin/organizations", func() any {
			return map[string]any{"name": "Org " + uniqueEmail()}
		}), want: adminOnly(201)},
		{op: "list_organizations", target: "all", req: at("/admin/organizations"), want: adminOnly(200)},
		{op: "create_partner", target: "organisation A", req: withBody(fmt.Sprintf("/partner/partners?org_id=%d", w.orgA), func() any {
			return map[string]any{"org_id": w.orgA, "full_name": "Helper", "email": uniqueEmail()}
		}), want: adminOnly(201)},
		{op: "request_partner_promotion", target: "self", req: withBody("/user/partner-promotion-requests", func() any {
			return map[string]any{"name": "Me", "email": "me@example.com", "org_name": "Org " + uniqueEmail()}
		}), want: everyone(201), check: func(t *testing.T, c caller, res response) {
			// security.md: "the request records the requester's own e-mail".
			if got := str(t, res, "email"); !strings.EqualFold(got, w.users[c].Email) || num(t, res, "user_id") != w.userID(c) {
				t.Errorf("the promotion request of %s records %s, user %d", callerNames[c], got, num(t, res, "user_id"))
			}
		}},
		{op: "list_promotion_requests", target: "all", req: at("/admin/partner-promotion-requests"), want: adminOnly(200)},
		{op: "approve_promotion_request", target: "a pending request", req: pending("approve", func() any {
			return map[string]any{"organization": "new"}
		}), want: adminOnly(200)},
		{op: "approve_promotion_request", target: "a missing request", req: withBody("/admin/partner-promotion-requests/9000000000000/approve",
			func() any { return map[string]any{"organization": "new"} }), want: adminOnly(404)},
		{op: "reject_promotion_request", target: "a pending request", req: pending("reject", func() any { return map[string]any{} }),
			want: adminOnly(200)},
		{op: "reject_promotion_request", target: "a missing request", req: withBody("/admin/partner-promotion-requests/9000000000000/reject",
			func() any { return map[string]any{} }), want: adminOnly(404)},

		// The event history.
		{op: "list_events", target: "the log", req: at("/admin/events?limit=5"), want: adminOnly(200)},
		{op: "list_stream_events", target: "another user's stream", req: at("/admin/events/streams/user-%d?limit=5", w.owner.ID),
			want: adminOnly(200)},

		// Personal data.
		{op: "export_my_data", target: "self", req: at("/user/me/export"), want: everyone(200),
			check: func(t *testing.T, c caller, res response) {
				u, _ := field(t, res, "user").(map[string]any)
				if got := idIn(t, u, "id"); got != w.userID(c) {
					t.Errorf("LEAK: the export of %s is user %d's", callerNames[c], got)
				}
				// Every row of the export is the caller's.
				for list, owner := range map[string]string{"agents": "owner_id", "few_shot_examples": "user_id",
					"practice_sessions": "user_id", "enrollments": "student_id", "partner_records": "user_id",
					"promotion_requests": "user_id", "knowledge_documents": "document.user_id"} {
					rows, _ := field(t, res, list).([]any)
					for _, row := range rows {
						m := row.(map[string]any)
						name := owner
						if inner, rest, ok := strings.Cut(owner, "."); ok {
							m, name = m[inner].(map[string]any), rest
						}
						if got := idIn(t, m, name); got != w.userID(c) {
							t.Errorf("LEAK: the export of %s holds %s of user %d: %v", callerNames[c], list, got, row)
						}
					}
				}
			}},
		{op: "erase_user", target: "another user", req: func(t *testing.T, _ caller) (string, any) {
			return fmt.Sprintf("/admin/users/%d/erase", e.signUp(t).ID), nil
		}, want: adminOnly(204)},
		{op: "erase_user", target: "a missing user", req: at("/admin/users/9000000000000/erase"), want: adminOnly(404)},
		{op: "erase_partner", target: "a partner without an account", req: userlessPartner, want: adminOnly(204)},
		{op: "erase_partner", target: "partner A (it has an account)", req: at("/admin/partners/%d/erase", w.partnerA), want: adminOnly(409)},
		{op: "erase_partner", target: "a missing partner", req: at("/admin/partners/%d/erase", int64(missingPartner)), want: adminOnly(404)},
		// Last: every caller erases itself.
		{op: "erase_me", target: "self", req: func(_ *testing.T, c caller) (string, any) {
			pw := w.users[c].Password
			if pw == "" {
				pw = "correct horse battery"
			}
			return "/user/me", map[string]any{"password": pw}
		}, want: everyone(204), check: func(t *testing.T, c caller, _ response) {
			if res := e.do(t, "GET", "/user/me", nil, w.token(c)); res.Status != http.StatusUnauthorized {
				t.Errorf("%s's token after erase_me: %s, want 401", callerNames[c], res)
			}
		}},
	}
}
