package tracing_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"lectern/tracing"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"an OTLP endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"an OTLP traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"an exporter", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{"SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{"SDK not disabled", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"only other signals", map[string]string{"OTEL_SERVICE_NAME": "lectern", "OTEL_METRICS_EXPORTER": "otlp"}, false},
	} {
		if got := tracing.Enabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%s: Enabled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Off, Setup installs nothing: no provider, and a shutdown that does nothing.
func TestSetupOff(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	tp, shutdown, err := tracing.Setup(context.Background())
	if err != nil || tp != nil {
		t.Fatalf("Setup = %v, %v; want no provider", tp, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSetupConsole(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	tp, shutdown, err := tracing.Setup(context.Background())
	if err != nil || tp == nil {
		t.Fatalf("Setup = %v, %v; want a provider", tp, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A span's context goes into metadata as a W3C traceparent and comes back
// as a link to the same span.
func TestContextAndLink(t *testing.T) {
	if tp, ts := tracing.Context(context.Background()); tp != "" || ts != "" {
		t.Errorf("no span: Context = %q %q, want none", tp, ts)
	}
	provider := sdktrace.NewTracerProvider()
	defer func() { _ = provider.Shutdown(context.Background()) }()
	ctx, span := provider.Tracer("test").Start(context.Background(), "append")
	defer span.End()
	state, err := trace.ParseTraceState("lectern=1")
	if err != nil {
		t.Fatal(err)
	}
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(state))
	parent, tstate := tracing.Context(ctx)
	sc := span.SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; parent != want || tstate != "lectern=1" {
		t.Errorf("Context = %q %q, want %q %q", parent, tstate, want, "lectern=1")
	}
	link, ok := tracing.Link(parent, tstate)
	if !ok || link.SpanContext.TraceID() != sc.TraceID() || link.SpanContext.SpanID() != sc.SpanID() ||
		link.SpanContext.TraceState().String() != "lectern=1" {
		t.Errorf("Link = %+v, %v; want the span %s", link, ok, sc.SpanID())
	}
	for _, bad := range []string{"", "00-zz-yy-01", "00-00000000000000000000000000000000-0000000000000000-01"} {
		if _, ok := tracing.Link(bad, ""); ok {
			t.Errorf("Link(%q) = ok, want none", bad)
		}
	}
}

// A nil provider leaves a pool's configuration as it is; a provider adds a
// tracer.
func TestInstrumentPool(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://localhost/lectern")
	if err != nil {
		t.Fatal(err)
	}
	tracing.InstrumentPool(cfg, nil)
	if cfg.ConnConfig.Tracer != nil {
		t.Errorf("off: tracer %T, want none", cfg.ConnConfig.Tracer)
	}
	tracing.InstrumentPool(cfg, sdktrace.NewTracerProvider())
	if cfg.ConnConfig.Tracer == nil {
		t.Error("on: no tracer")
	}
}
