package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lectern/poll"
)

// The service's metrics handler serves the Prometheus exposition: requests
// by route pattern (never the raw path), events appended, projection health.
// It is not served on the API's address (lectern serve puts it on
// LECTERN_METRICS_ADDR), and stays out of the OpenAPI document.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t) // appends events
	e.do(t, "GET", "/agents/987654321", nil, u.Access)
	e.send(t, "GET", "/no-such-route-4711", nil, "")
	e.do(t, "GET", "/healthz", nil, "")

	wantDetail(t, e.send(t, "GET", "/metrics", nil, ""), http.StatusNotFound, "Not Found")

	rec := httptest.NewRecorder()
	e.svc.Metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("metrics: status %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text exposition format", ct)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`lectern_http_requests_total{method="GET",route="/healthz",status="200"} `,
		`lectern_http_requests_total{method="GET",route="/agents/{agent_id}",status="`,
		`lectern_http_requests_total{method="GET",route="unmatched",status="404"} `,
		`lectern_http_request_duration_seconds_bucket{method="GET",route="/healthz",status="200",le="`,
		`lectern_events_appended_total{event_type="`,
		`lectern_projection_stalled{projection="`,
		`lectern_projection_lag_events{projection="`,
		`lectern_projection_lag_seconds{projection="`,
		`lectern_projection_skipped_events_total{projection="`,
		`lectern_commands_version_conflicts_total{outcome="retried"} `,
		`lectern_commands_version_conflicts_total{outcome="gave_up"} `,
		`lectern_db_pool_acquired_conns{pool="main"} `,
		`lectern_db_pool_max_conns{pool="projections"} `,
		`lectern_db_pool_acquire_wait_seconds_total{pool="main"} `,
		`go_goroutines `,
	} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("/metrics lacks a line starting %q", want)
		}
	}
	for _, raw := range []string{"987654321", "no-such-route-4711"} {
		if strings.Contains(body, raw) {
			t.Errorf("the raw path segment %q is in /metrics", raw)
		}
	}
	if _, ok := e.doc.Paths["/metrics"]; ok {
		t.Error("/metrics is in the OpenAPI document")
	}
}

// metricValue reads one sample of the service's exposition; 0 when absent.
func metricValue(t *testing.T, e *env, sample string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	e.svc.Metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// Concurrent edits of one agent race for its stream's version: the losers
// retry, and the service counts those retries.
func TestMetricsCountVersionConflicts(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	path := agentPath(e.createAgent(t, u.Access, map[string]any{"name": "Raced", "system_prompt": "p"}), t)
	const retried = `lectern_commands_version_conflicts_total{outcome="retried"}`
	before := metricValue(t, e, retried)
	round := 0
	poll.Must(t, 60*time.Second, "a version conflict counted as retried", func() bool {
		round++
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := e.send(t, "PATCH", path, map[string]any{"system_prompt": fmt.Sprintf("round %d writer %d", round, i)}, u.Access)
				if res.Status != http.StatusOK && res.Status != http.StatusConflict {
					t.Errorf("%s: want 200, or 409 after every retry lost", res)
				}
			}()
		}
		wg.Wait()
		return metricValue(t, e, retried) > before
	})
}
