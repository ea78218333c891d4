package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"lectern/llm"
)

func TestRunSessionValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	tok := c.student.Access
	cases := []struct {
		name, path string
		body       any
		want       string
	}{
		{
			name: "no class_id and no body",
			path: sessionsPath + "/run",
			want: `{"detail":[{"type":"missing","loc":["query","class_id"],"msg":"Field required","input":null},` +
				`{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`,
		},
		{
			name: "every field of the wrong type, at once",
			path: sessionsPath + "/run?class_id=abc",
			body: `{"prompt_text":5,"model_names":"echo","agent_id":0,"project_id":"x","knowledge_ids":[1,"a"],"style_preset":"wild",` +
				`"style_params":[],"generation_params":"hot","few_shot_example_ids":[0]}`,
			want: `{"detail":[` +
				`{"type":"int_parsing","loc":["query","class_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"},` +
				`{"type":"string_type","loc":["body","prompt_text"],"msg":"Input should be a valid string","input":5},` +
				`{"type":"list_type","loc":["body","model_names"],"msg":"Input should be a valid list","input":"echo"},` +
				`{"type":"greater_than_equal","loc":["body","agent_id"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}},` +
				`{"type":"int_parsing","loc":["body","project_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"},` +
				`{"type":"int_parsing","loc":["body","knowledge_ids",1],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"a"},` +
				`{"type":"enum","loc":["body","style_preset"],"msg":"Input should be 'accurate', 'balanced', 'creative' or 'custom'","input":"wild",` +
				`"ctx":{"expected":"'accurate', 'balanced', 'creative' or 'custom'"}},` +
				`{"type":"dict_type","loc":["body","style_params"],"msg":"Input should be a valid dictionary","input":[]},` +
				`{"type":"dict_type","loc":["body","generation_params"],"msg":"Input should be a valid dictionary","input":"hot"},` +
				`{"type":"greater_than_equal","loc":["body","few_shot_example_ids",0],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}]}`,
		},
		{
			name: "class_id below 1, prompt missing, a model name that is not a string",
			path: sessionsPath + "/run?class_id=0",
			body: `{"model_names":["echo",1]}`,
			want: `{"detail":[` +
				`{"type":"greater_than_equal","loc":["query","class_id"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}},` +
				`{"type":"missing","loc":["body","prompt_text"],"msg":"Field required","input":{"model_names":["echo",1]}},` +
				`{"type":"string_type","loc":["body","model_names",1],"msg":"Input should be a valid string","input":1}]}`,
		},
		{
			name: "generation parameters are checked member by member",
			path: runPath(c.class),
			body: `{"prompt_text":"x","generation_params":{"temperature":3,"top_p":"x","response_length_preset":"huge",` +
				`"max_completion_tokens":0,"max_tokens":40000}}`,
			want: `{"detail":[` +
				`{"type":"less_than_equal","loc":["body","generation_params","temperature"],"msg":"Input should be less than or equal to 2","input":3,"ctx":{"le":2.0}},` +
				`{"type":"float_parsing","loc":["body","generation_params","top_p"],"msg":"Input should be a valid number, unable to parse string as a number","input":"x"},` +
				`{"type":"enum","loc":["body","generation_params","response_length_preset"],"msg":"Input should be 'short', 'medium' or 'long'","input":"huge",` +
				`"ctx":{"expected":"'short', 'medium' or 'long'"}},` +
				`{"type":"greater_than_equal","loc":["body","generation_params","max_completion_tokens"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}},` +
				`{"type":"less_than_equal","loc":["body","generation_params","max_tokens"],"msg":"Input should be less than or equal to 32768","input":40000,"ctx":{"le":32768}}]}`,
		},
		{
			name: "a negative top_p",
			path: runPath(c.class),
			body: `{"prompt_text":"x","generation_params":{"top_p":-0.5}}`,
			want: `{"detail":[{"type":"greater_than_equal","loc":["body","generation_params","top_p"],"msg":"Input should be greater than or equal to 0","input":-0.5,"ctx":{"ge":0.0}}]}`,
		},
		{
			name: "an empty prompt",
			path: runPath(c.class),
			body: `{"prompt_text":""}`,
			want: `{"detail":[{"type":"string_too_short","loc":["body","prompt_text"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}]}`,
		},
		{
			name: "a blank prompt",
			path: runPath(c.class),
			body: `{"prompt_text":" \n "}`,
			want: `{"detail":[{"type":"value_error","loc":["body","prompt_text"],"msg":"Value error, prompt_text must not be blank","input":" \n ",` +
				`"ctx":{"error":"prompt_text must not be blank"}}]}`,
		},
		{
			name: "a body that is not an object",
			path: runPath(c.class),
			body: `["x"]`,
			want: `{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":["x"]}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != nil {
				body = tc.body
			}
			wantBody(t, e.do(t, "POST", tc.path, body, tok), http.StatusUnprocessableEntity, tc.want)
		})
	}
	wantBody(t, e.do(t, "GET", sessionsPath, nil, tok), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

func TestRunSessionRefusedModelsAndExamples(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, map[string]any{"allowed_model_ids": []int{1}}) // echo only
	mine := num(t, e.createFewShot(t, c.student.Access, map[string]any{"input_text": "a", "output_text": "b"}), "example_id")
	stranger := e.signUp(t)
	theirs := num(t, e.createFewShot(t, stranger.Access, map[string]any{"input_text": "a", "output_text": "b"}), "example_id")

	// Every refused model and example at once, each at its index.
	res := e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "x",
		"model_names": []string{"echo", "gpt-9", "echo-reverse", "echo"}, "few_shot_example_ids": []int64{mine, theirs, 999999999, mine}},
		c.student.Access)
	wantBody(t, res, http.StatusUnprocessableEntity, fmt.Sprintf(`{"detail":[`+
		`{"type":"value_error","loc":["body","model_names",1],"msg":"Value error, unknown model 'gpt-9'; GET /models lists the models","input":"gpt-9",`+
		`"ctx":{"error":"unknown model 'gpt-9'; GET /models lists the models"}},`+
		`{"type":"value_error","loc":["body","model_names",2],"msg":"Value error, model 'echo-reverse' is not allowed in this class","input":"echo-reverse",`+
		`"ctx":{"error":"model 'echo-reverse' is not allowed in this class"}},`+
		`{"type":"value_error","loc":["body","model_names",3],"msg":"Value error, model 'echo' is named more than once","input":"echo",`+
		`"ctx":{"error":"model 'echo' is named more than once"}},`+
		`{"type":"value_error","loc":["body","few_shot_example_ids",1],"msg":"Value error, few-shot example %[1]d is not one of yours","input":%[1]d,`+
		`"ctx":{"error":"few-shot example %[1]d is not one of yours"}},`+
		`{"type":"value_error","loc":["body","few_shot_example_ids",2],"msg":"Value error, few-shot example 999999999 is not one of yours","input":999999999,`+
		`"ctx":{"error":"few-shot example 999999999 is not one of yours"}},`+
		`{"type":"value_error","loc":["body","few_shot_example_ids",3],"msg":"Value error, few-shot example %[2]d is listed more than once","input":%[2]d,`+
		`"ctx":{"error":"few-shot example %[2]d is listed more than once"}}]}`, theirs, mine))

	// A class whose allowed models have all left the catalogue since (made
	// on a service whose catalogue still had them) has no default.
	withdrawn := newModelEnv(t, llm.Model{ID: 999, Name: "retired", Provider: llm.ProviderEcho, Timeout: time.Second, Default: true})
	empty := withdrawn.newClassroom(t, map[string]any{"allowed_model_ids": []int{999}})
	wantBody(t, e.do(t, "POST", runPath(empty.class), map[string]any{"prompt_text": "x"}, empty.student.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["body","model_names"],"msg":"Value error, no model of the catalogue is allowed in this class",`+
			`"input":null,"ctx":{"error":"no model of the catalogue is allowed in this class"}}]}`)

	// The allowed model works, and nothing was recorded before.
	_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "x", "few_shot_example_ids": []int64{mine}})
	list := e.do(t, "GET", sessionsPath, nil, c.student.Access)
	if num(t, list, "total") != 1 {
		t.Errorf("%s: only the accepted run is recorded", list)
	}

	// The settings refuse another user's example too.
	res = e.do(t, "PATCH", sessionPath(turn.SessionID)+"/settings", map[string]any{"few_shot_example_ids": []int64{theirs}}, c.student.Access)
	wantBody(t, res, http.StatusUnprocessableEntity, fmt.Sprintf(`{"detail":[`+
		`{"type":"value_error","loc":["body","few_shot_example_ids",0],"msg":"Value error, few-shot example %[1]d is not one of yours","input":%[1]d,`+
		`"ctx":{"error":"few-shot example %[1]d is not one of yours"}}]}`, theirs))
	wantBody(t, e.do(t, "PATCH", sessionPath(turn.SessionID)+"/settings", map[string]any{"style_preset": "hot", "generation_params": map[string]any{"top_p": 2}},
		c.student.Access), http.StatusUnprocessableEntity, `{"detail":[`+
		`{"type":"enum","loc":["body","style_preset"],"msg":"Input should be 'accurate', 'balanced', 'creative' or 'custom'","input":"hot",`+
		`"ctx":{"expected":"'accurate', 'balanced', 'creative' or 'custom'"}},`+
		// Every error at once: the generation parameters' too.
		`{"type":"less_than_equal","loc":["body","generation_params","top_p"],"msg":"Input should be less than or equal to 1","input":2,"ctx":{"le":1.0}}]}`)
	wantBody(t, e.do(t, "PATCH", sessionPath(turn.SessionID)+"/settings", map[string]any{"generation_params": map[string]any{"top_p": 2}},
		c.student.Access), http.StatusUnprocessableEntity, `{"detail":[`+
		`{"type":"less_than_equal","loc":["body","generation_params","top_p"],"msg":"Input should be less than or equal to 1","input":2,"ctx":{"le":1.0}}]}`)

	// Continuing: the models are checked against the class too.
	wantBody(t, e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "y", "model_names": []string{"echo-reverse"}},
		c.student.Access), http.StatusUnprocessableEntity, `{"detail":[{"type":"value_error","loc":["body","model_names",0],`+
		`"msg":"Value error, model 'echo-reverse' is not allowed in this class","input":"echo-reverse","ctx":{"error":"model 'echo-reverse' is not allowed in this class"}}]}`)
	wantBody(t, e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"model_names": []string{}}, c.student.Access),
		http.StatusUnprocessableEntity, `{"detail":[{"type":"missing","loc":["body","prompt_text"],"msg":"Field required","input":{"model_names":[]}}]}`)
}

