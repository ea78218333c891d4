package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
)

const sessionsPath = "/user/practice/sessions"

// classroom is a school with one class and a student actively enrolled in it:
// the setting of a practice session.
type classroom struct {
	school
	class   int64
	student user
}

// newClassroom opens a school, creates a class (body overrides its fields)
// and enrolls a new student.
func (e *env) newClassroom(t testing.TB, body map[string]any) classroom {
	t.Helper()
	s := openSchool(t, e)
	fields := map[string]any{"name": "Practice " + uniqueEmail()}
	for k, v := range body {
		fields[k] = v
	}
	class := num(t, e.createClass(t, s, fields), "id")
	student := e.signUp(t)
	wantStatus(t, e.enroll(t, s, class, student.ID), http.StatusCreated)
	return classroom{school: s, class: class, student: student}
}

func runPath(class int64) string { return fmt.Sprintf("%s/run?class_id=%d", sessionsPath, class) }

func sessionPath(id int64) string { return fmt.Sprintf("%s/%d", sessionsPath, id) }

// startSession runs a first turn and expects it to succeed.
func (e *env) startSession(t testing.TB, token string, class int64, body any) (response, turnBody) {
	t.Helper()
	res := e.do(t, "POST", runPath(class), body, token)
	wantStatus(t, res, http.StatusCreated)
	wantHeader(t, res, "X-Projection-Pending", "")
	return res, decodeTurn(t, res)
}

// turnBody is a run or chat response.
type turnBody struct {
	SessionID    int64        `json:"session_id"`
	PromptText   string       `json:"prompt_text"`
	Results      []turnResult `json:"results"`
	SessionTitle *string      `json:"session_title"`
}

type turnResult struct {
	SessionModelID   int64           `json:"session_model_id"`
	ModelName        string          `json:"model_name"`
	ResponseID       int64           `json:"response_id"`
	PromptText       string          `json:"prompt_text"`
	ResponseText     string          `json:"response_text"`
	CreatedAt        string          `json:"created_at"`
	TokenUsage       json.RawMessage `json:"token_usage"`
	LatencyMS        int64           `json:"latency_ms"`
	IsPrimary        bool            `json:"is_primary"`
	GenerationParams json.RawMessage `json:"generation_params"`
	Error            json.RawMessage `json:"error"`
}

func decodeTurn(t testing.TB, res response) turnBody {
	t.Helper()
	var b turnBody
	if err := json.Unmarshal(res.Body, &b); err != nil {
		t.Fatalf("%s: %v", res, err)
	}
	return b
}

// resultJSON is a turn result in the wire's key order.
func resultJSON(r turnResult, params, usage, failure string) string {
	text, _ := json.Marshal(r.ResponseText)
	prompt, _ := json.Marshal(r.PromptText)
	return fmt.Sprintf(`{"session_model_id":%d,"model_name":%q,"response_id":%d,"prompt_text":%s,"response_text":%s,`+
		`"created_at":%q,"token_usage":%s,"latency_ms":%d,"is_primary":%t,"generation_params":%s,"error":%s}`,
		r.SessionModelID, r.ModelName, r.ResponseID, prompt, text, r.CreatedAt, usage, r.LatencyMS, r.IsPrimary, params, failure)
}

// responseJSON is a session response (GET session) in the wire's key order.
func responseJSON(session int64, turn int, r turnResult, params, usage, failure string) string {
	text, _ := json.Marshal(r.ResponseText)
	prompt, _ := json.Marshal(r.PromptText)
	return fmt.Sprintf(`{"response_id":%d,"session_model_id":%d,"session_id":%d,"model_name":%q,"prompt_text":%s,"response_text":%s,`+
		`"created_at":%q,"token_usage":%s,"latency_ms":%d,"turn":%d,"is_primary":%t,"generation_params":%s,"error":%s}`,
		r.ResponseID, r.SessionModelID, session, r.ModelName, prompt, text, r.CreatedAt, usage, r.LatencyMS, turn, r.IsPrimary, params, failure)
}

const (
	noGenerationParams = `{"temperature":null,"top_p":null,"response_length_preset":null,"max_completion_tokens":null,"max_tokens":null}`
	balancedParams     = `{"temperature":0.7,"top_p":1,"max_tokens":null,"max_completion_tokens":null}`
	usage2             = `{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}`
)

