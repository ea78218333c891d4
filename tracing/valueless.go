package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/semconv/v1.26.0"

	"lectern/pgtext"
)

// valuelessExporter exports spans with their errors told without the
// values they quote (pgtext): a statement's span records PostgreSQL's error
// as it is (otelpgx), and its message may quote a person's value, which a
// trace collector would keep out of an erasure's reach.
type valuelessExporter struct{ sdktrace.SpanExporter }

func (e valuelessExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	var out []sdktrace.ReadOnlySpan // a copy, made when a span is replaced
	for i, s := range spans {
		if told, ok := valuelessSpanOf(s); ok {
			if out == nil {
				out = append([]sdktrace.ReadOnlySpan(nil), spans...)
			}
			out[i] = told
		}
	}
	if out == nil {
		out = spans
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// valuelessSpan is a span whose error status and exception events are told
// valueless.
type valuelessSpan struct {
	sdktrace.ReadOnlySpan
	status sdktrace.Status
	events []sdktrace.Event
}

func (s valuelessSpan) Status() sdktrace.Status  { return s.status }
func (s valuelessSpan) Events() []sdktrace.Event { return s.events }

// valuelessSpanOf returns s told valueless; false when it tells no error.
func valuelessSpanOf(s sdktrace.ReadOnlySpan) (sdktrace.ReadOnlySpan, bool) {
	status, events := s.Status(), s.Events()
	changed := false
	if status.Code == codes.Error && status.Description != "" {
		if told := valueless(status.Description); told != status.Description {
			status.Description, changed = told, true
		}
	}
	var told []sdktrace.Event // a copy, made when an event is replaced
	for i, ev := range events {
		if ev.Name != semconv.ExceptionEventName {
			continue
		}
		var attrs []attribute.KeyValue // the event's, copied when one is replaced
		for j, a := range ev.Attributes {
			if a.Key != semconv.ExceptionMessageKey {
				continue
			}
			if msg := valueless(a.Value.AsString()); msg != a.Value.AsString() {
				if attrs == nil {
					attrs = append([]attribute.KeyValue(nil), ev.Attributes...)
				}
				attrs[j] = semconv.ExceptionMessage(msg)
			}
		}
		if attrs != nil {
			if told == nil {
				told = append([]sdktrace.Event(nil), events...)
			}
			told[i].Attributes = attrs
		}
	}
	if told != nil {
		events, changed = told, true
	}
	if !changed {
		return s, false
	}
	return valuelessSpan{ReadOnlySpan: s, status: status, events: events}, true
}

// valueless is an error's text told without what it quotes.
func valueless(text string) string { return pgtext.Valueless(errors.New(text)).Error() }
