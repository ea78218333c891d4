package api_test

// The practice page's app.js, as served, run under Node in a DOM stub
// (testdata/practice_page.js) against a test server: what a student's
// clicks leave the page on, where no browser is at hand.

import (
	"context"
	"encoding/json"
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
