package crashtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lectern/eventstore"
)

// slowModels is a catalogue of one echo model that streams a word every
// half second: a turn of a few words is still running when the test asks
// the process to stop.
const slowModels = `models:
  - id: 1
    name: slow-echo
    provider: echo
    timeout: 30s
    retries: 0
    stream_delay: 500ms
    default: true
`

// A process asked to stop (SIGTERM, as an orchestrator asks) finishes the
// practice turn it is streaming: the student gets the whole answer, the
// turn is recorded, and the process then exits cleanly.
func TestShutdownFinishesAStreamingTurn(t *testing.T) {
	s := newSystem(t, "postgres")
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(slowModels), 0o600); err != nil {
		t.Fatal(err)
	}
	s.run(nil, "users", "create", "--email", "root@example.com", "--name", "Root", "--password", "correct horse", "--admin")
	s.start("LECTERN_MODELS_FILE=" + models)
	student := s.token // ada (user 1)
	s.token = s.login("root@example.com")
	org := s.created("POST", "/admin/organizations", `{"name":"Shutdown School"}`)
	partner := s.created("POST", fmt.Sprintf("/partner/partners?org_id=%d", org),
		fmt.Sprintf(`{"org_id":%d,"full_name":"Root","email":"root@example.com","user_id":2,"is_active":true}`, org))
	class := s.created("POST", fmt.Sprintf("/partner/%d/classes", partner), `{"name":"Practice"}`)
	s.created("POST", fmt.Sprintf("/partner/%d/student/1/enrollments", partner), fmt.Sprintf(`{"class_id":%d,"student_id":1}`, class))

	prompt := "one two three four five six"
	req, err := http.NewRequest("POST", s.url(fmt.Sprintf("/user/practice/sessions/run?class_id=%d", class)),
		strings.NewReader(fmt.Sprintf(`{"prompt_text":%q}`, prompt)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+student)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("the streamed turn: %d", res.StatusCode)
	}
	events := map[string]string{}
	stopped := false
	sc := bufio.NewScanner(res.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			events[name] = strings.TrimPrefix(line, "data: ")
			if name == "delta" && !stopped {
				// The first words are out, the rest to come: stop now.
				if err := s.serve.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				stopped = true
			}
		}
	}
	if !stopped {
		t.Fatalf("the turn streamed no delta before it ended: %v", events)
	}
	var turn struct {
		SessionID int64 `json:"session_id"`
		Results   []struct {
			ResponseText string `json:"response_text"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(events["turn"]), &turn); err != nil || len(turn.Results) != 1 || turn.Results[0].ResponseText != prompt {
		t.Fatalf("the stream ended with %v (%v): want the whole turn after the stop was asked for", events, err)
	}
	select {
	case err := <-s.exit:
		if err != nil {
			t.Fatalf("lectern serve exited with %v after the stop\n%s", err, s.logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("lectern serve did not exit within 30 s of the turn's end\n%s", s.logs)
	}
	evs, err := s.store.ReadStream(t.Context(), fmt.Sprintf("session-%d", turn.SessionID), eventstore.Forwards, 1, 10)
	if err != nil || len(evs) != 2 {
		t.Fatalf("the session's events: %d (%v), want the start and the turn recorded", len(evs), err)
	}
}

// login returns the access token of email's account (password "correct horse").
func (s *system) login(email string) string {
	s.t.Helper()
	status, body := s.do("POST", "/user/login", fmt.Sprintf(`{"email":%q,"password":"correct horse"}`, email))
	var out struct {
		Access string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &out); status != http.StatusOK || err != nil {
		s.t.Fatalf("login of %s: %d %s", email, status, body)
	}
	return out.Access
}

// created makes a request that must answer 201 and returns the id it names.
func (s *system) created(method, path, body string) int64 {
	s.t.Helper()
	status, data := s.do(method, path, body)
	var out struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(data, &out); status != http.StatusCreated || err != nil || out.ID == 0 {
		s.t.Fatalf("%s %s: %d %s", method, path, status, data)
	}
	return out.ID
}
