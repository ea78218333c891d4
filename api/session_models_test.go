package api_test

// Practice turns against OpenAI-compatible providers: a service whose model
// catalogue points at fake providers, to check what each provider is sent and
// how failures are reported.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/llm"
)

// fakeProvider is an OpenAI-compatible chat completions server that answers
// every request with status (and a completion saying answer when 200, an
// error saying message otherwise) and records each request body.
type fakeProvider struct {
	srv     *httptest.Server
	status  int
	answer  string
	message string // the error's; "boom" unless set before the first request
	mu      sync.Mutex
	bodies  []map[string]any
}

func newFakeProvider(t testing.TB, status int, answer string) *fakeProvider {
	t.Helper()
	f := &fakeProvider{status: status, answer: answer, message: "boom"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("fake provider: the request is not JSON: %s", raw)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		status := f.status
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status != http.StatusOK {
			message, _ := json.Marshal(f.message)
			_, _ = fmt.Fprintf(w, `{"error":{"message":%s,"type":"server_error","param":null,"code":null}}`, message)
			return
		}
		text, _ := json.Marshal(f.answer)
		_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1700000000,"model":"test-model",`+
			`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s,"refusal":null}}],`+
			`"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`, text)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProvider) model(id int64, name string) llm.Model {
	return llm.Model{ID: id, Name: name, Provider: llm.ProviderOpenAI, BaseURL: f.srv.URL + "/v1", ProviderModel: "test-model",
		Timeout: 5 * time.Second, Retries: 0}
}

// setStatus makes f answer with status from now on.
func (f *fakeProvider) setStatus(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
}

// requests returns the bodies received so far.
func (f *fakeProvider) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// newModelEnv starts a service (an HTTP tier; the shared service projects)
// whose catalogue is models.
func newModelEnv(t *testing.T, models ...llm.Model) *env {
	t.Helper()
	return newStreamEnv(t, streamEnvConfig{models: models})
}

// doFailing is do for a request expected to answer 5xx (502, 503), which
// send reports as a defect: it sends the request and checks the response
// against the document.
func (e *env) doFailing(t testing.TB, method, path string, body any, token string, headers ...string) response {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	res := response{Method: method, Path: path, Status: resp.StatusCode, Header: resp.Header, Body: out}
	if res.JSON, err = decodeJSON(out); err != nil {
		t.Errorf("%s: %v", res, err)
	}
	e.check(t, res)
	return res
}