func TestRunSession(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)

	res, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "Hello there", "session_id": 5})
	if res.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: no X-Event-Position", res)
	}
	if len(turn.Results) != 1 {
		t.Fatalf("%s: want one result (the default model)", res)
	}
	r := turn.Results[0]
	if r.SessionModelID < 1 || r.ResponseID < 1 || r.LatencyMS < 0 || !wireTimePattern.MatchString(r.CreatedAt) {
		t.Errorf("%s: bad ids, latency or created_at", res)
	}
	want := fmt.Sprintf(`{"session_id":%d,"prompt_text":"Hello there","results":[%s],"session_title":"Hello there"}`, turn.SessionID,
		resultJSON(turnResult{SessionModelID: r.SessionModelID, ModelName: "echo", ResponseID: r.ResponseID, PromptText: "Hello there",
			ResponseText: "Hello there", CreatedAt: r.CreatedAt, LatencyMS: r.LatencyMS, IsPrimary: true}, balancedParams, usage2, "null"))
	wantBody(t, res, http.StatusCreated, want)

	// The history: the session started, then its first turn, in one append.
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", turn.SessionID))
	if diff := cmp.Diff([]string{"session.started", "session.turn_recorded"}, eventTypes(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	recorded := payload(t, evs[1])
	wantTurn := map[string]any{
		"session_id": jsonNum(turn.SessionID), "turn": jsonNum(1), "prompt_text": "Hello there",
		"messages": []any{map[string]any{"role": "user", "content": "Hello there"}}, "history_turns": jsonNum(0),
		"params": map[string]any{"temperature": json.Number("0.7"), "top_p": json.Number("1"), "max_tokens": nil, "max_completion_tokens": nil},
		"results": []any{map[string]any{
			"session_model_id": jsonNum(r.SessionModelID), "model_id": jsonNum(1), "model_name": "echo", "provider": "echo",
			"provider_model": nil, "response_id": jsonNum(r.ResponseID), "response_text": "Hello there",
			"token_usage": map[string]any{"prompt_tokens": jsonNum(2), "completion_tokens": jsonNum(2), "total_tokens": jsonNum(4)},
			"latency_ms":  jsonNum(r.LatencyMS), "attempts": jsonNum(1), "is_primary": true, "error": nil,
		}},
	}
	if diff := cmp.Diff(wantTurn, recorded); diff != "" {
		t.Errorf("session.turn_recorded payload (-want +got):\n%s", diff)
	}
	started := payload(t, evs[0])
	settings := started["settings"].(map[string]any)
	wantStarted := map[string]any{
		"session_id": jsonNum(turn.SessionID), "user_id": jsonNum(c.student.ID), "class_id": jsonNum(c.class), "project_id": nil,
		"agent_id": nil, "knowledge_ids": []any{}, "title": "Hello there",
		"settings": map[string]any{"setting_id": settings["setting_id"], "style_preset": "balanced", "style_params": map[string]any{},
			"generation_params": map[string]any{"temperature": nil, "top_p": nil, "response_length_preset": nil,
				"max_completion_tokens": nil, "max_tokens": nil},
			"agent_snapshot": nil, "few_shot_links": []any{}},
	}
	if diff := cmp.Diff(wantStarted, started); diff != "" {
		t.Errorf("session.started payload (-want +got):\n%s", diff)
	}

	// Read-your-writes: the session, its settings and its response.
	settingID, _ := settings["setting_id"].(json.Number).Int64()
	sessionJSON := fmt.Sprintf(`{"session_id":%d,"user_id":%d,"created_at":%q,"updated_at":%q,"class_id":%d,"project_id":null,`+
		`"knowledge_ids":[],"agent_id":null,"title":"Hello there","notes":null`, turn.SessionID, c.student.ID, r.CreatedAt, r.CreatedAt, c.class)
	detail := sessionJSON + fmt.Sprintf(`,"settings":{"setting_id":%d,"session_id":%d,"created_at":%q,"updated_at":%q,`+
		`"style_preset":"balanced","style_params":{},"generation_params":`+noGenerationParams+`,"agent_snapshot":{},"few_shot_links":[]},"responses":[%s]}`,
		settingID, turn.SessionID, r.CreatedAt, r.CreatedAt,
		responseJSON(turn.SessionID, 1, turnResult{SessionModelID: r.SessionModelID, ModelName: "echo", ResponseID: r.ResponseID,
			PromptText: "Hello there", ResponseText: "Hello there", CreatedAt: r.CreatedAt, LatencyMS: r.LatencyMS, IsPrimary: true},
			balancedParams, usage2, "null"))
	wantBody(t, e.do(t, "GET", sessionPath(turn.SessionID), nil, c.student.Access), http.StatusOK, detail)
	wantBody(t, e.do(t, "GET", sessionsPath, nil, c.student.Access), http.StatusOK,
		`{"items":[`+sessionJSON+`}],"total":1,"page":1,"size":50}`)

	// A reader elsewhere can wait for the write's position.
	got := e.do(t, "GET", sessionPath(turn.SessionID), nil, c.student.Access, "X-Min-Position", res.Header.Get("X-Event-Position"))
	wantBody(t, got, http.StatusOK, detail)
	wantHeader(t, got, "X-Projection-Pending", "")
}

func TestRunSessionSideBySide(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	// The class's primary model is echo (id 1): it is primary wherever it is named.
	c := e.newClassroom(t, map[string]any{"primary_model_id": 1, "allowed_model_ids": []int{1, 2}})
	// knowledge_ids name the caller's documents; these share no word with the
	// prompt, so no passage joins it.
	k1 := num(t, e.uploadDocument(t, c.student.Access, "Tides", "The moon pulls the oceans."), "knowledge_id")
	k2 := num(t, e.uploadDocument(t, c.student.Access, "Rocks", "Granite is igneous."), "knowledge_id")

	res, turn := e.startSession(t, c.student.Access, c.class, map[string]any{
		"prompt_text": "Hello world", "model_names": []string{"echo-reverse", "echo"},
		"project_id": 12, "knowledge_ids": []int64{k1, k2},
	})
	if len(turn.Results) != 2 {
		t.Fatalf("%s: want two results", res)
	}
	rev, ech := turn.Results[0], turn.Results[1]
	if rev.SessionModelID == ech.SessionModelID || rev.ResponseID == ech.ResponseID || rev.CreatedAt != ech.CreatedAt {
		t.Errorf("%s: each model has its own session model and response id, and the turn one time", res)
	}
	want := fmt.Sprintf(`{"session_id":%d,"prompt_text":"Hello world","results":[%s,%s],"session_title":"Hello world"}`,
		turn.SessionID,
		resultJSON(turnResult{SessionModelID: rev.SessionModelID, ModelName: "echo-reverse", ResponseID: rev.ResponseID,
			PromptText: "Hello world", ResponseText: "dlrow olleH", CreatedAt: rev.CreatedAt, LatencyMS: rev.LatencyMS},
			balancedParams, usage2, "null"),
		resultJSON(turnResult{SessionModelID: ech.SessionModelID, ModelName: "echo", ResponseID: ech.ResponseID,
			PromptText: "Hello world", ResponseText: "Hello world", CreatedAt: ech.CreatedAt, LatencyMS: ech.LatencyMS, IsPrimary: true},
			balancedParams, usage2, "null"))
	wantBody(t, res, http.StatusCreated, want)
	_, again := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "abc def", "model_names": []string{"echo-reverse"}})
	if got := again.Results[0].ResponseText; got != "fed cba" || !again.Results[0].IsPrimary {
		t.Errorf("echo-reverse answered %q (primary %t), want \"fed cba\" as the only, primary, model", got, again.Results[0].IsPrimary)
	}

	detail := e.do(t, "GET", sessionPath(turn.SessionID), nil, c.student.Access)
	wantStatus(t, detail, http.StatusOK)
	if field(t, detail, "project_id") != jsonNum(12) || fmt.Sprint(field(t, detail, "knowledge_ids")) != fmt.Sprint([]int64{k1, k2}) {
		t.Errorf("%s: project_id and knowledge_ids are kept", detail)
	}

	// Newest first.
	list := e.do(t, "GET", sessionsPath, nil, c.student.Access)
	wantStatus(t, list, http.StatusOK)
	items := field(t, list, "items").([]any)
	if len(items) != 2 || items[0].(map[string]any)["session_id"] != jsonNum(again.SessionID) {
		t.Errorf("%s: want the two sessions, newest first", list)
	}
}

