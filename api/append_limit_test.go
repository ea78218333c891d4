package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// One write's events are capped at EventStoreDB's 1 MiB append limit on
// both stores. A document's text is a blob, so what can still reach it is a
// practice turn: a 100 000-character prompt of four-byte characters, echoed
// by two models, makes a turn of 1.2 MB. It is refused with 413 and nothing
// is recorded.
func TestTurnOverTheAppendLimit(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	body := `{"prompt_text":"` + strings.Repeat("\U0001F600", 100000) + `","model_names":["echo","echo-reverse"]}`
	res := e.do(t, "POST", runPath(c.class), body, c.student.Access)
	wantDetail(t, res, http.StatusRequestEntityTooLarge, "The change is too large to record: one write holds at most 1048576 bytes")
	wantBody(t, e.do(t, "GET", sessionsPath, nil, c.student.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}
