package downstream_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/extensions"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"lectern/pgtest"
	"lectern/poll"
	"lectern/service"
)

// With tracing on, a published change carries the trace context its event
// recorded: that of the append, in the trace of the request that made it.
func TestPublishedEventsCarryTheirTrace(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	pool := pgtest.Fresh(t)
	h := start(t, pool, service.Config{Tracing: tp})
	sub := sqlSubscriber(t, pool, "traced")

	_, admin := h.user("admin@example.com")
	teacherID, _ := h.user("teacher@example.com")
	org := id(h.do(http.MethodPost, "/admin/organizations", admin, `{"name":"Riverside School"}`, http.StatusCreated))
	partner := id(h.do(http.MethodPost, fmt.Sprintf("/partner/partners?org_id=%d", org), admin,
		fmt.Sprintf(`{"org_id":%d,"full_name":"Teacher","email":"teacher@example.com","user_id":%d}`, org, teacherID), http.StatusCreated))

	got := receive(t, sub, 1, 15*time.Second)[0]
	if got.CE.Type() != "lectern.partner.created" {
		t.Fatalf("first message %s, want lectern.partner.created", got.CE.Type())
	}
	var recorded string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(metadata->>'traceparent', '') FROM events WHERE stream_id = $1`,
		fmt.Sprintf("partner-%d", partner)).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	ext, ok := extensions.GetDistributedTracingExtension(got.CE)
	if recorded == "" || !ok || ext.TraceParent != recorded {
		t.Fatalf("the CloudEvent's traceparent = %q (%v), want the event's %q", ext.TraceParent, ok, recorded)
	}
	var server trace.SpanContext
	// The server span ends once the response is written, maybe after the
	// client has read it.
	poll.Must(t, 10*time.Second, "the server span ended", func() bool {
		for _, s := range spans.GetSpans().Snapshots() {
			if s.Name() == "POST /partner/partners" {
				server = s.SpanContext()
			}
		}
		return server.IsValid()
	})
	if want := server.TraceID().String(); recorded[3:35] != want {
		t.Errorf("traceparent %s is not in the trace of the request's server span %s", recorded, want)
	}
}
