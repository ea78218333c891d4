package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/eventstore"
)

// createAgent creates an agent and returns the response.
func (e *env) createAgent(t testing.TB, token string, body any) response {
	t.Helper()
	res := e.do(t, "POST", "/agents", body, token)
	wantStatus(t, res, http.StatusCreated)
	return res
}

func agentPath(res response, t testing.TB) string {
	t.Helper()
	return "/agents/" + strconv.FormatInt(num(t, res, "agent_id"), 10)
}

// agentEvents reads an agent's stream from the event store.
func (e *env) agentEvents(t testing.TB, id int64) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := e.events(t).ReadStream(context.Background(), eventstore.StreamName("agent", id), eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestCreateAgent(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	res := e.do(t, "POST", "/agents", map[string]any{
		"name": "Socratic tutor", "system_prompt": "Ask, never tell.", "role_description": "tutor",
		"template_source": "socratic-v1", "is_active": false, "owner_id": 999,
	}, u.Access)
	wantStatus(t, res, http.StatusCreated)
	if res.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: no X-Event-Position header", res)
	}
	if p := res.Header.Get("X-Projection-Pending"); p != "" {
		t.Errorf("%s: X-Projection-Pending %q: the read model did not catch up", res, p)
	}
	id := num(t, res, "agent_id")
	if id < 1 {
		t.Errorf("agent_id is %d, want >= 1", id)
	}
	createdAt := timestamp(t, res, "created_at")
	if updatedAt := timestamp(t, res, "updated_at"); !updatedAt.Equal(createdAt) {
		t.Errorf("updated_at %s, want created_at %s", updatedAt, createdAt)
	}
	if age := time.Since(createdAt); age < 0 || age > time.Minute {
		t.Errorf("created_at %s is not now", createdAt)
	}
	want := fmt.Sprintf(`{"agent_id":%d,"owner_id":%d,"name":"Socratic tutor","system_prompt":"Ask, never tell.",`+
		`"role_description":"tutor","template_source":"socratic-v1","is_active":false,"created_at":%q,"updated_at":%q}`,
		id, u.ID, createdAt.Format(wireTime), createdAt.Format(wireTime))
	wantBody(t, res, http.StatusCreated, want)

	// Read-your-writes: the reads show it at once.
	wantBody(t, e.do(t, "GET", "/agents/"+strconv.FormatInt(id, 10), nil, u.Access), http.StatusOK, want)
	wantBody(t, e.do(t, "GET", "/agents", nil, u.Access), http.StatusOK,
		`{"items":[`+want+`],"total":1,"page":1,"size":50}`)
}