func TestContinueSession(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	_, first := e.startSession(t, c.student.Access, c.class, map[string]any{
		"prompt_text": "one", "model_names": []string{"echo", "echo-reverse"}})
	path := sessionPath(first.SessionID) + "/chat"

	// No model_names: the previous turn's models, with the same session model ids.
	res := e.do(t, "POST", path, map[string]any{"prompt_text": "two words"}, c.student.Access)
	wantStatus(t, res, http.StatusOK)
	wantHeader(t, res, "X-Projection-Pending", "")
	second := decodeTurn(t, res)
	if second.SessionID != first.SessionID || *second.SessionTitle != "one" || second.PromptText != "two words" {
		t.Errorf("%s: same session, same title, the new prompt", res)
	}
	if len(second.Results) != 2 {
		t.Fatalf("%s: want both models again", res)
	}
	for i, r := range second.Results {
		if r.SessionModelID != first.Results[i].SessionModelID || r.ModelName != first.Results[i].ModelName {
			t.Errorf("result %d: session model %d %s, want %d %s", i, r.SessionModelID, r.ModelName,
				first.Results[i].SessionModelID, first.Results[i].ModelName)
		}
		if r.ResponseID == first.Results[i].ResponseID {
			t.Errorf("result %d: response id %d reused", i, r.ResponseID)
		}
	}
	if second.Results[0].ResponseText != "two words" || second.Results[1].ResponseText != "sdrow owt" || !second.Results[0].IsPrimary {
		t.Errorf("%s: echo and echo-reverse answer the new prompt; echo (named first) is primary", res)
	}
	// The usage counts the whole prompt: history included (one, one, two words).
	if string(second.Results[0].TokenUsage) != `{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}` {
		t.Errorf("token usage %s: the prompt should hold the history", second.Results[0].TokenUsage)
	}

	// Named models: a new model gets a new session model id, a known one keeps its id.
	res = e.do(t, "POST", path, map[string]any{"prompt_text": "three", "model_names": []string{"echo-reverse"}}, c.student.Access)
	wantStatus(t, res, http.StatusOK)
	third := decodeTurn(t, res)
	if len(third.Results) != 1 || third.Results[0].SessionModelID != first.Results[1].SessionModelID || !third.Results[0].IsPrimary {
		t.Errorf("%s: echo-reverse alone, with its session model id, primary", res)
	}

	// The session holds every response of every turn, in order.
	detail := e.do(t, "GET", sessionPath(first.SessionID), nil, c.student.Access)
	wantStatus(t, detail, http.StatusOK)
	var got []struct {
		Turn       int    `json:"turn"`
		ModelName  string `json:"model_name"`
		PromptText string `json:"prompt_text"`
		Response   string `json:"response_text"`
		IsPrimary  bool   `json:"is_primary"`
	}
	raw, _ := json.Marshal(field(t, detail, "responses"))
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	type row = struct {
		Turn       int    `json:"turn"`
		ModelName  string `json:"model_name"`
		PromptText string `json:"prompt_text"`
		Response   string `json:"response_text"`
		IsPrimary  bool   `json:"is_primary"`
	}
	want := []row{
		{1, "echo", "one", "one", true}, {1, "echo-reverse", "one", "eno", false},
		{2, "echo", "two words", "two words", true}, {2, "echo-reverse", "two words", "sdrow owt", false},
		{3, "echo-reverse", "three", "eerht", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("responses (-want +got):\n%s", diff)
	}
	if timestamp(t, detail, "updated_at").Before(timestamp(t, detail, "created_at")) || str(t, detail, "updated_at") != third.Results[0].CreatedAt {
		t.Errorf("%s: updated_at follows the last turn", detail)
	}
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", first.SessionID))
	if diff := cmp.Diff([]string{"session.started", "session.turn_recorded", "session.turn_recorded", "session.turn_recorded"},
		eventTypes(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The event holds what the turn added; the history goes back in the export.
	third3 := payload(t, evs[3])
	if messages, _ := json.Marshal(third3["messages"]); string(messages) != `[{"content":"three","role":"user"}]` || third3["history_turns"] != jsonNum(2) {
		t.Errorf("turn 3 recorded %s after %v turns, want its prompt after 2", messages, third3["history_turns"])
	}
	wantMessages := `[{"content":"one","role":"user"},{"content":"one","role":"assistant"},` +
		`{"content":"two words","role":"user"},{"content":"two words","role":"assistant"},{"content":"three","role":"user"}]`
	if got := e.sentMessages(t, c.student, first.SessionID)[3]; got != wantMessages {
		t.Errorf("turn 3 sent %s, want %s", got, wantMessages)
	}
}

// sentMessages are the messages each turn of u's session sent its models,
// as u's export shows them (JSON, by turn).
func (e *env) sentMessages(t testing.TB, u user, session int64) map[int64]string {
	t.Helper()
	res := e.do(t, "GET", "/user/me/export", nil, u.Access)
	wantStatus(t, res, http.StatusOK)
	out := map[int64]string{}
	for _, s := range field(t, res, "sent_messages").([]any) {
		sent := s.(map[string]any)
		if id, _ := sent["session_id"].(json.Number).Int64(); id == session {
			turn, _ := sent["turn"].(json.Number).Int64()
			raw, _ := json.Marshal(sent["messages"])
			out[turn] = string(raw)
		}
	}
	return out
}

// An ended class takes no new practice, from its students, its partners
// or an admin; its sessions stay readable, and a turn recorded before it
// ended still answers its retry.
func TestPracticeStopsWhenTheClassEnds(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	first, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "one"})
	chat := sessionPath(turn.SessionID) + "/chat"
	retried := e.do(t, "POST", chat, map[string]any{"prompt_text": "two"}, c.student.Access, "Idempotency-Key", "before-the-end")
	wantStatus(t, retried, http.StatusOK)
	wantStatus(t, e.do(t, "PATCH", c.at("/classes/%d", c.class), `{"status":"ended"}`, c.teacher.Access), http.StatusOK)

	const ended = "The class has ended: it takes no more practice"
	for _, who := range []user{c.student, c.teacher, c.admin} {
		wantDetail(t, e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "again"}, who.Access), http.StatusConflict, ended)
	}
	wantDetail(t, e.do(t, "POST", chat, map[string]any{"prompt_text": "three"}, c.student.Access), http.StatusConflict, ended)
	// Someone who could never practise there is told that, not that it ended.
	wantStatus(t, e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "x"}, e.signUp(t).Access), http.StatusForbidden)

	wantBody(t, e.do(t, "POST", chat, map[string]any{"prompt_text": "two"}, c.student.Access, "Idempotency-Key", "before-the-end"),
		http.StatusOK, string(retried.Body))
	got := e.do(t, "GET", sessionPath(turn.SessionID), nil, c.student.Access)
	wantStatus(t, got, http.StatusOK)
	if n := len(got.JSON.(map[string]any)["responses"].([]any)); n != 2 {
		t.Errorf("%s: %d responses, want the 2 of the turns before the end (%s)", got, n, first)
	}
}