func TestSessionsNeedAToken(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, op := range []struct{ method, path string }{
		{"POST", runPath(1)}, {"POST", sessionPath(1) + "/chat"}, {"PATCH", sessionPath(1) + "/settings"},
		{"GET", sessionsPath}, {"GET", sessionPath(1)},
	} {
		res := e.do(t, op.method, op.path, map[string]any{"prompt_text": "x"}, "")
		wantDetail(t, res, http.StatusUnauthorized, "Not authenticated")
		wantHeader(t, res, "WWW-Authenticate", "Bearer")
		wantDetail(t, e.do(t, op.method, op.path, map[string]any{"prompt_text": "x"}, "not-a-token"),
			http.StatusUnauthorized, "Could not validate credentials")
	}
}

func TestWhoMayPractise(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	elsewhere := openSchool(t, e) // another organisation, with its own partner
	colleague := e.signUp(t)      // another partner of the class's organisation
	addPartner(t, e, c.admin, c.org, colleague, true)
	retired := e.signUp(t) // an inactive partner of the class's organisation
	addPartner(t, e, c.admin, c.org, retired, false)
	body := map[string]any{"prompt_text": "hi"}
	const forbidden = "Only the class's enrolled students and its organisation's partners may practise in it"

	for name, u := range map[string]user{"the student": c.student, "the class's partner": c.teacher, "another partner of the organisation": colleague,
		"an admin": c.admin} {
		t.Run(name, func(t *testing.T) { e.startSession(t, u.Access, c.class, body) })
	}
	for name, u := range map[string]user{"a user who is not enrolled": e.signUp(t), "another organisation's partner": elsewhere.teacher,
		"an inactive partner": retired} {
		t.Run(name, func(t *testing.T) {
			wantDetail(t, e.do(t, "POST", runPath(c.class), body, u.Access), http.StatusForbidden, forbidden)
		})
	}
	wantDetail(t, e.do(t, "POST", runPath(999999999), body, c.student.Access), http.StatusNotFound, "Class not found")
	wantDetail(t, e.do(t, "POST", runPath(999999999), body, c.admin.Access), http.StatusNotFound, "Class not found")

	// A student who dropped the class may read the session but not continue it.
	_, turn := e.startSession(t, c.student.Access, c.class, body)
	enrollments := e.do(t, "GET", "/user/class/enrollments", nil, c.student.Access)
	wantStatus(t, enrollments, http.StatusOK)
	items := field(t, enrollments, "items").([]any)
	if len(items) != 1 {
		t.Fatalf("%s: want the one enrollment", enrollments)
	}
	wantStatus(t, e.do(t, "DELETE", fmt.Sprintf("/user/class/enrollments/%s", items[0].(map[string]any)["id"]), nil, c.student.Access),
		http.StatusNoContent)
	wantDetail(t, e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", body, c.student.Access), http.StatusForbidden, forbidden)
	wantDetail(t, e.do(t, "POST", runPath(c.class), body, c.student.Access), http.StatusForbidden, forbidden)
	wantStatus(t, e.do(t, "GET", sessionPath(turn.SessionID), nil, c.student.Access), http.StatusOK)
	wantStatus(t, e.do(t, "PATCH", sessionPath(turn.SessionID)+"/settings", map[string]any{"style_preset": "creative"}, c.student.Access), http.StatusOK)
}

func TestSessionOwnership(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "mine"})
	// Another user, even one who may practise in the class, does not see it.
	for name, u := range map[string]user{"the class's partner": c.teacher, "an admin": c.admin} {
		t.Run(name, func(t *testing.T) {
			wantDetail(t, e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access), http.StatusNotFound, "Session not found")
			wantDetail(t, e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "x"}, u.Access),
				http.StatusNotFound, "Session not found")
			wantDetail(t, e.do(t, "PATCH", sessionPath(turn.SessionID)+"/settings", map[string]any{"style_preset": "custom"}, u.Access),
				http.StatusNotFound, "Session not found")
			list := e.do(t, "GET", sessionsPath, nil, u.Access)
			if num(t, list, "total") != 0 {
				t.Errorf("%s: another user's session is listed", list)
			}
		})
	}
	wantDetail(t, e.do(t, "GET", sessionPath(999999999), nil, c.student.Access), http.StatusNotFound, "Session not found")
	wantDetail(t, e.do(t, "POST", sessionPath(999999999)+"/chat", map[string]any{"prompt_text": "x"}, c.student.Access),
		http.StatusNotFound, "Session not found")
	wantDetail(t, e.do(t, "PATCH", sessionPath(999999999)+"/settings", map[string]any{}, c.student.Access), http.StatusNotFound, "Session not found")

	// Another user's agent is not found.
	stranger := e.signUp(t)
	agent := num(t, e.createAgent(t, stranger.Access, map[string]any{"name": "Theirs", "system_prompt": "x"}), "agent_id")
	wantDetail(t, e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "x", "agent_id": agent}, c.student.Access),
		http.StatusNotFound, "Agent not found")
	if list := e.do(t, "GET", sessionsPath, nil, c.student.Access); num(t, list, "total") != 1 {
		t.Errorf("%s: a refused run records nothing", list)
	}

	// Path parameters.
	wantBody(t, e.do(t, "GET", sessionsPath+"/0", nil, c.student.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"greater_than_equal","loc":["path","session_id"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`)
	wantBody(t, e.do(t, "POST", sessionsPath+"/abc/chat", map[string]any{"prompt_text": "x"}, c.student.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"int_parsing","loc":["path","session_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}]}`)
	wantDetail(t, e.do(t, "DELETE", sessionPath(turn.SessionID), nil, c.student.Access), http.StatusMethodNotAllowed, "Method Not Allowed")
}

// An agent its owner switched off (is_active false) is not used for a new
// session: 422 at agent_id, no model called, nothing recorded; switched on
// again, it is.
func TestRunRefusesAnInactiveAgent(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	res := e.do(t, "POST", "/agents", map[string]any{"name": "Retired", "system_prompt": "RETIRED PROMPT", "is_active": false}, c.student.Access)
	wantStatus(t, res, http.StatusCreated)
	agent := num(t, res, "agent_id")
	wantBody(t, e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "hi", "agent_id": agent}, c.student.Access),
		http.StatusUnprocessableEntity, fmt.Sprintf(`{"detail":[{"type":"value_error","loc":["body","agent_id"],`+
			`"msg":"Value error, agent %[1]d is inactive: activate it, or choose another","input":%[1]d,`+
			`"ctx":{"error":"agent %[1]d is inactive: activate it, or choose another"}}]}`, agent))
	if n := num(t, e.do(t, "GET", sessionsPath, nil, c.student.Access), "total"); n != 0 {
		t.Errorf("%d sessions recorded", n)
	}
	wantStatus(t, e.do(t, "PATCH", fmt.Sprintf("/agents/%d", agent), map[string]any{"is_active": true}, c.student.Access), http.StatusOK)
	wantStatus(t, e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "hi", "agent_id": agent}, c.student.Access), http.StatusCreated)
}
