// Package metrics is Lectern's Prometheus instrumentation: HTTP requests by
// route pattern, events appended, projection health and lag, and model calls.
//
// Every metric lives in the registry a Metrics owns (never the global default
// registry); the service creates one Metrics and passes it where it is needed.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const namespace = "lectern"

// UnmatchedRoute is the route label of a request no route matched (404, 405):
// the raw path is never a label.
const UnmatchedRoute = "unmatched"

// OutcomeOK is the outcome of a model call that answered.
const OutcomeOK = "ok"

// Metrics holds Lectern's metrics and the registry that exposes them. It is
// safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	inFlight     prometheus.Gauge

	eventsAppended *prometheus.CounterVec
	appendFailures *prometheus.CounterVec
	rateLimited    *prometheus.CounterVec
	conflicts      *prometheus.CounterVec

	modelCalls    *prometheus.CounterVec
	modelDuration *prometheus.HistogramVec

	projOnce sync.Once
}

// New returns a Metrics with its own registry, holding the Go runtime and
// process collectors besides Lectern's own metrics.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests served, by method, route pattern and status code.",
		}, []string{"method", "route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "HTTP request latency, by method, route pattern and status code.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route", "status"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "http", Name: "requests_in_flight",
			Help: "HTTP requests being served.",
		}),
		eventsAppended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "events", Name: "appended_total",
			Help: "Events appended to the event store, by event type.",
		}, []string{"event_type"}),
		appendFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "events", Name: "append_failures_total",
			Help: "Appends the event store refused, by reason: conflict (another write came first; the command retries, or answers 409), unavailable, too_large, other.",
		}, []string{"reason"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "http", Name: "rate_limited_total",
			Help: "Requests refused by a rate limit (429), by route pattern.",
		}, []string{"route"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "commands", Name: "version_conflicts_total",
			Help: "Commands whose append lost a version race, by outcome: retried (the command decided again) or gave_up (answered 409 after its last attempt).",
		}, []string{"outcome"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "model", Name: "calls_total",
			Help: "Model calls, by logical model name and outcome (ok, or the error kind).",
		}, []string{"model", "outcome"}),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "model", Name: "call_duration_seconds",
			Help:    "Model call latency (every attempt and backoff included), by model and outcome.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120},
		}, []string{"model", "outcome"}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpRequests, m.httpDuration, m.inFlight, m.eventsAppended, m.appendFailures, m.rateLimited, m.conflicts, m.modelCalls, m.modelDuration,
	)
	// Both outcomes from the start, so a rate over them is 0 rather than absent.
	m.conflicts.WithLabelValues(ConflictRetried)
	m.conflicts.WithLabelValues(ConflictGaveUp)
	return m
}

// Registry returns the registry the metrics are registered with (tests gather
// from it; other packages may register their own collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in the Prometheus exposition format. A collector
// that fails leaves its metrics out; the rest are still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.registry, // promhttp_metric_handler_errors_total
	})
}

// Middleware counts and times each request by method, chi route pattern and
// status. The pattern is read after the request, when chi has routed it; a
// request no route matched is labelled UnmatchedRoute, never by its path.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			if p := recover(); p != nil {
				// An inner handler re-panicked (http.ErrAbortHandler): the
				// connection is dropped, which the client sees as no answer.
				if rec.status == 0 {
					status = http.StatusInternalServerError
				}
				m.observeRequest(r, status, time.Since(start))
				panic(p)
			}
			m.observeRequest(r, status, time.Since(start))
		}()
		next.ServeHTTP(rec, r)
	})
}

func (m *Metrics) observeRequest(r *http.Request, status int, d time.Duration) {
	route := UnmatchedRoute
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			route = p
		}
	}
	// Only the methods the API routes; anything else would be a free-form label.
	method := r.Method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
	default:
		method = "OTHER"
	}
	code := strconv.Itoa(status)
	if status == http.StatusTooManyRequests {
		m.rateLimited.WithLabelValues(route).Inc()
	}
	m.httpRequests.WithLabelValues(method, route, code).Inc()
	m.httpDuration.WithLabelValues(method, route, code).Observe(d.Seconds())
}