func TestPromptSentToProviders(t *testing.T) {
	t.Parallel()
	fake := newFakeProvider(t, http.StatusOK, "fake answer")
	other := newFakeProvider(t, http.StatusOK, "other answer")
	fakeModel := fake.model(1, "fake")
	fakeModel.Default = true
	e := newModelEnv(t, fakeModel, other.model(2, "other"), llm.Model{ID: 3, Name: "echo", Provider: llm.ProviderEcho, Timeout: time.Second})
	c := e.newClassroom(t, nil)
	u := c.student
	ex1 := num(t, e.createFewShot(t, u.Access, map[string]any{"input_text": "Capital of France?", "output_text": "Paris"}), "example_id")
	ex2 := num(t, e.createFewShot(t, u.Access, map[string]any{"input_text": "Capital of Peru?", "output_text": "Lima"}), "example_id")
	off := num(t, e.createFewShot(t, u.Access, map[string]any{"input_text": "unused", "output_text": "unused", "is_active": false}), "example_id")
	agent := num(t, e.createAgent(t, u.Access, map[string]any{"name": "Geo", "system_prompt": "You teach geography."}), "agent_id")

	_, first := e.startSession(t, u.Access, c.class, map[string]any{
		"prompt_text": "Capital of Chile?", "model_names": []string{"fake", "other"}, "agent_id": agent,
		"style_preset": "accurate", "style_params": map[string]any{"format": "one word"},
		"generation_params":    map[string]any{"response_length_preset": "short", "max_completion_tokens": 77},
		"few_shot_example_ids": []int64{ex2, off, ex1},
	})
	system := map[string]any{"role": "system", "content": "You teach geography.\n\nStyle parameters:\n- format: one word"}
	m := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	want := map[string]any{
		"model": "test-model",
		"messages": []any{system,
			m("user", "Capital of Peru?"), m("assistant", "Lima"),
			m("user", "Capital of France?"), m("assistant", "Paris"),
			m("user", "Capital of Chile?")},
		"temperature": 0.2, "top_p": 0.9, "max_completion_tokens": float64(77),
	}
	for name, f := range map[string]*fakeProvider{"fake": fake, "other": other} {
		reqs := f.requests()
		if len(reqs) != 1 {
			t.Fatalf("%s got %d requests, want 1", name, len(reqs))
		}
		if diff := cmp.Diff(want, reqs[0]); diff != "" {
			t.Errorf("%s was sent (-want +got):\n%s", name, diff)
		}
	}
	if r := first.Results; r[0].ResponseText != "fake answer" || !r[0].IsPrimary || r[1].ResponseText != "other answer" || r[1].IsPrimary ||
		string(r[0].TokenUsage) != `{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}` ||
		string(r[0].GenerationParams) != `{"temperature":0.2,"top_p":0.9,"max_tokens":null,"max_completion_tokens":77}` {
		t.Errorf("results %+v", r)
	}

	// New settings: custom with an explicit zero temperature, one example.
	res := e.do(t, "PATCH", sessionPath(first.SessionID)+"/settings", map[string]any{"style_preset": "custom",
		"generation_params": map[string]any{"temperature": 0}, "few_shot_example_ids": []int64{ex1}, "style_params": nil}, u.Access)
	wantStatus(t, res, http.StatusOK)
	res = e.do(t, "POST", sessionPath(first.SessionID)+"/chat", map[string]any{"prompt_text": "And of Spain?", "model_names": []string{"other"}}, u.Access)
	wantStatus(t, res, http.StatusOK)
	want = map[string]any{
		"model": "test-model",
		"messages": []any{m("system", "You teach geography."),
			m("user", "Capital of France?"), m("assistant", "Paris"),
			m("user", "Capital of Chile?"), m("assistant", "fake answer"), // the primary model's answer
			m("user", "And of Spain?")},
		"temperature": float64(0),
	}
	reqs := other.requests()
	if diff := cmp.Diff(want, reqs[len(reqs)-1]); diff != "" {
		t.Errorf("the second turn sent (-want +got):\n%s", diff)
	}
	if got := string(decodeTurn(t, res).Results[0].GenerationParams); got != `{"temperature":0,"top_p":null,"max_tokens":null,"max_completion_tokens":null}` {
		t.Errorf("generation_params %s", got)
	}
	if len(fake.requests()) != 1 {
		t.Errorf("fake was called again: only other was named")
	}
}

