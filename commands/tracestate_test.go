package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"lectern/aggregates"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// A caller's tracestate reaches the permanent log only up to MaxTraceState
// bytes: a longer one (several KB of untrusted text) is dropped, and the
// events keep their traceparent.
func TestLongTraceStateIsNotRecorded(t *testing.T) {
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	h, err := NewAgents(process(t, pool, pg))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	// members is a tracestate of n members, each as long as W3C allows.
	members := func(n, value int) string {
		list := make([]string, n)
		for i := range list {
			list[i] = fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", value))
		}
		return strings.Join(list, ",")
	}
	exact := members(1, 250) + ",k99=" + strings.Repeat("v", MaxTraceState-len(members(1, 250))-len(",k99="))
	for _, c := range []struct {
		name, state string
		recorded    bool
	}{
		{"short", "lectern=1,other=x", true},
		{"exactly the limit", exact, true},
		{"a byte over", exact + "v", false},
		{"32 members of 256 bytes", members(32, 256), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, err := trace.ParseTraceState(c.state)
			if err != nil || state.String() != c.state {
				t.Fatalf("the caller's tracestate (%d bytes) does not parse as it is: %v", len(c.state), err)
			}
			if c.recorded != (len(c.state) <= MaxTraceState) {
				t.Fatalf("a %d-byte tracestate in the case %q", len(c.state), c.name)
			}
			caller := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0xf0, 1}, TraceFlags: trace.FlagsSampled,
				TraceState: state, Remote: true})
			ctx, span := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(context.Background(), caller), "POST /agents")
			agent, _, err := h.Create(ctx, aggregates.CreateAgent{OwnerID: 1, Name: "Tutor", SystemPrompt: "p"})
			span.End()
			if err != nil {
				t.Fatal(err)
			}
			evs, err := pg.ReadStream(context.Background(), eventstore.StreamName("agent", agent.ID), eventstore.Forwards, 1, 0)
			if err != nil || len(evs) == 0 {
				t.Fatalf("the agent's events: %d, %v", len(evs), err)
			}
			for _, e := range evs {
				if !strings.HasPrefix(e.Metadata.TraceParent, "00-"+caller.TraceID().String()+"-") {
					t.Errorf("%s: traceparent %q, want the caller's trace", e.Type, e.Metadata.TraceParent)
				}
				want := ""
				if c.recorded {
					want = c.state
				}
				if e.Metadata.TraceState != want {
					t.Errorf("%s: recorded a %d-byte tracestate, want %d bytes", e.Type, len(e.Metadata.TraceState), len(want))
				}
			}
		})
	}
}
