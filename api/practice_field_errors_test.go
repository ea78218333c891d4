package api_test

// Practice turns and few-shot examples as a student and an instructor see
// them: the order of a turn's refusals (docs/decisions.md, "Who may run a
// turn": missing class 404, 403, field errors all at once, another user's
// agent 404) and every field error of a request at once (DESIGN §4).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"lectern/aggregates"
)

const blankPrompt = `{"type":"value_error","loc":["body","prompt_text"],"msg":"Value error, prompt_text must not be blank","input":" \t ",` +
	`"ctx":{"error":"prompt_text must not be blank"}}`

// A blank prompt is a field error like the others: it comes after the
// class's 404 and 403, and with the other field errors of the turn.
func TestRunSessionBlankPromptInItsPlace(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, map[string]any{"allowed_model_ids": []int{1}}) // echo only
	stranger := e.signUp(t)
	theirs := num(t, e.createFewShot(t, stranger.Access, map[string]any{"input_text": "a", "output_text": "b"}), "example_id")
	const forbidden = "Only the class's enrolled students and its organisation's partners may practise in it"

	wantDetail(t, e.do(t, "POST", runPath(999999999), map[string]any{"prompt_text": " \t "}, c.student.Access),
		http.StatusNotFound, "Class not found")
	wantDetail(t, e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": " \t "}, stranger.Access),
		http.StatusForbidden, forbidden)

	res := e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": " \t ",
		"model_names": []string{"echo-reverse"}, "few_shot_example_ids": []int64{theirs}}, c.student.Access)
	wantBody(t, res, http.StatusUnprocessableEntity, fmt.Sprintf(`{"detail":[`+blankPrompt+`,`+
		`{"type":"value_error","loc":["body","model_names",0],"msg":"Value error, model 'echo-reverse' is not allowed in this class","input":"echo-reverse",`+
		`"ctx":{"error":"model 'echo-reverse' is not allowed in this class"}},`+
		`{"type":"value_error","loc":["body","few_shot_example_ids",0],"msg":"Value error, few-shot example %[1]d is not one of yours","input":%[1]d,`+
		`"ctx":{"error":"few-shot example %[1]d is not one of yours"}}]}`, theirs))

	wantBody(t, e.do(t, "GET", sessionsPath, nil, c.student.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

// The same on a chat: another user's session is not found whatever the
// prompt, a student who left the class is refused, and a blank prompt comes
// with the models' errors.
func TestChatBlankPromptInItsPlace(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, map[string]any{"allowed_model_ids": []int{1}}) // echo only
	_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "first"})
	chat := sessionPath(turn.SessionID) + "/chat"
	stranger := e.signUp(t)

	wantDetail(t, e.do(t, "POST", chat, map[string]any{"prompt_text": " \t "}, stranger.Access), http.StatusNotFound, "Session not found")
	wantDetail(t, e.do(t, "POST", sessionPath(999999999)+"/chat", map[string]any{"prompt_text": " \t "}, c.student.Access),
		http.StatusNotFound, "Session not found")

	res := e.do(t, "POST", chat, map[string]any{"prompt_text": " \t ", "model_names": []string{"echo-reverse"}}, c.student.Access)
	wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[`+blankPrompt+`,`+
		`{"type":"value_error","loc":["body","model_names",0],"msg":"Value error, model 'echo-reverse' is not allowed in this class","input":"echo-reverse",`+
		`"ctx":{"error":"model 'echo-reverse' is not allowed in this class"}}]}`)

	// The student leaves the class: refused (403) before the prompt is looked at.
	enrollments := e.do(t, "GET", "/user/class/enrollments", nil, c.student.Access)
	items := field(t, enrollments, "items").([]any)
	if len(items) != 1 {
		t.Fatalf("%s: want the one enrollment", enrollments)
	}
	wantStatus(t, e.do(t, "DELETE", fmt.Sprintf("/user/class/enrollments/%s", items[0].(map[string]any)["id"]), nil, c.student.Access),
		http.StatusNoContent)
	wantDetail(t, e.do(t, "POST", chat, map[string]any{"prompt_text": " \t "}, c.student.Access), http.StatusForbidden,
		"Only the class's enrolled students and its organisation's partners may practise in it")

	detail := e.do(t, "GET", sessionPath(turn.SessionID), nil, c.student.Access)
	if n := len(field(t, detail, "responses").([]any)); n != 1 {
		t.Errorf("%s: the refused chats recorded something", detail)
	}
}

// Both texts of a few-shot example blank: both errors at once, on create and
// on update (as two null texts are).
func TestFewShotBlankTextsAtOnce(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	both := `{"detail":[` +
		`{"type":"value_error","loc":["body","input_text"],"msg":"Value error, input_text must not be blank","input":" ","ctx":{"error":"input_text must not be blank"}},` +
		`{"type":"value_error","loc":["body","output_text"],"msg":"Value error, output_text must not be blank","input":"\n","ctx":{"error":"output_text must not be blank"}}]}`
	wantBody(t, e.do(t, "POST", fewShotsPath, `{"input_text":" ","output_text":"\n"}`, u.Access), http.StatusUnprocessableEntity, both)
	wantBody(t, e.do(t, "GET", fewShotsPath, nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)

	created := e.createFewShot(t, u.Access, `{"input_text":"i","output_text":"o"}`)
	wantBody(t, e.do(t, "PATCH", fewShotPath(t, created), `{"input_text":" ","output_text":"\n"}`, u.Access), http.StatusUnprocessableEntity, both)
	wantBody(t, e.do(t, "GET", fewShotPath(t, created), nil, u.Access), http.StatusOK, string(created.Body))
}

// Style params go into every turn's system message, which the turn records:
// past their bound they are a field error, on a run with the turn's other
// field errors and on a settings change, and nothing is recorded.
func TestStyleParamsAreBounded(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	big := map[string]any{"persona": strings.Repeat("p", aggregates.MaxStyleParamsBytes)}
	// The error's input keeps a long string's start (validation.errors.go).
	bigJSON, _ := json.Marshal(map[string]any{"persona": strings.Repeat("p", 100) + "..."})
	styleErr := fmt.Sprintf(`{"type":"value_error","loc":["body","style_params"],"msg":"Value error, style params hold at most %[1]d bytes as JSON",`+
		`"input":%[2]s,"ctx":{"error":"style params hold at most %[1]d bytes as JSON"}}`, aggregates.MaxStyleParamsBytes, bigJSON)

	res := e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": " \t ", "style_params": big}, c.student.Access)
	wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[`+blankPrompt+`,`+styleErr+`]}`)
	wantBody(t, e.do(t, "GET", sessionsPath, nil, c.student.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)

	_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "one"})
	settings := sessionPath(turn.SessionID) + "/settings"
	wantBody(t, e.do(t, "PATCH", settings, map[string]any{"style_params": big}, c.student.Access),
		http.StatusUnprocessableEntity, `{"detail":[`+styleErr+`]}`)
	got := e.do(t, "GET", sessionPath(turn.SessionID), nil, c.student.Access)
	if style := got.JSON.(map[string]any)["settings"].(map[string]any)["style_params"]; len(style.(map[string]any)) != 0 {
		t.Errorf("%s: style params %v recorded", got, style)
	}
	// Within the bound, the session's turns still have room.
	fits := map[string]any{"persona": strings.Repeat("p", aggregates.MaxStyleParamsBytes-len(`{"persona":""}`))}
	wantStatus(t, e.do(t, "PATCH", settings, map[string]any{"style_params": fits}, c.student.Access), http.StatusOK)
	wantStatus(t, e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "two"}, c.student.Access), http.StatusOK)
}
