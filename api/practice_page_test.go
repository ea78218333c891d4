package api_test

// The practice page's app.js, as served, run under Node in a DOM stub
// (testdata/practice_page.js) against a test server: what a student's
// clicks leave the page on, where no browser is at hand.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lectern/llm"
)

// A first turn whose every model fails records nothing, not even the
// session its stream named: the page stays on a new conversation, and the
// next prompt starts a session (POST .../run) and is answered, rather than
// going to the unrecorded session's /chat and its 404.
func TestPracticePageStartsAfreshAfterAFailedFirstTurn(t *testing.T) {
	t.Parallel()
	broken := newFakeProvider(t, http.StatusInternalServerError, "")
	brokenModel := broken.model(1, "broken")
	brokenModel.Default = true
	e := newStreamEnv(t, streamEnvConfig{models: []llm.Model{brokenModel,
		{ID: 2, Name: "echo", Provider: llm.ProviderEcho, Timeout: 5 * time.Second}}})
	c := e.newClassroom(t, nil)

	var got struct {
		First, Second   string // the status line after each turn
		SecondRecorded  string // the second turn's data-recorded
		SecondRequested string // the POSTs the second prompt sent
	}
	runPracticePage(t, e, c, "failed-first", &got)
	if !strings.HasPrefix(got.First, "Every model of the turn failed") {
		t.Fatalf("the first turn's status %q, want the 502's detail", got.First)
	}
	if got.Second != "" || got.SecondRecorded != "true" || !strings.Contains(got.SecondRequested, "/run?class_id=") {
		t.Errorf("after a failed first turn, the next prompt (to echo) went to %s and shows %q (recorded %q); want a new session (POST .../run) and its turn",
			got.SecondRequested, got.Second, got.SecondRecorded)
	}
}

// Clicking New while a turn streams leaves the page on a new conversation:
// the stream, which goes on and is recorded, does not set the page back on
// its session, and the next prompt starts a session (POST .../run) instead
// of continuing that one (POST .../chat).
func TestPracticePageNewDuringAStreamStartsANewSession(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, streamEnvConfig{models: []llm.Model{{ID: 1, Name: "echo", Provider: llm.ProviderEcho,
		Timeout: 10 * time.Second, StreamDelay: 50 * time.Millisecond, Default: true}}})
	c := e.newClassroom(t, nil)

	var got struct {
		Turns           int    // the turns shown once the stream has ended
		SecondRequested string // the POSTs the next prompt sent
	}
	runPracticePage(t, e, c, "new-during-stream", &got)
	if got.Turns != 0 || !strings.Contains(got.SecondRequested, "/run?class_id=") {
		t.Errorf("after New, the page showed %d turn(s) and the next prompt went to %s; want none, and POST .../run (a new session)",
			got.Turns, got.SecondRequested)
	}
}

// A first turn whose stream is cut short (the connection lost after its
// first delta, before the event that says the turn is recorded) is not on a
// session: the page says the answer was interrupted, puts the prompt back
// to be sent again, and, the session it was named not being recorded (the
// page reads it again: 404), is back on a new conversation; the next prompt
// starts a session (POST .../run) and is answered.
func TestPracticePageInterruptedFirstTurnStartsAfresh(t *testing.T) {
	t.Parallel()
	e := newInterruptEnv(t)
	c := e.newClassroom(t, nil)

	var got struct {
		Cut           pageShown
		Reread        []string // the sessions the page read again (GET)
		NextRequested string   // the POSTs the next prompt sent
		Next          pageShown
	}
	runPracticePage(t, e, c, "cut-first", &got)
	if !strings.Contains(got.Cut.Status, "interrupted") || !got.Cut.StatusIsError {
		t.Errorf("after the cut, the status line says %q (error %v); want that the answer was interrupted", got.Cut.Status, got.Cut.StatusIsError)
	}
	if got.Cut.Prompt != "an interrupted first prompt" {
		t.Errorf("after the cut, the prompt box holds %q; want the prompt back, to be sent again", got.Cut.Prompt)
	}
	if got.Cut.Session != nil || len(got.Cut.Turns) != 0 {
		t.Errorf("after the cut, the page is on session %s and shows turns %v; want a new conversation (the session was never recorded)",
			sessionOf(got.Cut.Session), got.Cut.Turns)
	}
	if len(got.Reread) != 1 {
		t.Errorf("the page read again %v; want the session the stream named, once", got.Reread)
	}
	if !strings.Contains(got.NextRequested, "/run?class_id=") || got.Next.Status != "" || got.Next.Session == nil ||
		len(got.Next.Turns) != 1 || got.Next.Turns[0] != "true" {
		t.Errorf("the next prompt went to %s and left %v; want a new session (POST .../run) and its recorded turn", got.NextRequested, got.Next)
	}
}