func TestSessionSettings(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	u := c.student
	ex1 := e.createFewShot(t, u.Access, map[string]any{"input_text": "1+1?", "output_text": "2", "title": "sum"})
	ex2 := e.createFewShot(t, u.Access, map[string]any{"input_text": "2+2?", "output_text": "4"})
	id1, id2 := num(t, ex1, "example_id"), num(t, ex2, "example_id")
	agent := e.createAgent(t, u.Access, map[string]any{"name": "Tutor", "system_prompt": "Be brief.", "role_description": "math"})

	_, turn := e.startSession(t, u.Access, c.class, map[string]any{
		"prompt_text": "3+3?", "agent_id": num(t, agent, "agent_id"), "style_preset": "accurate",
		"style_params":         map[string]any{"format": "bullets"},
		"generation_params":    map[string]any{"response_length_preset": "short", "temperature": nil, "unknown": 1},
		"few_shot_example_ids": []int64{id1, id2},
	})
	if got := string(turn.Results[0].GenerationParams); got != `{"temperature":0.2,"top_p":0.9,"max_tokens":256,"max_completion_tokens":null}` {
		t.Errorf("generation_params %s: the accurate preset with the short length", got)
	}
	settingsPath := sessionPath(turn.SessionID) + "/settings"
	detail := e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access)
	wantStatus(t, detail, http.StatusOK)
	settings := field(t, detail, "settings").(map[string]any)
	links := settings["few_shot_links"].([]any)
	if len(links) != 2 {
		t.Fatalf("%s: want two few-shot links", detail)
	}
	link := func(i int) map[string]any { return links[i].(map[string]any) }
	snapshot := fmt.Sprintf(`{"agent_id":%d,"name":"Tutor","system_prompt":"Be brief.","role_description":"math"}`, num(t, agent, "agent_id"))
	linkJSON := func(l map[string]any, sortOrder int, ex response) string {
		return fmt.Sprintf(`{"id":%s,"setting_id":%s,"example_id":%d,"sort_order":%d,"created_at":%q,"example":%s}`,
			l["id"], settings["setting_id"], num(t, ex, "example_id"), sortOrder, l["created_at"], ex.Body)
	}
	settingsJSON := func(updated, preset, style, gp, links string) string {
		return fmt.Sprintf(`{"setting_id":%s,"session_id":%d,"created_at":%q,"updated_at":%q,"style_preset":%q,"style_params":%s,`+
			`"generation_params":%s,"agent_snapshot":%s,"few_shot_links":[%s]}`,
			settings["setting_id"], turn.SessionID, settings["created_at"], updated, preset, style, gp, snapshot, links)
	}
	short := `{"temperature":null,"top_p":null,"response_length_preset":"short","max_completion_tokens":null,"max_tokens":null}`
	wantSettings := settingsJSON(settings["created_at"].(string), "accurate", `{"format":"bullets"}`, short,
		linkJSON(link(0), 0, ex1)+","+linkJSON(link(1), 1, ex2))
	got, _ := json.Marshal(settings)
	if diff := cmp.Diff(mustDecode(t, wantSettings), mustDecode(t, string(got))); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}

	// An empty PATCH changes nothing.
	res := e.do(t, "PATCH", settingsPath, map[string]any{}, u.Access)
	wantBody(t, res, http.StatusOK, wantSettings)

	// Merge: the given fields change; the list is replaced in its order, and a
	// link that stays keeps its id.
	res = e.do(t, "PATCH", settingsPath, map[string]any{"style_preset": "creative", "few_shot_example_ids": []int64{id2}}, u.Access)
	wantStatus(t, res, http.StatusOK)
	wantHeader(t, res, "X-Projection-Pending", "")
	updated := str(t, res, "updated_at")
	if updated == settings["created_at"] {
		t.Errorf("%s: updated_at did not move", res)
	}
	want := settingsJSON(updated, "creative", `{"format":"bullets"}`, short, linkJSON(link(1), 0, ex2))
	wantBody(t, res, http.StatusOK, want)
	detail = e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access)
	got, _ = json.Marshal(field(t, detail, "settings"))
	if diff := cmp.Diff(mustDecode(t, want), mustDecode(t, string(got))); diff != "" {
		t.Errorf("settings read back (-want +got):\n%s", diff)
	}

	// The next turn uses the new preset (creative: 1.0/1.0), keeps the
	// generation parameters, and the agent's snapshot even after the agent changed.
	wantStatus(t, e.do(t, "PATCH", fmt.Sprintf("/agents/%d", num(t, agent, "agent_id")), map[string]any{"system_prompt": "Be verbose."}, u.Access), http.StatusOK)
	chat := e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "4+4?"}, u.Access)
	wantStatus(t, chat, http.StatusOK)
	if got := string(decodeTurn(t, chat).Results[0].GenerationParams); got != `{"temperature":1,"top_p":1,"max_tokens":256,"max_completion_tokens":null}` {
		t.Errorf("generation_params %s after the preset changed", got)
	}
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", turn.SessionID))
	if diff := cmp.Diff([]string{"session.started", "session.turn_recorded", "session.settings_updated", "session.turn_recorded"}, eventTypes(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	messages, _ := json.Marshal(payload(t, evs[3])["messages"])
	wantRecorded := `[{"content":"Be brief.\n\nStyle parameters:\n- format: bullets","role":"system"},` +
		`{"content":"2+2?","role":"user"},{"content":"4","role":"assistant"},{"content":"4+4?","role":"user"}]`
	if string(messages) != wantRecorded || payload(t, evs[3])["history_turns"] != jsonNum(1) {
		t.Errorf("turn 2 recorded\n%s\nafter %v turns; want\n%s\nafter 1", messages, payload(t, evs[3])["history_turns"], wantRecorded)
	}
	wantMessages := `[{"content":"Be brief.\n\nStyle parameters:\n- format: bullets","role":"system"},` +
		`{"content":"2+2?","role":"user"},{"content":"4","role":"assistant"},` +
		`{"content":"3+3?","role":"user"},{"content":"3+3?","role":"assistant"},{"content":"4+4?","role":"user"}]`
	if got := e.sentMessages(t, c.student, turn.SessionID)[2]; got != wantMessages {
		t.Errorf("turn 2 sent\n%s\nwant\n%s", got, wantMessages)
	}
	wantChanged := []any{"style_preset", "few_shot_example_ids"}
	if diff := cmp.Diff(wantChanged, payload(t, evs[2])["changed"]); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}

	// null resets each field to its default.
	res = e.do(t, "PATCH", settingsPath, map[string]any{"style_preset": nil, "style_params": nil, "generation_params": nil,
		"few_shot_example_ids": nil}, u.Access)
	wantStatus(t, res, http.StatusOK)
	want = settingsJSON(str(t, res, "updated_at"), "balanced", `{}`, noGenerationParams, "")
	wantBody(t, res, http.StatusOK, want)

	// Whole objects replace; generation parameters are checked member by member.
	res = e.do(t, "PATCH", settingsPath, map[string]any{"generation_params": map[string]any{"max_tokens": 10, "top_p": 0.5},
		"style_params": map[string]any{"persona": "pirate", "hint_mode": 2}}, u.Access)
	want = settingsJSON(str(t, res, "updated_at"), "balanced", `{"hint_mode":2,"persona":"pirate"}`,
		`{"temperature":null,"top_p":0.5,"response_length_preset":null,"max_completion_tokens":null,"max_tokens":10}`, "")
	wantBody(t, res, http.StatusOK, want)
	chat = e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "5+5?"}, u.Access)
	if got := string(decodeTurn(t, chat).Results[0].GenerationParams); got != `{"temperature":0.7,"top_p":0.5,"max_tokens":10,"max_completion_tokens":null}` {
		t.Errorf("generation_params %s after the reset", got)
	}
}

