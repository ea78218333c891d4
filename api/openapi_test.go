package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The router and the document list the same operations.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)

	var routed []string
	err := chi.Walk(e.svc.Handler.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !notInDocument(route) {
			routed = append(routed, method+" "+route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range e.doc.Paths {
		for method := range item {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(routed)
	slices.Sort(documented)
	if diff := cmp.Diff(routed, documented); diff != "" {
		t.Errorf("operations (-router +document):\n%s", diff)
	}
	if len(documented) == 0 {
		t.Error("the document lists no operation")
	}
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	res := e.send(t, "GET", "/openapi.json", nil, "")
	wantStatus(t, res, http.StatusOK)
	wantHeader(t, res, "Content-Type", "application/json")
	if e.doc.OpenAPI != "3.1.0" {
		t.Errorf(`"openapi" is %q, want "3.1.0"`, e.doc.OpenAPI)
	}

	for path, item := range e.doc.Paths {
		for method, op := range item {
			name := strings.ToUpper(method) + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", name)
			}
			has := func(status string) bool { _, ok := op.Responses[status]; return ok }
			if len(op.Security) > 0 && !has("401") {
				t.Errorf("%s needs a token but does not document 401", name)
			}
			if op.RequestBody != nil && (!has("422") || !has("413")) {
				t.Errorf("%s takes a body but does not document both 422 and 413", name)
			}
			for _, p := range op.Parameters {
				if p.In == "path" && !strings.Contains(path, "{"+p.Name+"}") {
					t.Errorf("%s documents path parameter %q that is not in its path", name, p.Name)
				}
			}
			// Every response schema resolves and compiles (a streamed
			// turn's: those of its events, checked in stream_test.go).
			for status, r := range op.Responses {
				for media := range r.Content {
					if media == "text/event-stream" && (op.OperationID == "run_practice_session" || op.OperationID == "continue_practice_session") {
						continue
					}
					if media != "application/json" {
						t.Errorf("%s %s: media type %q, want application/json", name, status, media)
						continue
					}
					ptr := "#/paths/" + escapePointer(path) + "/" + method + "/responses/" + status + "/content/application~1json/schema"
					if _, err := e.doc.schema(ptr); err != nil {
						t.Errorf("%s %s: the schema does not compile: %v", name, status, err)
					}
				}
			}
		}
	}
}

// The harness's schema check is not vacuous: it rejects bodies that break
// the document.
func TestHarnessRejectsWrongBodies(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, tc := range []struct{ schema, body string }{
		{"#/components/schemas/ErrorDetail", `{"detail": 5}`},
		{"#/components/schemas/ErrorDetail", `{}`},
		{"#/components/schemas/Agent", `{"agent_id": 1}`},
		{"#/components/schemas/Agent", `{"agent_id":1,"owner_id":1,"name":"a","system_prompt":"p","role_description":null,"template_source":null,"is_active":true,"created_at":"yesterday","updated_at":"2026-01-01T00:00:00.000000Z"}`},
		{"#/paths/~1agents/get/responses/200/content/application~1json/schema", `{"items":[],"total":"1","page":1,"size":50}`},
	} {
		s, err := e.doc.schema(tc.schema)
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if s.Validate(inst) == nil {
			t.Errorf("%s accepts %s", tc.schema, tc.body)
		}
	}
}

var assetRef = regexp.MustCompile(`(?i)<(?:script|link|img)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']`)

// The docs page works offline: its scripts and styles come from the service.
func TestDocsPageWorksOffline(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, path := range []string{"/docs", "/docs/"} {
		res := e.send(t, "GET", path, nil, "")
		wantStatus(t, res, http.StatusOK)
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type %q, want text/html", path, ct)
		}
		if !bytes.Contains(res.Body, []byte("/openapi.json")) {
			t.Errorf("GET %s: the page does not load /openapi.json", path)
		}
		refs := assetRef.FindAllSubmatch(res.Body, -1)
		if len(refs) == 0 {
			t.Fatalf("GET %s: the page loads no script or style: %s", path, res.Body)
		}
		for _, m := range refs {
			ref := string(m[1])
			u, err := url.Parse(ref)
			if err != nil {
				t.Errorf("GET %s: bad asset URL %q", path, ref)
				continue
			}
			if u.Host != "" || u.Scheme != "" {
				t.Errorf("GET %s: the page loads %s from another host; it must work offline", path, ref)
				continue
			}
			asset := e.send(t, "GET", (&url.URL{Path: "/docs/"}).ResolveReference(u).String(), nil, "")
			if asset.Status != http.StatusOK || len(asset.Body) == 0 {
				t.Errorf("GET %s: its asset %s answers %d with %d bytes", path, ref, asset.Status, len(asset.Body))
			}
		}
	}
}

// min_score (seed 2.11) is a decimal string in a response and a number or
// such a string in a request: the two schemas agree, so a generated client
// can send back the value it read.
func TestOpenAPIMinScoreRoundTrips(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	const path = "#/paths/~1user~1document~1{knowledge_id}~1settings~1search/patch"
	request := path + "/requestBody/content/application~1json/schema/properties/min_score"
	response := "#/components/schemas/KnowledgeSearchSettings/properties/min_score"
	check := func(pointer, value string, want bool) {
		t.Helper()
		s, err := e.doc.schema(pointer)
		if err != nil {
			t.Fatalf("%s: %v", pointer, err)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(value))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Validate(inst) == nil; got != want {
			t.Errorf("%s accepts %s: %v, want %v", pointer, value, got, want)
		}
	}
	for value, want := range map[string]bool{
		`0.25`: true, `0`: true, `1`: true, `"0.25"`: true, `".5"`: true, `"1"`: true, `null`: true,
		`1.5`: false, `-0.1`: false, `"abc"`: false, `""`: false, `"."`: false, `true`: false, `[]`: false,
	} {
		check(request, value, want)
	}
	for value, want := range map[string]bool{`"0.25"`: true, `"0.0"`: true, `0.25`: false, `null`: false, `"x"`: false} {
		check(response, value, want)
	}

	// What the service answers fits both.
	u := e.signUp(t)
	id := num(t, e.uploadDocument(t, u.Access, "Notes", cellText), "knowledge_id")
	res := e.do(t, "PATCH", documentPath(id)+"/settings/search", map[string]any{"min_score": 0.125}, u.Access)
	wantStatus(t, res, http.StatusOK)
	sent := strconv.Quote(str(t, res, "min_score"))
	check(response, sent, true)
	check(request, sent, true)
	wantStatus(t, e.do(t, "PATCH", documentPath(id)+"/settings/search", map[string]any{"min_score": str(t, res, "min_score")}, u.Access),
		http.StatusOK)
}

// headerDoc is the document as far as its response headers go.
type headerDoc struct {
	Paths map[string]map[string]struct {
		OperationID string `json:"operationId"`
		Security    []any  `json:"security"`
		Parameters  []struct {
			Name string `json:"name"`
			In   string `json:"in"`
		} `json:"parameters"`
		Responses map[string]struct {
			Headers map[string]struct {
				Ref string `json:"$ref"`
			} `json:"headers"`
		} `json:"responses"`
	} `json:"paths"`
	Components struct {
		Headers map[string]struct {
			Description string         `json:"description"`
			Schema      map[string]any `json:"schema"`
		} `json:"headers"`
	} `json:"components"`
}

// locatedOperations are the operations whose 201 says in Location where the
// created resource is read: those whose resource has a GET of its own.
var locatedOperations = []string{
	"create_agent", "create_class", "create_course", "create_few_shot_example", "run_practice_session", "upload_document",
}

// The document declares the headers generated clients need: X-Request-ID on
// every response; X-Projection-Pending on every authenticated success, and
// X-Event-Position on those of writes; Retry-After on 429 and 503; Location
// on the 201s of locatedOperations, and nowhere else.
func TestOpenAPIDeclaresHeaders(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	var doc headerDoc
	if err := json.Unmarshal(e.doc.raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"X-Request-ID", "X-Event-Position", "X-Projection-Pending", "Retry-After", "Location", "Idempotent-Replayed"} {
		h, ok := doc.Components.Headers[name]
		if !ok || h.Description == "" || h.Schema["type"] == nil {
			t.Errorf("components.headers.%s: %+v, want a description and a schema", name, h)
		}
	}

	var located []string
	var authWrites, retries int
	idempotent := map[string]bool{}
	for _, item := range doc.Paths {
		for _, op := range item {
			for _, p := range op.Parameters {
				if p.In == "header" && p.Name == "Idempotency-Key" {
					idempotent[op.OperationID] = true
				}
			}
		}
	}
	if len(idempotent) == 0 {
		t.Error("no operation takes an Idempotency-Key: the check of Idempotent-Replayed sees nothing")
	}
	for path, item := range doc.Paths {
		for method, op := range item {
			name := strings.ToUpper(method) + " " + path
			auth := len(op.Security) > 0
			for status, r := range op.Responses {
				code, err := strconv.Atoi(status)
				if err != nil {
					t.Errorf("%s: status %q", name, status)
					continue
				}
				declares := func(header string) bool {
					h, ok := r.Headers[header]
					if ok && h.Ref != "#/components/headers/"+header {
						t.Errorf("%s %s: header %s refers to %q, want its component", name, status, header, h.Ref)
					}
					return ok
				}
				// Sign-up is the one public write that answers with its
				// position (TestSignUpDeclaresItsPosition sees it sent).
				positioned := auth || op.OperationID == "sign_up"
				want := map[string]bool{
					"X-Request-ID":         true,
					"X-Projection-Pending": positioned && code < 300,
					"X-Event-Position":     positioned && code < 300 && method != "get",
					"Retry-After":          code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable,
					// The stored first answer a retry with the key gets says so.
					"Idempotent-Replayed": code < 300 && idempotent[op.OperationID],
				}
				for header, w := range want {
					if w && !declares(header) {
						t.Errorf("%s %s does not declare %s", name, status, header)
					}
				}
				if !want["Retry-After"] && declares("Retry-After") {
					t.Errorf("%s %s declares Retry-After, which only a 429 or 503 sends", name, status)
				}
				if want["X-Event-Position"] {
					authWrites++
				}
				if want["Retry-After"] {
					retries++
				}
				if declares("Location") {
					if code != http.StatusCreated {
						t.Errorf("%s %s declares Location, which only a 201 sends", name, status)
					}
					located = append(located, op.OperationID)
				}
			}
		}
	}
	if authWrites == 0 || retries == 0 {
		t.Errorf("%d authenticated writes and %d 429 or 503 answers: the check saw nothing", authWrites, retries)
	}
	slices.Sort(located)
	if diff := cmp.Diff(locatedOperations, located); diff != "" {
		t.Errorf("operations declaring Location (-want +got):\n%s", diff)
	}
}

// declaredHeaders are the header names the served document declares for one
// operation's response of status.
func declaredHeaders(t *testing.T, e *env, path, method string, status int) map[string]bool {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(e.doc.raw, &doc); err != nil {
		t.Fatal(err)
	}
	op, ok := doc.Paths[path][strings.ToLower(method)]
	if !ok {
		t.Fatalf("%s %s is not in the document", method, path)
	}
	r, ok := op.Responses[strconv.Itoa(status)]
	if !ok {
		t.Fatalf("%s %s: status %d is not in the document", method, path, status)
	}
	out := map[string]bool{}
	for name := range r.Headers {
		out[strings.ToLower(name)] = true
	}
	return out
}

// A generated client sees only the headers the document declares. Sign-up is
// a public write that answers with X-Event-Position (the position a client
// sends as X-Min-Position to read its new account elsewhere): the document
// declares it there too.
func TestSignUpDeclaresItsPosition(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	email := uniqueEmail()
	verified := e.verifiedToken(t, email)
	res := e.do(t, "POST", "/user/signup", map[string]string{
		"email": email, "password": "correct horse battery", "name": "Ada", "email_verified_token": verified,
	}, "")
	wantStatus(t, res, http.StatusCreated)
	declared := declaredHeaders(t, e, "/user/signup", "POST", http.StatusCreated)
	for _, h := range []string{"X-Event-Position", "X-Projection-Pending", "Location", "Retry-After"} {
		if res.Header.Get(h) != "" && !declared[strings.ToLower(h)] {
			t.Errorf("POST /user/signup 201 sends %s: %q, which the OpenAPI document does not declare (declared: %v)",
				h, res.Header.Get(h), declared)
		}
	}
}

// A replayed Idempotency-Key answer says so in Idempotent-Replayed (CORS
// exposes it to pages), which the document declares.
func TestIdempotentReplayIsDeclared(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	body := map[string]any{"name": "Tutor", "system_prompt": "p"}
	first := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", "declared-replay-1")
	wantStatus(t, first, http.StatusCreated)
	again := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", "declared-replay-1")
	wantStatus(t, again, http.StatusCreated)
	if again.Header.Get("Idempotent-Replayed") == "" {
		t.Fatalf("%s: no Idempotent-Replayed header on the replay", again)
	}
	if declared := declaredHeaders(t, e, "/agents", "POST", http.StatusCreated); !declared["idempotent-replayed"] {
		t.Errorf("POST /agents 201 sends Idempotent-Replayed on a replay, which the OpenAPI document does not declare (declared: %v)", declared)
	}
}

// Every authenticated read the document gives X-Min-Position and a 400 for
// it refuses an unreadable one so, whatever it reads (the catalogue and the
// event log too, which have nothing to wait for), before its parameters
// are looked at.
func TestEveryReadRefusesAnUnreadableMinPosition(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	seen := 0
	for path, item := range e.doc.Paths {
		op, ok := item["get"]
		if !ok || len(op.Security) == 0 || notInDocument(path) {
			continue
		}
		declared := false
		for _, p := range op.Parameters {
			declared = declared || p.In == "header" && p.Name == "X-Min-Position"
		}
		if _, ok := op.Responses["400"]; !declared || !ok {
			t.Errorf("GET %s does not declare X-Min-Position and its 400", path)
			continue
		}
		seen++
		concrete := regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "1")
		wantDetail(t, e.do(t, "GET", concrete, nil, admin.Access, "X-Min-Position", "yesterday"), http.StatusBadRequest,
			"Invalid X-Min-Position header")
	}
	if seen < 10 {
		t.Errorf("%d authenticated reads checked: the document was not read", seen)
	}
}