// A later turn whose stream is cut short (its body ends after the first
// delta) leaves the page on its session, which exists: the earlier turn
// still shown, the interrupted one marked unrecorded, the interruption said
// and the prompt put back; the next prompt continues the session.
func TestPracticePageInterruptedLaterTurnStaysOnItsSession(t *testing.T) {
	t.Parallel()
	e := newInterruptEnv(t)
	c := e.newClassroom(t, nil)

	var got struct {
		First         *int64 // the session of the first, recorded, turn
		Cut           pageShown
		Reread        []string
		NextRequested string
		Next          pageShown
	}
	runPracticePage(t, e, c, "cut-later", &got)
	if got.First == nil {
		t.Fatal("the first turn left the page on no session")
	}
	if !strings.Contains(got.Cut.Status, "interrupted") || !got.Cut.StatusIsError {
		t.Errorf("after the cut, the status line says %q (error %v); want that the answer was interrupted", got.Cut.Status, got.Cut.StatusIsError)
	}
	if got.Cut.Prompt != "an interrupted second prompt" {
		t.Errorf("after the cut, the prompt box holds %q; want the prompt back, to be sent again", got.Cut.Prompt)
	}
	if got.Cut.Session == nil || *got.Cut.Session != *got.First || strings.Join(got.Cut.Turns, ",") != "true,false" {
		t.Errorf("after the cut, the page is on session %s showing turns %v; want session %d, its recorded turn and the interrupted one",
			sessionOf(got.Cut.Session), got.Cut.Turns, *got.First)
	}
	if len(got.Cut.Columns) != 2 || got.Cut.Columns[1] != "error: Half an" {
		t.Errorf("after the cut, the columns show %q; want the interrupted one's first piece kept, marked as ended", got.Cut.Columns)
	}
	if want := fmt.Sprintf("/user/practice/sessions/%d", *got.First); len(got.Reread) != 1 || got.Reread[0] != want {
		t.Errorf("the page read again %v; want %s, once", got.Reread, want)
	}
	if !strings.Contains(got.NextRequested, fmt.Sprintf("/%d/chat", *got.First)) || got.Next.Status != "" ||
		got.Next.Session == nil || *got.Next.Session != *got.First {
		t.Errorf("the next prompt went to %s and left %v; want the session continued (POST .../%d/chat)", got.NextRequested, got.Next, *got.First)
	}
}

// A first turn whose stream is cut short just before its turn event was
// recorded all the same: the page, reading the session again, finds it,
// stays on it and shows the turn as recorded, with the interruption said
// and the prompt not put back (sending it again would ask twice).
func TestPracticePageInterruptedTurnFoundRecorded(t *testing.T) {
	t.Parallel()
	e := newInterruptEnv(t)
	c := e.newClassroom(t, nil)

	var got struct {
		Cut    pageShown
		Reread []string
		Listed []string // the sessions listed, the current one starred
	}
	runPracticePage(t, e, c, "cut-before-turn", &got)
	if got.Cut.Session == nil {
		t.Fatalf("after the cut, the page is on a new conversation, showing turns %v; want the recorded session", got.Cut.Turns)
	}
	if want := fmt.Sprintf("/user/practice/sessions/%d", *got.Cut.Session); len(got.Reread) != 1 || got.Reread[0] != want {
		t.Errorf("the page read again %v; want %s, once", got.Reread, want)
	}
	if strings.Join(got.Cut.Turns, ",") != "true" || strings.Join(got.Cut.Columns, ",") != "done: a first prompt recorded unseen" {
		t.Errorf("after the cut, the page shows turns %v, columns %v; want the recorded turn", got.Cut.Turns, got.Cut.Columns)
	}
	if !strings.Contains(got.Cut.Status, "interrupted") || got.Cut.Prompt != "" {
		t.Errorf("after the cut, the status line says %q and the prompt box holds %q; want the interruption said, and the box empty",
			got.Cut.Status, got.Cut.Prompt)
	}
	if want := fmt.Sprintf("%d*", *got.Cut.Session); strings.Join(got.Listed, ",") != want {
		t.Errorf("the sessions listed are %v; want %s", got.Listed, want)
	}
}

// pageShown is what the page shows once a turn has ended (the harness's
// shown).
type pageShown struct {
	Status        string   // the status line
	StatusIsError bool     // shown as an error
	Prompt        string   // the prompt box
	Turns         []string // each turn's data-recorded
	Columns       []string // each column's state and text
	Session       *int64   // the session the page is on; nil: a new one
}

// sessionOf shows a session id, or "none".
func sessionOf(id *int64) string {
	if id == nil {
		return "none"
	}
	return fmt.Sprint(*id)
}

// String shows what the page shows.
func (p pageShown) String() string {
	return fmt.Sprintf("{status %q (error %v), prompt box %q, turns %v, columns %q, session %s}",
		p.Status, p.StatusIsError, p.Prompt, p.Turns, p.Columns, sessionOf(p.Session))
}

// newInterruptEnv is a stream environment with echo (the default) and
// stall, a model that streams its first piece and then nothing until its
// 2 s timeout: a turn of stall's alone is never recorded.
func newInterruptEnv(t *testing.T) *env {
	t.Helper()
	stall := newStreamingProvider(t, []string{"Half an", " answer"}, 0, time.Minute).model(2, "stall")
	stall.Timeout = 2 * time.Second
	return newStreamEnv(t, streamEnvConfig{models: []llm.Model{
		{ID: 1, Name: "echo", Provider: llm.ProviderEcho, Timeout: 5 * time.Second, Default: true}, stall}})
}

// runPracticePage runs the served app.js under Node against e, signed in as
// c's student, through scenario (testdata/practice_page.js), and decodes
// the JSON line it prints into out.
func runPracticePage(t *testing.T, e *env, c classroom, scenario string, out any) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the practice page's app.js runs under Node (20 or later)")
	}
	harness, err := filepath.Abs(filepath.Join("testdata", "practice_page.js"))
	if err != nil {
		t.Fatal(err)
	}
	app := e.send(t, "GET", "/app/app.js", nil, "")
	wantStatus(t, app, http.StatusOK)
	appPath := filepath.Join(t.TempDir(), "app.js")
	if err := os.WriteFile(appPath, app.Body, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, harness, e.srv.URL, c.student.Access, c.student.Refresh, appPath, scenario)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s%s", err, stdout, stderr.String())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("the harness printed %q: %v\n%s", stdout, err, stderr.String())
	}
}