func TestModelFailures(t *testing.T) {
	t.Parallel()
	broken := newFakeProvider(t, http.StatusInternalServerError, "")
	brokenModel := broken.model(1, "broken")
	brokenModel.Default = true
	e := newModelEnv(t, brokenModel, llm.Model{ID: 2, Name: "echo", Provider: llm.ProviderEcho, Timeout: time.Second})
	c := e.newClassroom(t, nil)
	u := c.student
	const allFailed = "Every model of the turn failed (broken: broken answered 500 Internal Server Error)"

	// Every model failed: 502, nothing recorded.
	res := e.doFailing(t, "POST", runPath(c.class), map[string]any{"prompt_text": "hello"}, u.Access)
	wantDetail(t, res, http.StatusBadGateway, allFailed)
	// The log names each model and the kind of its failure, not its
	// message, which may quote the prompt ("boom" here).
	logged := strings.Join(e.logs.of(res.Header.Get("X-Request-ID")), "\n")
	if !strings.Contains(logged, `"models":["broken: upstream"]`) || strings.Contains(logged, "boom") {
		t.Errorf("the failed turn's log lines:\n%s", logged)
	}
	wantBody(t, e.do(t, "GET", sessionsPath, nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)

	// One of two failed: the turn stands; the failure is reported in its result.
	res, turn := e.startSession(t, u.Access, c.class, map[string]any{"prompt_text": "hello", "model_names": []string{"broken", "echo"}})
	b, ech := turn.Results[0], turn.Results[1]
	wantBody(t, res, http.StatusCreated, fmt.Sprintf(`{"session_id":%d,"prompt_text":"hello","results":[%s,%s],"session_title":"hello"}`,
		turn.SessionID,
		resultJSON(turnResult{SessionModelID: b.SessionModelID, ModelName: "broken", ResponseID: b.ResponseID, PromptText: "hello",
			CreatedAt: b.CreatedAt, LatencyMS: b.LatencyMS, IsPrimary: true}, balancedParams,
			`{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`,
			`{"kind":"upstream","message":"broken answered 500 Internal Server Error"}`),
		resultJSON(turnResult{SessionModelID: ech.SessionModelID, ModelName: "echo", ResponseID: ech.ResponseID, PromptText: "hello",
			ResponseText: "hello", CreatedAt: ech.CreatedAt, LatencyMS: ech.LatencyMS}, balancedParams,
			`{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`, "null")))
	detail := e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access)
	wantStatus(t, detail, http.StatusOK)
	responses, _ := json.Marshal(field(t, detail, "responses"))
	if !strings.Contains(string(responses), `"response_text":""`) ||
		!strings.Contains(string(responses), `"error":{"kind":"upstream","message":"broken answered 500 Internal Server Error"}`) {
		t.Errorf("the failed response is kept with its error: %s", responses)
	}

	// The next turn leaves the failed primary answer out of the history.
	res = e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "again"}, u.Access)
	wantStatus(t, res, http.StatusOK)
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", turn.SessionID))
	if got := e.sentMessages(t, u, turn.SessionID)[2]; got != `[{"content":"hello","role":"user"},{"content":"again","role":"user"}]` {
		t.Errorf("turn 2 sent %s", got)
	}

	// A continued turn whose every model failed records nothing either.
	res = e.doFailing(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "once more", "model_names": []string{"broken"}}, u.Access)
	wantDetail(t, res, http.StatusBadGateway, allFailed)
	if got := len(e.streamEvents(t, fmt.Sprintf("session-%d", turn.SessionID))); got != len(evs) {
		t.Errorf("the session has %d events, want %d", got, len(evs))
	}
	if n := len(broken.requests()); n != 4 {
		t.Errorf("broken was called %d times, want 4 (retries 0)", n)
	}
}

// A retry that takes over the key of a turn whose answer was lost (its
// process died after recording it) answers with the recorded turn, without
// asking the models again, even while they fail; nothing is recorded twice.
func TestIdempotentTurnRetriedThroughAProviderOutage(t *testing.T) {
	t.Parallel()
	provider := newFakeProvider(t, http.StatusOK, "An answer")
	m := provider.model(1, "fake")
	m.Default = true
	e := newModelEnv(t, m)
	c := e.newClassroom(t, nil)
	u := c.student
	// lose leaves key as a dead process leaves it: in progress, lease lapsed.
	lose := func(key string) {
		t.Helper()
		if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_keys SET status = 0, headers = '{}', body = '',
			lease_until = now() - interval '1 second' WHERE user_id = $1 AND key = $2`, u.ID, key); err != nil {
			t.Fatal(err)
		}
	}
	retried := func(path string, body any, status int) response {
		t.Helper()
		key := uuid.NewString()
		first := e.do(t, "POST", path, body, u.Access, "Idempotency-Key", key)
		wantStatus(t, first, status)
		lose(key)
		provider.setStatus(http.StatusInternalServerError)
		calls := len(provider.requests())
		wantBody(t, e.do(t, "POST", path, body, u.Access, "Idempotency-Key", key), status, string(first.Body))
		if n := len(provider.requests()) - calls; n != 0 {
			t.Errorf("the retry asked the models %d times for a turn already recorded", n)
		}
		provider.setStatus(http.StatusOK)
		wantBody(t, e.do(t, "POST", path, body, u.Access, "Idempotency-Key", key), status, string(first.Body))
		return first
	}

	sid := num(t, retried(runPath(c.class), map[string]any{"prompt_text": "hello"}, http.StatusCreated), "session_id")
	if n := num(t, e.do(t, "GET", sessionsPath, nil, u.Access), "total"); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
	retried(sessionPath(sid)+"/chat", map[string]any{"prompt_text": "again"}, http.StatusOK)
	var turns int
	for _, ev := range e.streamEvents(t, fmt.Sprintf("session-%d", sid)) {
		if ev.Type == "session.turn_recorded" {
			turns++
		}
	}
	if turns != 2 {
		t.Errorf("the session holds %d turns, want 2", turns)
	}
}
