package projections

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"lectern/eventstore/postgres"
	"lectern/tracing"
)

// applyTracer starts the spans of one projection's work: a span for each
// event applied on its own, or for each live batch, linked to the spans of
// the appends that recorded the events (their metadata's trace context), so
// that a trace leads from a request to the read models it changed. The
// projection's statements are the span's children. A nil applyTracer
// (tracing off) starts nothing and costs nothing.
type applyTracer struct {
	tracer     trace.Tracer
	projection attribute.KeyValue
}

func newApplyTracer(tp trace.TracerProvider, projection string) *applyTracer {
	if tp == nil {
		return nil
	}
	return &applyTracer{tracer: tp.Tracer("lectern/projections"), projection: attribute.String("lectern.projection", projection)}
}

// spanName is every apply span's name: the projection is an attribute, so
// that the name stays one of a few.
const spanName = "projection apply"

// middleware traces each delivery of an event the projection handles that
// is applied on its own (a live batch's events have pollTx's span): added
// before Runner.attempts, its span covers every attempt, and the handler's
// statements run under it.
func (a *applyTracer) middleware(handled map[string]bool) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx := msg.Context()
			if _, batched := batchOf(ctx); batched || !handled[msg.Metadata.Get(postgres.MetaEventType)] {
				return h(msg)
			}
			spanCtx, span := a.startEvent(ctx, msg)
			msg.SetContext(spanCtx)
			out, err := h(msg)
			msg.SetContext(ctx)
			a.end(span, err)
			return out, err
		}
	}
}

// startEvent starts the span of applying the event msg carries.
func (a *applyTracer) startEvent(ctx context.Context, msg *message.Message) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(a.projection, attribute.String("messaging.operation.type", "process"),
			attribute.String("lectern.event.id", msg.UUID),
			attribute.String("lectern.event.type", msg.Metadata.Get(postgres.MetaEventType)),
			attribute.String("lectern.stream", msg.Metadata.Get(postgres.MetaStreamID)),
			attribute.String("lectern.position", msg.Metadata.Get(postgres.MetaPosition))),
	}
	var md struct {
		TraceParent string `json:"traceparent"`
		TraceState  string `json:"tracestate"`
	}
	if postgres.DecodeMetadata(msg, &md) == nil {
		if link, ok := tracing.Link(md.TraceParent, md.TraceState); ok {
			opts = append(opts, trace.WithLinks(link))
		}
	}
	return a.tracer.Start(ctx, spanName, opts...)
}

// startBatch starts the span of applying a live batch's items, with a link
// for each traced one.
func (a *applyTracer) startBatch(ctx context.Context, items []setItem) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(items))
	for _, it := range items {
		if link, ok := tracing.Link(it.m.TraceParent, it.m.TraceState); ok {
			links = append(links, link)
		}
	}
	return a.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(a.projection, attribute.String("messaging.operation.type", "process"),
			attribute.Int("messaging.batch.message_count", len(items)),
			attribute.String("lectern.position", items[len(items)-1].m.Position)))
}

// end ends span with err, if it failed.
func (a *applyTracer) end(span trace.Span, err error) {
	if a == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
