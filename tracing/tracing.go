// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables, and carries a trace context across the event log:
// in an event's metadata (W3C traceparent and tracestate) from the request
// that appended it to the projections that apply it and to the CloudEvents
// published for it.
//
// Tracing is off unless the environment asks for it (Enabled): nothing is
// installed then, no span is started, and events carry no trace context.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of Lectern's spans unless OTEL_SERVICE_NAME
// (or service.name in OTEL_RESOURCE_ATTRIBUTES) names another.
const ServiceName = "lectern"

// Enabled reports whether the environment getenv reads asks for traces:
// OTEL_TRACES_EXPORTER names an exporter other than "none", or it is unset
// and an OTLP endpoint is (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true turns it off
// whatever else is set.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter != "" {
		return exporter != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup returns the tracer provider the process environment configures,
// and its shutdown, which flushes the spans not yet exported. When Enabled
// is false it returns a nil provider (nothing traced) and a shutdown that
// does nothing. The exporter is autoexport's: OTLP over HTTP by default
// (OTEL_EXPORTER_OTLP_PROTOCOL=grpc for gRPC), or "console"; the sampler
// (OTEL_TRACES_SAMPLER), the batching (OTEL_BSP_*) and the resource
// (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) follow their variables too.
func Setup(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	if !Enabled(os.Getenv) {
		return nil, off, nil
	}
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, off, fmt.Errorf("tracing: %w", err)
	}
	// Later detectors win: the environment's names over the default.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exporter.Shutdown(ctx)
		return nil, off, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(valuelessExporter{exporter}), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// InstrumentPool makes the connections of the pools built from cfg trace
// their statements, transactions, batches and connection acquisitions with
// tp, each as a child of the span of the context it runs under; a statement
// run under no recorded span (a projection's poll of the log, the janitor)
// makes none. The statements' text is recorded, their arguments are not.
// A nil tp leaves cfg as it is. A tracer cfg already has keeps working.
func InstrumentPool(cfg *pgxpool.Config, tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	var tracer pgx.QueryTracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tp),
		otelpgx.WithMeterProvider(noopmetric.NewMeterProvider())) // Lectern's metrics are Prometheus's
	if cfg.ConnConfig.Tracer != nil {
		tracer = multitracer.New(cfg.ConnConfig.Tracer, tracer)
	}
	cfg.ConnConfig.Tracer = tracer
}

// The W3C Trace Context headers, as event metadata and CloudEvents
// extensions name them too.
const (
	traceparentKey = "traceparent"
	tracestateKey  = "tracestate"
)

// Context returns the W3C traceparent and tracestate of the span ctx holds,
// or empty strings when it holds none (tracing off).
func Context(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c[traceparentKey], c[tracestateKey]
}

// Link is a link to the span a W3C traceparent (and tracestate) names;
// false when traceparent is empty or malformed.
func Link(traceparent, tracestate string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{traceparentKey: traceparent, tracestateKey: tracestate})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}
