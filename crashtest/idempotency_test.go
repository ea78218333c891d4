package crashtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"lectern/eventstore"
	"lectern/failpoint"
	"lectern/poll"
)

// doKeyed is do with an Idempotency-Key.
func (s *system) doKeyed(method, path, body, key string) (int, []byte) {
	req, err := http.NewRequest(method, s.url(path), strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil // the process died under the request
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, data
}

// agentIDsInLog counts each agent's agent.created events in the log.
func (s *system) agentIDsInLog() map[int64]int {
	s.t.Helper()
	out := map[int64]int{}
	s.eachAgentCreated(func(ev eventstore.RecordedEvent) {
		var data struct {
			ID int64 `json:"agent_id"`
		}
		if err := json.Unmarshal(ev.Data, &data); err != nil || data.ID == 0 {
			s.t.Fatalf("agent.created %s: %s (%v)", ev.ID, ev.Data, err)
		}
		out[data.ID]++
	})
	return out
}

// Requests in flight when the process is killed (one of them after its
// append, at the failpoint), retried with their Idempotency-Keys once it is
// back, each complete exactly once: no 409 past the lease, no second agent.
func TestCrashRetriedWithKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills lectern processes")
	}
	for _, store := range []string{"postgres", "esdbfake"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			s := newSystem(t, store)
			s.start("LECTERN_FAILPOINT=" + failpoint.AppendCommitted + ":10")
			var mu sync.Mutex
			acked := map[string]int64{}
			var inFlight []string // names, which are their keys too
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						name := fmt.Sprintf("keyed %d-%d", w, i)
						status, body := s.doKeyed("POST", "/agents", fmt.Sprintf(`{"name":%q,"system_prompt":"p"}`, name), name)
						mu.Lock()
						switch status {
						case 0:
							inFlight = append(inFlight, name)
						case http.StatusCreated:
							var out struct {
								ID int64 `json:"agent_id"`
							}
							_ = json.Unmarshal(body, &out)
							acked[name] = out.ID
						default:
							t.Errorf("POST /agents: %d %s", status, body)
						}
						mu.Unlock()
						if status != http.StatusCreated {
							return
						}
					}
				}()
			}
			wg.Wait()
			s.killed(30*time.Second, false)
			// One of them, the failpoint's, appended before the kill (the log
			// shows it once the dead process's transactions have ended).
			appended := 0
			poll.Must(t, 30*time.Second, "the failpoint's append in the log", func() bool {
				appended = len(s.agentIDsInLog()) - len(acked)
				return appended > 0
			})

			s.start()
			for _, name := range inFlight {
				var status int
				var body []byte
				// Within the dead request's lease the key is in progress.
				poll.Must(t, 30*time.Second, "a retry of "+name+" past its lease", func() bool {
					status, body = s.doKeyed("POST", "/agents", fmt.Sprintf(`{"name":%q,"system_prompt":"p"}`, name), name)
					return status != http.StatusConflict || !strings.Contains(string(body), "still in progress")
				})
				if status != http.StatusCreated {
					t.Fatalf("retry of %s: %d %s", name, status, body)
				}
				var out struct {
					ID int64 `json:"agent_id"`
				}
				_ = json.Unmarshal(body, &out)
				acked[name] = out.ID
			}
			// Each agent once in the log, and none besides.
			logged := s.agentIDsInLog()
			if len(logged) != len(acked) {
				t.Errorf("%d agents in the log, %d acknowledged", len(logged), len(acked))
			}
			for name, id := range acked {
				if logged[id] != 1 {
					t.Errorf("%s (agent %d): %d agent.created events", name, id, logged[id])
				}
				if status, body := s.do("GET", fmt.Sprintf("/agents/%d", id), ""); status != http.StatusOK {
					t.Errorf("%s (agent %d): %d %s", name, id, status, body)
				}
			}
			t.Logf("%d requests in flight at the kill (%d had appended), each completed once by its retry", len(inFlight), appended)
		})
	}
}