func mustDecode(t testing.TB, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}

func TestListSessions(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	other := e.signUp(t)
	wantStatus(t, e.enroll(t, c.school, c.class, other.ID), http.StatusCreated)

	var ids []int64
	for i := range 3 {
		_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": fmt.Sprintf("prompt %d", i)})
		ids = append(ids, turn.SessionID)
	}
	e.startSession(t, other.Access, c.class, map[string]any{"prompt_text": "not yours"})

	page := func(query string) (ids []int64, total int64) {
		t.Helper()
		res := e.do(t, "GET", sessionsPath+query, nil, c.student.Access)
		wantStatus(t, res, http.StatusOK)
		for _, item := range field(t, res, "items").([]any) {
			n, _ := item.(map[string]any)["session_id"].(json.Number).Int64()
			ids = append(ids, n)
			if _, ok := item.(map[string]any)["responses"]; ok {
				t.Errorf("%s: list items carry no responses", res)
			}
		}
		return ids, num(t, res, "total")
	}
	got, total := page("")
	if diff := cmp.Diff([]int64{ids[2], ids[1], ids[0]}, got); diff != "" || total != 3 {
		t.Errorf("newest first, only mine (-want +got):\n%s (total %d)", diff, total)
	}
	got, total = page("?page=2&size=2")
	if diff := cmp.Diff([]int64{ids[0]}, got); diff != "" || total != 3 {
		t.Errorf("page 2 (-want +got):\n%s (total %d)", diff, total)
	}
	got, total = page("?page=9")
	if len(got) != 0 || total != 3 {
		t.Errorf("past the end: %v, total %d", got, total)
	}
	res := e.do(t, "GET", sessionsPath+"?page=0&size=201", nil, c.student.Access)
	wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[`+
		`{"type":"greater_than_equal","loc":["query","page"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}},`+
		`{"type":"less_than_equal","loc":["query","size"],"msg":"Input should be less than or equal to 200","input":"201","ctx":{"le":200}}]}`)
	fresh := e.signUp(t)
	wantBody(t, e.do(t, "GET", sessionsPath, nil, fresh.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

func TestSessionIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	body := map[string]any{"prompt_text": "once"}
	first := e.do(t, "POST", runPath(c.class), body, c.student.Access, "Idempotency-Key", "run-1")
	wantStatus(t, first, http.StatusCreated)
	again := e.do(t, "POST", runPath(c.class), body, c.student.Access, "Idempotency-Key", "run-1")
	wantBody(t, again, http.StatusCreated, string(first.Body))
	wantHeader(t, again, "Idempotent-Replayed", "true")
	list := e.do(t, "GET", sessionsPath, nil, c.student.Access)
	if num(t, list, "total") != 1 {
		t.Errorf("%s: a replayed run records nothing", list)
	}
	if !strings.Contains(string(list.Body), fmt.Sprintf(`"session_id":%d`, decodeTurn(t, first).SessionID)) {
		t.Errorf("%s: the session is listed", list)
	}
}

func TestConcurrentTurns(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	_, first := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "turn 0"})
	path := sessionPath(first.SessionID) + "/chat"

	results := concurrently(8, func(i int) response {
		return e.do(t, "POST", path, map[string]any{"prompt_text": fmt.Sprintf("turn %d", i+1)}, c.student.Access)
	})
	answered := 0
	for _, res := range results {
		switch res.Status {
		case http.StatusOK:
			answered++
		case http.StatusConflict:
			wantDetail(t, res, http.StatusConflict, "The session had another turn while the models answered; send the prompt again")
		default:
			t.Errorf("%s: want 200 or 409", res)
		}
	}
	if answered == 0 {
		t.Fatal("no turn was recorded")
	}
	// Every recorded turn was built on the whole history before it.
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", first.SessionID))
	if len(evs) != answered+2 {
		t.Fatalf("%d events, want the start and %d turns", len(evs), answered+1)
	}
	sent := e.sentMessages(t, c.student, first.SessionID)
	for _, ev := range evs[1:] {
		p := payload(t, ev)
		turn, _ := p["turn"].(json.Number).Int64()
		if p["history_turns"] != jsonNum(turn-1) {
			t.Errorf("turn %d was recorded after %v turns, want %d", turn, p["history_turns"], turn-1)
		}
		var messages []any
		_ = json.Unmarshal([]byte(sent[turn]), &messages)
		if got := len(messages); got != int(2*turn-1) {
			t.Errorf("turn %d sent %d messages, want %d", turn, got, 2*turn-1)
		}
	}
	detail := e.do(t, "GET", sessionPath(first.SessionID), nil, c.student.Access)
	if got := len(field(t, detail, "responses").([]any)); got != answered+1 {
		t.Errorf("%d responses, want %d", got, answered+1)
	}
}

// A session that grows at the permitted pace with the longest prompts is
// bounded twice: each turn sends its models only the most recent history
// that fits aggregates.HistoryWindowText (the session keeps every turn), and
// once the session holds aggregates.MaxSessionText a turn is refused with a
// 409 before any model is called. Without either, turn 30 sent each model
// 5.9 MB and reading the session answered 6.0 MB, growing for ever.
func TestLongSessionIsBounded(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	prompt := strings.Repeat("x", 100_000)
	_, first := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": prompt})
	chat := sessionPath(first.SessionID) + "/chat"
	turns := 1
	for ; ; turns++ {
		if turns > aggregates.MaxSessionText/len(prompt) {
			t.Fatalf("%d turns of %d bytes recorded: the session is not bounded", turns, len(prompt))
		}
		res := e.doFailing(t, "POST", chat, map[string]any{"prompt_text": prompt}, c.student.Access)
		if res.Status == http.StatusConflict {
			wantDetail(t, res, http.StatusConflict, "The session holds as much text as a session may (4 MiB); start a new session to go on")
			break
		}
		wantStatus(t, res, http.StatusOK)
	}
	if turns < 3 {
		t.Fatalf("refused after %d turns: the history window was not tried", turns)
	}
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", first.SessionID))
	var text int
	for _, ev := range evs {
		text += len(ev.Data)
	}
	t.Logf("%d turns recorded, %d bytes of events; refused the next", turns, text)
	if len(evs) != turns+1 {
		t.Errorf("%d events, want the start and %d turns: the refused turn was recorded", len(evs), turns)
	}
	// Reading the session answers what it holds: bounded with it.
	detail := e.do(t, "GET", sessionPath(first.SessionID), nil, c.student.Access)
	wantStatus(t, detail, http.StatusOK)
	if n := len(detail.Body); n > 2*aggregates.MaxSessionText {
		t.Errorf("GET of the full session answered %d bytes", n)
	}
	// Each turn sent its own messages and at most the window of history:
	// here one earlier turn (its prompt and its answer: 200 000 bytes; two
	// would be 400 000).
	sent, err := e.svc.Commands.Sessions.SentMessages(context.Background(), c.student.ID, first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	for _, turn := range sent[1:] {
		var history int
		for _, m := range turn.Messages[:len(turn.Messages)-1] {
			if m.Role != aggregates.RoleSystemMessage {
				history += len(m.Content)
			}
		}
		if history == 0 || history > aggregates.HistoryWindowText {
			t.Errorf("turn %d sent %d bytes of history in %d messages, want 1..%d", turn.Turn, history, len(turn.Messages), aggregates.HistoryWindowText)
		}
		if last := turn.Messages[len(turn.Messages)-1]; last.Content != prompt {
			t.Errorf("turn %d's last message is not its prompt", turn.Turn)
		}
	}
}

// A turn's event holds what the turn adds, not the session's history: a
// session of long prompts goes on turn after turn. (Each turn used to record
// the whole history it sent, until one was too large to record: a 413 at
// the fourth prompt of 100 000 characters.)
func TestLongSessionKeepsRecording(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	prompt := strings.Repeat("x", 100_000)
	_, first := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": prompt})
	for turn := 2; turn <= 6; turn++ {
		res := e.do(t, "POST", sessionPath(first.SessionID)+"/chat", map[string]any{"prompt_text": prompt}, c.student.Access)
		wantStatus(t, res, http.StatusOK)
	}
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", first.SessionID))
	if len(evs) != 7 {
		t.Fatalf("%d events, want the start and 6 turns", len(evs))
	}
	for _, ev := range evs[1:] {
		if n := len(ev.Data); n > len(evs[1].Data)+1000 {
			t.Errorf("turn event of %d bytes, the first's %d: it grows with the session", n, len(evs[1].Data))
		}
	}
}