func TestCreateAgentDefaults(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	for _, tc := range []struct {
		name   string
		body   string
		active bool
	}{
		{"is_active omitted", `{"name":"a","system_prompt":"p"}`, true},
		{`is_active "yes"`, `{"name":"a","system_prompt":"p","is_active":"yes"}`, true},
		{`is_active "off"`, `{"name":"a","system_prompt":"p","is_active":"off"}`, false},
		{"is_active 0", `{"name":"a","system_prompt":"p","is_active":0}`, false},
		{"unknown fields ignored", `{"name":"a","system_prompt":"p","colour":"red"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.createAgent(t, u.Access, tc.body)
			for _, f := range []string{"role_description", "template_source"} {
				if v := field(t, res, f); v != nil {
					t.Errorf("%s is %v, want null", f, v)
				}
			}
			if got := field(t, res, "is_active"); got != tc.active {
				t.Errorf("is_active is %v, want %v", got, tc.active)
			}
			if got := field(t, res, "owner_id"); fmt.Sprint(got) != strconv.FormatInt(u.ID, 10) {
				t.Errorf("owner_id is %v, want %d", got, u.ID)
			}
		})
	}
}

func TestCreateAgentValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	long := strings.Repeat("x", 201)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"name missing", `{"system_prompt":"p"}`,
			`{"detail":[{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"system_prompt":"p"}}]}`},
		{"system_prompt missing", `{"name":"a"}`,
			`{"detail":[{"type":"missing","loc":["body","system_prompt"],"msg":"Field required","input":{"name":"a"}}]}`},
		{"name not a string", `{"name":5,"system_prompt":"p"}`,
			`{"detail":[{"type":"string_type","loc":["body","name"],"msg":"Input should be a valid string","input":5}]}`},
		{"system_prompt not a string", `{"name":"a","system_prompt":1.5}`,
			`{"detail":[{"type":"string_type","loc":["body","system_prompt"],"msg":"Input should be a valid string","input":1.5}]}`},
		{"role_description not a string", `{"name":"a","role_description":["r"],"system_prompt":"p"}`,
			`{"detail":[{"type":"string_type","loc":["body","role_description"],"msg":"Input should be a valid string","input":["r"]}]}`},
		{"name too long", `{"name":"` + long + `","system_prompt":"p"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","name"],"msg":"String should have at most 200 characters","input":"` + long + `","ctx":{"max_length":200}}]}`},
		{"name empty", `{"name":"","system_prompt":"p"}`,
			`{"detail":[{"type":"string_too_short","loc":["body","name"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}]}`},
		{`is_active "maybe"`, `{"is_active":"maybe","name":"a","system_prompt":"p"}`,
			`{"detail":[{"type":"bool_parsing","loc":["body","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
		{"is_active 2", `{"is_active":2,"name":"a","system_prompt":"p"}`,
			`{"detail":[{"type":"bool_parsing","loc":["body","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":2}]}`},
		{"is_active an object", `{"is_active":{},"name":"a","system_prompt":"p"}`,
			`{"detail":[{"type":"bool_type","loc":["body","is_active"],"msg":"Input should be a valid boolean","input":{}}]}`},
		{"body not JSON", `{"name": `,
			`{"detail":[{"type":"json_invalid","loc":["body",9],"msg":"JSON decode error","input":{},"ctx":{"error":"Expecting value"}}]}`},
		{"body not JSON, offset in characters", `{"name":"é" x}`,
			`{"detail":[{"type":"json_invalid","loc":["body",12],"msg":"JSON decode error","input":{},"ctx":{"error":"Expecting ',' delimiter"}}]}`},
		{"body a list", `[1,2]`,
			`{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":[1,2]}]}`},
		{"body a string", `"agent"`,
			`{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":"agent"}]}`},
		{"body empty", ``,
			`{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`},
		{"body null", `null`,
			`{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`},
		{"every error at once, in schema order", `{"is_active":"maybe","name":5}`,
			`{"detail":[` +
				`{"type":"string_type","loc":["body","name"],"msg":"Input should be a valid string","input":5},` +
				`{"type":"missing","loc":["body","system_prompt"],"msg":"Field required","input":{"is_active":"maybe","name":5}},` +
				`{"type":"bool_parsing","loc":["body","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(t, "POST", "/agents", tc.body, u.Access)
			wantBody(t, res, http.StatusUnprocessableEntity, tc.want)
		})
	}
	// Nothing was created.
	wantBody(t, e.do(t, "GET", "/agents", nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

// A missing field's input is the body as sent: Python keeps a JSON object's
// key order, so FastAPI echoes the keys in the order the client sent them.
func TestValidationEchoesBodyInRequestOrder(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	res := e.do(t, "POST", "/agents", `{"system_prompt":"p","is_active":true}`, u.Access)
	wantBody(t, res, http.StatusUnprocessableEntity,
		`{"detail":[{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"system_prompt":"p","is_active":true}}]}`)
}

// A blank name is a business rule: a value_error at the field.
func TestCreateAgentBlankName(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	res := e.do(t, "POST", "/agents", `{"name":"   ","system_prompt":"p"}`, u.Access)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	items, _ := field(t, res, "detail").([]any)
	if len(items) != 1 {
		t.Fatalf("%s: want one error", res)
	}
	item, _ := items[0].(map[string]any)
	delete(item, "ctx") // FastAPI's ctx for a validator's ValueError is not settled by the design
	want := map[string]any{"type": "value_error", "loc": []any{"body", "name"}, "msg": "Value error, name must not be blank", "input": "   "}
	if diff := cmp.Diff(want, item); diff != "" {
		t.Errorf("error item (-want +got):\n%s", diff)
	}
}

func TestAgentPathValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	const (
		intParsing = `{"type":"int_parsing","loc":["path","agent_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}`
		geOne      = `{"type":"greater_than_equal","loc":["path","agent_id"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}`
	)
	for _, tc := range []struct {
		method, path string
		body         any
		want         string
	}{
		{"GET", "/agents/abc", nil, `{"detail":[` + intParsing + `]}`},
		{"GET", "/agents/0", nil, `{"detail":[` + geOne + `]}`},
		{"PATCH", "/agents/abc", `{"name":"b"}`, `{"detail":[` + intParsing + `]}`},
		{"PATCH", "/agents/0", `{"name":"b"}`, `{"detail":[` + geOne + `]}`},
		{"PATCH", "/agents/abc", `{"name":5}`, `{"detail":[` + intParsing +
			`,{"type":"string_type","loc":["body","name"],"msg":"Input should be a valid string","input":5}]}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			wantBody(t, e.do(t, tc.method, tc.path, tc.body, u.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
}

func TestUpdateAgentMerges(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	created := e.createAgent(t, u.Access, map[string]any{
		"name": "a", "system_prompt": "p", "role_description": "r", "template_source": "t",
	})
	path := agentPath(created, t)
	id := num(t, created, "agent_id")
	createdAt := field(t, created, "created_at").(string)

	agent := func(name, prompt string, role, template any, active bool, updatedAt string) string {
		t.Helper()
		return fmt.Sprintf(`{"agent_id":%d,"owner_id":%d,"name":%q,"system_prompt":%q,"role_description":%s,"template_source":%s,"is_active":%t,"created_at":%q,"updated_at":%q}`,
			id, u.ID, name, prompt, jsonOf(t, role), jsonOf(t, template), active, createdAt, updatedAt)
	}
	patch := func(body any) response {
		t.Helper()
		res := e.do(t, "PATCH", path, body, u.Access)
		wantStatus(t, res, http.StatusOK)
		if res.Header.Get("X-Event-Position") == "" {
			t.Errorf("%s: no X-Event-Position header", res)
		}
		// The read model shows the same agent at once.
		wantBody(t, e.do(t, "GET", path, nil, u.Access), http.StatusOK, string(res.Body))
		return res
	}

	// Omitted fields keep their values.
	res := patch(map[string]any{"name": "b"})
	updatedAt := timestamp(t, res, "updated_at")
	if created := timestamp(t, res, "created_at"); !updatedAt.After(created) {
		t.Errorf("updated_at %s is not after created_at %s", updatedAt, created)
	}
	wantBody(t, res, http.StatusOK, agent("b", "p", "r", "t", true, updatedAt.Format(wireTime)))

	// An explicit null resets a nullable field.
	res = patch(`{"role_description":null}`)
	wantBody(t, res, http.StatusOK, agent("b", "p", nil, "t", true, str(t, res, "updated_at")))

	res = patch(`{"system_prompt":"q","is_active":"no","template_source":null}`)
	last := agent("b", "q", nil, nil, false, str(t, res, "updated_at"))
	wantBody(t, res, http.StatusOK, last)

	// A PATCH that changes nothing records nothing and keeps updated_at.
	wantBody(t, patch(`{}`), http.StatusOK, last)
	wantBody(t, patch(`{"name":"b","system_prompt":"q","is_active":false,"role_description":null}`), http.StatusOK, last)
	if n := len(e.agentEvents(t, id)); n != 4 {
		t.Errorf("the agent's stream has %d events, want 4 (created, then three changes)", n)
	}

	// Fields that are not nullable refuse null.
	for _, f := range []string{"name", "system_prompt"} {
		res := e.do(t, "PATCH", path, `{"`+f+`":null}`, u.Access)
		wantBody(t, res, http.StatusUnprocessableEntity,
			`{"detail":[{"type":"string_type","loc":["body","`+f+`"],"msg":"Input should be a valid string","input":null}]}`)
	}
	res = e.do(t, "PATCH", path, `{"is_active":null}`, u.Access)
	wantBody(t, res, http.StatusUnprocessableEntity,
		`{"detail":[{"type":"bool_type","loc":["body","is_active"],"msg":"Input should be a valid boolean","input":null}]}`)
	res = e.do(t, "PATCH", path, `{"name":"`+strings.Repeat("y", 201)+`"}`, u.Access)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	wantBody(t, e.do(t, "GET", path, nil, u.Access), http.StatusOK, last)
}

// The document says PATCH takes a required body; FastAPI answers a request
// without one with a "missing" error at ["body"].
func TestUpdateAgentWithoutBody(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	path := agentPath(e.createAgent(t, u.Access, `{"name":"a","system_prompt":"p"}`), t)
	res := e.do(t, "PATCH", path, nil, u.Access)
	wantBody(t, res, http.StatusUnprocessableEntity,
		`{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`)
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	if v == nil {
		return "null"
	}
	return strconv.Quote(v.(string))
}

func TestAgentOwnership(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	owner, stranger := e.signUp(t), e.signUp(t)
	created := e.createAgent(t, owner.Access, `{"name":"mine","system_prompt":"p"}`)
	path := agentPath(created, t)

	// Another user's agent does not exist for the caller, exactly as an id that
	// does not exist at all.
	for _, p := range []string{path, "/agents/999999999"} {
		wantDetail(t, e.do(t, "GET", p, nil, stranger.Access), http.StatusNotFound, "Agent not found")
		wantDetail(t, e.do(t, "PATCH", p, `{"name":"stolen"}`, stranger.Access), http.StatusNotFound, "Agent not found")
	}
	wantBody(t, e.do(t, "GET", "/agents", nil, stranger.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)

	// The owner's agent is untouched.
	wantBody(t, e.do(t, "GET", path, nil, owner.Access), http.StatusOK, string(created.Body))
	if n := len(e.agentEvents(t, num(t, created, "agent_id"))); n != 1 {
		t.Errorf("the agent's stream has %d events, want 1", n)
	}
}

func TestAgentsNeedAToken(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/agents", `{"name":"a","system_prompt":"p"}`},
		{"GET", "/agents", nil},
		{"GET", "/agents/1", nil},
		{"PATCH", "/agents/1", `{"name":"b"}`},
		// Authentication comes before validation.
		{"GET", "/agents/abc", nil},
		{"POST", "/agents", `[]`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res := e.do(t, tc.method, tc.path, tc.body, "")
			wantDetail(t, res, http.StatusUnauthorized, "Not authenticated")
			wantHeader(t, res, "WWW-Authenticate", "Bearer")

			res = e.do(t, tc.method, tc.path, tc.body, "not-a-token")
			wantDetail(t, res, http.StatusUnauthorized, "Could not validate credentials")
			wantHeader(t, res, "WWW-Authenticate", "Bearer")
		})
	}
}

func TestListAgents(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, other := e.signUp(t), e.signUp(t)
	var agents []string
	for i := range 3 {
		res := e.createAgent(t, u.Access, map[string]any{"name": fmt.Sprintf("agent %d", i), "system_prompt": "p"})
		agents = append(agents, string(res.Body))
	}
	e.createAgent(t, other.Access, `{"name":"not yours","system_prompt":"p"}`)

	for _, tc := range []struct {
		query string
		items []string
		page  int
		size  int
	}{
		{"", agents, 1, 50},
		{"?page=1&size=2", agents[:2], 1, 2},
		{"?page=2&size=2", agents[2:], 2, 2},
		{"?page=3&size=2", nil, 3, 2},
		{"?size=200", agents, 1, 200},
		{"?page=2", nil, 2, 50},
		{"?size=1&size=3", agents, 1, 3}, // the last value wins, as in Starlette
	} {
		t.Run(tc.query, func(t *testing.T) {
			want := fmt.Sprintf(`{"items":[%s],"total":3,"page":%d,"size":%d}`, strings.Join(tc.items, ","), tc.page, tc.size)
			wantBody(t, e.do(t, "GET", "/agents"+tc.query, nil, u.Access), http.StatusOK, want)
		})
	}

	for _, tc := range []struct {
		query, want string
	}{
		{"?size=201", `{"detail":[{"type":"less_than_equal","loc":["query","size"],"msg":"Input should be less than or equal to 200","input":"201","ctx":{"le":200}}]}`},
		{"?size=0", `{"detail":[{"type":"greater_than_equal","loc":["query","size"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`},
		{"?page=0", `{"detail":[{"type":"greater_than_equal","loc":["query","page"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`},
		{"?page=one", `{"detail":[{"type":"int_parsing","loc":["query","page"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"one"}]}`},
		{"?size=500&page=0", `{"detail":[` +
			`{"type":"greater_than_equal","loc":["query","page"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}},` +
			`{"type":"less_than_equal","loc":["query","size"],"msg":"Input should be less than or equal to 200","input":"500","ctx":{"le":200}}]}`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			wantBody(t, e.do(t, "GET", "/agents"+tc.query, nil, u.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
}

// Concurrent PATCHes of one agent never lose an update and never fail with
// a 500: each is applied, or refused with 409 after bounded retries.
func TestConcurrentAgentUpdates(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	created := e.createAgent(t, u.Access, `{"name":"start","system_prompt":"p"}`)
	path := agentPath(created, t)
	id := num(t, created, "agent_id")

	const writers = 20
	results := make([]response, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			results[i] = e.do(t, "PATCH", path, map[string]string{"name": fmt.Sprintf("writer %02d", i)}, u.Access)
		})
	}
	close(start)
	wg.Wait()

	var applied []response
	for i, res := range results {
		switch res.Status {
		case http.StatusOK:
			// Each applied PATCH answers with the agent as its own write left it.
			if got, want := str(t, res, "name"), fmt.Sprintf("writer %02d", i); got != want {
				t.Errorf("%s: name %q, want %q", res, got, want)
			}
			applied = append(applied, res)
		case http.StatusConflict:
			wantDetail(t, res, http.StatusConflict, "The resource was changed by another request; try again")
		default:
			t.Errorf("%s: want 200 or 409", res)
		}
	}
	if len(applied) == 0 {
		t.Fatal("no PATCH succeeded")
	}
	t.Logf("%d of %d concurrent PATCHes applied", len(applied), writers)

	// The last write (the latest updated_at) is what everyone reads.
	slices.SortFunc(applied, func(a, b response) int {
		return timestamp(t, a, "updated_at").Compare(timestamp(t, b, "updated_at"))
	})
	latest := applied[len(applied)-1]
	for _, res := range applied[:len(applied)-1] {
		if timestamp(t, res, "updated_at").Equal(timestamp(t, latest, "updated_at")) {
			t.Errorf("two applied PATCHes share updated_at %s", str(t, res, "updated_at"))
		}
	}
	wantBody(t, e.do(t, "GET", path, nil, u.Access), http.StatusOK, string(latest.Body))

	// Every applied PATCH is one event; nothing else was recorded.
	if n := len(e.agentEvents(t, id)); n != 1+len(applied) {
		t.Errorf("the agent's stream has %d events, want %d (created, then %d applied PATCHes)", n, 1+len(applied), len(applied))
	}
}
