package tracing_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"lectern/pgtest"
	"lectern/tracing"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

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

// A statement's span records PostgreSQL's error (otelpgx), which may quote
// a person's value: exported, its status and its exception event tell the
// error without it. Other spans go as they are.
func TestExportedSpansHoldNoQuotedValue(t *testing.T) {
	memory := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracing.ValuelessExporter(memory)))
	defer func() { _ = provider.Shutdown(context.Background()) }()
	cfg := pgtest.Pool(t).Config()
	tracing.InstrumentPool(cfg, provider)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	ctx, span := provider.Tracer("test").Start(context.Background(), "apply")
	_, err = pool.Exec(ctx, `SELECT $1::text::int`, "Ann MRK5150")
	if err == nil || !strings.Contains(err.Error(), "MRK5150") {
		t.Fatalf("the statement's error %v: want one that quotes the value", err)
	}
	span.End()
	_, fine := provider.Tracer("test").Start(context.Background(), "fine")
	fine.SetStatus(codes.Error, `a "quoted" word`) // told valueless too
	fine.AddEvent("exception", trace.WithAttributes(attribute.String("exception.message", `one "quoted" word (SQLSTATE 22P02)`),
		attribute.String("exception.message", `two "quoted" words (SQLSTATE 22P02)`))) // each told so
	fine.End()

	spans := memory.GetSpans()
	failed := 0
	for _, s := range spans {
		if s.Status.Code == codes.Error {
			failed++
		}
		text := fmt.Sprintf("%+v", s)
		if strings.Contains(text, "MRK5150") || strings.Contains(text, "quoted") {
			t.Errorf("span %s holds the value: %s", s.Name, text)
		}
		for _, ev := range s.Events {
			for _, a := range ev.Attributes {
				if a.Key == "exception.message" && !strings.Contains(a.Value.AsString(), "SQLSTATE 22P02") {
					t.Errorf("span %s: exception %q, want the failure's kind kept", s.Name, a.Value.AsString())
				}
			}
		}
	}
	if failed < 2 {
		t.Errorf("%d spans failed, want the statement's and the last: %+v", failed, spans)
	}
}