// ObserveModelCall records one model call: its logical model name, its
// outcome (OutcomeOK or an llm error kind) and its latency.
func (m *Metrics) ObserveModelCall(model, outcome string, d time.Duration) {
	m.modelCalls.WithLabelValues(model, outcome).Inc()
	m.modelDuration.WithLabelValues(model, outcome).Observe(d.Seconds())
}

// Outcomes of a version conflict (lectern_commands_version_conflicts_total).
const (
	ConflictRetried = "retried"
	ConflictGaveUp  = "gave_up"
)

// VersionConflict counts a command's lost version race: retried, or given up
// (commands.Observer).
func (m *Metrics) VersionConflict(retried bool) {
	outcome := ConflictGaveUp
	if retried {
		outcome = ConflictRetried
	}
	m.conflicts.WithLabelValues(outcome).Inc()
}

// EventsAppended counts n events of eventType appended.
func (m *Metrics) EventsAppended(eventType string, n int) {
	if n <= 0 {
		return
	}
	m.eventsAppended.WithLabelValues(eventType).Add(float64(n))
}

// ProjectionStatus is one projection's health as seen on a scrape.
type ProjectionStatus struct {
	Name    string
	Stalled bool
	// Skipped counts the events it passed over (dead letters).
	Skipped int64
	// Lag is how many visible events of the log lie past the projection's
	// committed position; negative: unknown (not exported).
	Lag float64
	// LagSeconds is the age of the oldest event the projection has not
	// applied (0: caught up); negative: unknown (not exported).
	LagSeconds float64
}

// ProjectionSource reports every projection's status; it is called on each
// scrape, with a context bounded by ScrapeTimeout.
type ProjectionSource func(ctx context.Context) ([]ProjectionStatus, error)

// ScrapeTimeout bounds one call of a ProjectionSource.
const ScrapeTimeout = 5 * time.Second

// RegisterProjections exports the statuses src reports on each scrape as
// lectern_projection_stalled, lectern_projection_lag_events,
// lectern_projection_lag_seconds and lectern_projection_skipped_events_total. Only the first call registers.
func (m *Metrics) RegisterProjections(src ProjectionSource) {
	m.projOnce.Do(func() { m.registry.MustRegister(newProjectionCollector(src)) })
}

type projectionCollector struct {
	src                                  ProjectionSource
	stalled, lagEvents, lagSecs, skipped *prometheus.Desc
}

func newProjectionCollector(src ProjectionSource) *projectionCollector {
	label := []string{"projection"}
	return &projectionCollector{
		src: src,
		stalled: prometheus.NewDesc(namespace+"_projection_stalled",
			"Whether the projection has stopped on an event it cannot apply (1) or runs (0).", label, nil),
		lagEvents: prometheus.NewDesc(namespace+"_projection_lag_events",
			"Visible events of the log past the projection's committed position.", label, nil),
		lagSecs: prometheus.NewDesc(namespace+"_projection_lag_seconds",
			"Age of the oldest event the projection has not applied (0: caught up).", label, nil),
		skipped: prometheus.NewDesc(namespace+"_projection_skipped_events_total",
			"Events the projection passed over without applying them, by its policy or an operator's skip (dead letters).", label, nil),
	}
}

func (c *projectionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stalled
	ch <- c.lagEvents
	ch <- c.lagSecs
	ch <- c.skipped
}

func (c *projectionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	statuses, err := c.src(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.lagEvents, err)
	}
	for _, s := range statuses {
		stalled := 0.0
		if s.Stalled {
			stalled = 1
		}
		ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.GaugeValue, stalled, s.Name)
		ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(s.Skipped), s.Name)
		if s.Lag >= 0 {
			ch <- prometheus.MustNewConstMetric(c.lagEvents, prometheus.GaugeValue, s.Lag, s.Name)
		}
		if s.LagSeconds >= 0 {
			ch <- prometheus.MustNewConstMetric(c.lagSecs, prometheus.GaugeValue, s.LagSeconds, s.Name)
		}
	}
}

// recorder remembers the status a handler writes.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 { // 1xx are interim answers
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush passes flushes through (streamed responses).
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush() // best effort, as http.Flusher
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
