package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
