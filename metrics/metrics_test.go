package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lectern/eventstore"
	"lectern/llm"
	"lectern/metrics"
)

// scrape serves GET /metrics from m and returns the exposition text.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain exposition", ct)
	}
	return rec.Body.String()
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("the exposition lacks the line %q", l)
		}
	}
}

func TestMiddlewareLabelsByRoutePattern(t *testing.T) {
	m := metrics.New()
	r := chi.NewRouter()
	r.Use(m.Middleware)
	r.Get("/classes/{id}", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	r.Post("/classes/{id}/students", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	r.Get("/empty", func(http.ResponseWriter, *http.Request) {}) // writes nothing: 200
	r.Route("/nested", func(r chi.Router) {
		r.Get("/{x}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	})

	for _, req := range []struct{ method, path string }{
		{"GET", "/classes/1"}, {"GET", "/classes/2"}, {"GET", "/classes/3?x=y"},
		{"POST", "/classes/9/students"},
		{"GET", "/empty"},
		{"GET", "/nested/abc"},
		{"GET", "/no/such/route/123"}, {"GET", "/another-unknown"},
		{"DELETE", "/classes/1"}, // 405
		{"BREW", "/classes/1"},   // unknown method: one label value
	} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(req.method, req.path, nil))
	}

	body := scrape(t, m)
	wantLines(t, body,
		`lectern_http_requests_total{method="GET",route="/classes/{id}",status="200"} 3`,
		`lectern_http_requests_total{method="POST",route="/classes/{id}/students",status="201"} 1`,
		`lectern_http_requests_total{method="GET",route="/empty",status="200"} 1`,
		`lectern_http_requests_total{method="GET",route="/nested/{x}",status="418"} 1`,
		`lectern_http_requests_total{method="GET",route="unmatched",status="404"} 2`,
		`lectern_http_requests_total{method="DELETE",route="unmatched",status="405"} 1`,
		`lectern_http_request_duration_seconds_count{method="GET",route="/classes/{id}",status="200"} 3`,
		`lectern_http_requests_in_flight 0`,
	)
	if strings.Contains(body, `method="BREW"`) {
		t.Error("an unknown method became a label value")
	}
	for _, raw := range []string{"/classes/1", "/no/such/route", "/nested/abc", "another-unknown"} {
		if strings.Contains(body, `"`+raw) {
			t.Errorf("the raw path %q is a label value", raw)
		}
	}
	if !strings.Contains(body, "go_goroutines ") || !strings.Contains(body, "process_") {
		t.Error("the runtime and process collectors are missing")
	}
}

func TestMiddlewareCountsReraisedPanics(t *testing.T) {
	m := metrics.New()
	r := chi.NewRouter()
	r.Use(m.Middleware)
	r.Get("/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	func() {
		defer func() {
			if p := recover(); !isAbort(p) {
				t.Errorf("recovered %v, want http.ErrAbortHandler passed on", p)
			}
		}()
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/abort", nil))
	}()
	wantLines(t, scrape(t, m), `lectern_http_requests_total{method="GET",route="/abort",status="500"} 1`,
		`lectern_http_requests_in_flight 0`)
}

func TestMiddlewareKeepsFlusher(t *testing.T) {
	m := metrics.New()
	flushed := false
	h := m.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		flushed = true
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/stream", nil))
	if !flushed || !rec.Flushed {
		t.Error("the flush did not reach the underlying writer")
	}
}

func TestModelCalls(t *testing.T) {
	m := metrics.New()
	m.ObserveModelCall("gpt", metrics.OutcomeOK, 300*time.Millisecond)
	m.ObserveModelResults([]llm.Result{
		{Model: llm.Model{Name: "gpt"}, Latency: time.Second},
		{Model: llm.Model{Name: "echo"}, Latency: time.Millisecond, Err: &llm.Error{Kind: llm.KindTimeout}},
	})
	m.ObserveModelResult(llm.Result{Model: llm.Model{Name: "echo"}, Err: &llm.Error{Kind: llm.KindTimeout}})
	body := scrape(t, m)
	wantLines(t, body,
		`lectern_model_calls_total{model="gpt",outcome="ok"} 2`,
		`lectern_model_calls_total{model="echo",outcome="timeout"} 2`,
		`lectern_model_call_duration_seconds_sum{model="gpt",outcome="ok"} 1.3`,
		`lectern_model_call_duration_seconds_count{model="echo",outcome="timeout"} 2`,
	)
}

// memStore is an eventstore.Store that fails appends to the stream "bad".
type memStore struct{ eventstore.Store }

func (memStore) Append(_ context.Context, stream string, _ eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	if stream == "bad" {
		return eventstore.AppendResult{}, eventstore.ErrWrongExpectedVersion
	}
	return eventstore.AppendResult{Version: int64(len(evs))}, nil
}

func TestCountingStore(t *testing.T) {
	m := metrics.New()
	s := metrics.CountingStore(memStore{}, m)
	ctx := context.Background()
	ev := func(typ string) eventstore.EventData { return eventstore.EventData{Type: typ} }
	if res, err := s.Append(ctx, "a-1", eventstore.Any, []eventstore.EventData{ev("ClassCreated")}); err != nil || res.Version != 1 {
		t.Fatalf("Append: %v, %v", res, err)
	}
	if _, err := s.Append(ctx, "a-1", eventstore.Any, []eventstore.EventData{ev("StudentEnrolled"), ev("StudentEnrolled"), ev("ClassCreated")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "bad", eventstore.Any, []eventstore.EventData{ev("Lost")}); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Fatalf("the failed append returned %v", err)
	}
	m.EventsAppended("Nothing", 0)
	body := scrape(t, m)
	wantLines(t, body,
		`lectern_events_appended_total{event_type="ClassCreated"} 2`,
		`lectern_events_appended_total{event_type="StudentEnrolled"} 2`,
		`lectern_events_append_failures_total{reason="conflict"} 1`,
	)
	for _, typ := range []string{"Lost", "Nothing"} {
		if strings.Contains(body, `event_type="`+typ+`"`) {
			t.Errorf("%s was counted", typ)
		}
	}
}

func TestProjectionCollector(t *testing.T) {
	m := metrics.New()
	fail := false
	m.RegisterProjections(func(ctx context.Context) ([]metrics.ProjectionStatus, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the source was called without a deadline")
		}
		sts := []metrics.ProjectionStatus{
			{Name: "users", Lag: 0, LagSeconds: 0},
			{Name: "classes", Stalled: true, Lag: 12, LagSeconds: 3.5},
			{Name: "esdb", Lag: -1, LagSeconds: -1},
		}
		if fail {
			return sts[:1], errors.New("database unreachable")
		}
		return sts, nil
	})
	m.RegisterProjections(func(context.Context) ([]metrics.ProjectionStatus, error) {
		t.Error("a second source was registered")
		return nil, nil
	})
	body := scrape(t, m)
	wantLines(t, body,
		`lectern_projection_stalled{projection="users"} 0`,
		`lectern_projection_stalled{projection="classes"} 1`,
		`lectern_projection_stalled{projection="esdb"} 0`,
		`lectern_projection_lag_events{projection="users"} 0`,
		`lectern_projection_lag_events{projection="classes"} 12`,
		`lectern_projection_lag_seconds{projection="classes"} 3.5`,
	)
	if strings.Contains(body, `lag_events{projection="esdb"}`) || strings.Contains(body, `lag_seconds{projection="esdb"}`) {
		t.Error("an unknown lag was exported")
	}

	// A failing source keeps what it could report, and the rest of the scrape.
	fail = true
	m.EventsAppended("X", 1)
	body = scrape(t, m)
	wantLines(t, body,
		`lectern_projection_stalled{projection="users"} 0`,
		`lectern_events_appended_total{event_type="X"} 1`,
	)
	if strings.Contains(body, `projection="classes"`) {
		t.Error("a status the failing source did not report was exported")
	}
	// The handler counts the failed gathering (seen on the next scrape).
	if b := scrape(t, m); !strings.Contains(b, `promhttp_metric_handler_errors_total{cause="gathering"} 1`) {
		t.Errorf("the failed gathering is not counted:\n%s", grep(b, "promhttp_metric_handler_errors_total"))
	}
}

func TestLint(t *testing.T) {
	m := metrics.New()
	m.EventsAppended("X", 1)
	m.ObserveModelCall("m", "ok", time.Second)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "lectern_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// grep returns the lines of body that contain s.
func grep(body, s string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// isAbort: p is http.ErrAbortHandler.
func isAbort(p any) bool {
	err, ok := p.(error)
	return ok && errors.Is(err, http.ErrAbortHandler)
}

// Refusals by a rate limit are counted by route.
func TestRateLimitRefusalsCounted(t *testing.T) {
	m := metrics.New()
	r := chi.NewRouter()
	r.Use(m.Middleware)
	r.Post("/user/login", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })
	for range 2 {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/user/login", nil))
	}
	wantLines(t, scrape(t, m), `lectern_http_rate_limited_total{route="/user/login"} 2`)
}
