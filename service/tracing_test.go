package service_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/projections"
	"lectern/service"
	"lectern/tracing"
)

// callerTrace is the trace of a caller that sends its traceparent.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
)

// tracedEnv is a service on its own database (and event store) whose spans
// go to an in-memory exporter.
type tracedEnv struct {
	store eventstore.Store // the service's event store, read directly
	url   string
	token string
}

func startTraced(t *testing.T, store string, tp trace.TracerProvider) *tracedEnv {
	t.Helper()
	_, dbURL := pgtest.FreshURL(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	tracing.InstrumentPool(cfg, tp)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := &tracedEnv{store: postgres.New(pool, nil)}
	// Sealed, as lectern serve always seals personal data: the trace
	// context passes through the sealing store.
	dataKey := make([]byte, 32)
	_, _ = rand.Read(dataKey)
	scfg := service.Config{Pool: pool, Tracing: tp, DataKey: dataKey}
	if store == "esdbfake" {
		scfg.EventStoreURL = esdbfake.Start(t)
		es, err := esdb.Open(context.Background(), scfg.EventStoreURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = es.Close() })
		e.store = es
	}
	svc, url, _ := serve(t, scfg)
	e.url = url
	if _, _, err := svc.Identity.CreateUser(context.Background(), "ada@example.com", "correct horse", "Ada", false); err != nil {
		t.Fatal(err)
	}
	status, _, body, err := send("POST", url+"/user/login", "", []byte(`{"email":"ada@example.com","password":"correct horse"}`))
	var tokens struct {
		AccessToken string `json:"access_token"`
	}
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &tokens) != nil {
		t.Fatalf("login: %d %s %v", status, body, err)
	}
	e.token = tokens.AccessToken
	return e
}

// createAgent is POST /agents with the caller's traceparent; it returns the
// agent's stream.
func (e *tracedEnv) createAgent(t *testing.T) string {
	t.Helper()
	req, err := http.NewRequest("POST", e.url+"/agents", strings.NewReader(`{"name":"Tutor","system_prompt":"Be kind"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("traceparent", "00-"+callerTraceID+"-"+callerSpanID+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var agent struct {
		ID int64 `json:"agent_id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&agent); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /agents: %d %v", res.StatusCode, err)
	}
	return eventstore.StreamName("agent", agent.ID)
}

// recorded is the metadata of the first event of stream.
func (e *tracedEnv) recorded(t *testing.T, stream string) eventstore.Metadata {
	t.Helper()
	evs, err := e.store.ReadStream(context.Background(), stream, eventstore.Forwards, 1, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("reading %s: %d events, %v", stream, len(evs), err)
	}
	return evs[0].Metadata
}

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// A traced request leads, in one trace, from the server span of its route
// through its statements and the append of its event; the event records the
// append's trace context, and the projection that applies it links its span
// to it. On PostgreSQL the projection applies live batches, on EventStoreDB
// one event at a time: both are traced.
func TestTracingFollowsAWriteToItsProjection(t *testing.T) {
	for _, store := range []string{"postgres", "esdbfake"} {
		t.Run(store, func(t *testing.T) {
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			e := startTraced(t, store, tp)
			stream := e.createAgent(t)

			caller, _ := trace.TraceIDFromHex(callerTraceID)
			var ended []sdktrace.ReadOnlySpan
			find := func(pred func(sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
				var out []sdktrace.ReadOnlySpan
				for _, s := range ended {
					if pred(s) {
						out = append(out, s)
					}
				}
				return out
			}
			isServer := func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "POST /agents" }
			// The server span ends once the response is written: it may
			// end after the client has read it.
			poll.Must(t, 10*time.Second, "the server span ended", func() bool {
				ended = spans.GetSpans().Snapshots()
				return len(find(isServer)) > 0
			})
			server := find(isServer)
			if len(server) != 1 {
				t.Fatalf("%d spans named POST /agents, want 1; spans: %v", len(server), names(ended))
			}
			srv := server[0]
			if srv.SpanKind() != trace.SpanKindServer || srv.SpanContext().TraceID() != caller ||
				srv.Parent().SpanID().String() != callerSpanID || !srv.Parent().IsRemote() {
				t.Errorf("server span: kind %v, trace %s, parent %s; want a server span continuing the caller's trace %s from span %s",
					srv.SpanKind(), srv.SpanContext().TraceID(), srv.Parent().SpanID(), callerTraceID, callerSpanID)
			}
			if v, _ := attr(srv, "http.route"); v.AsString() != "/agents" {
				t.Errorf("http.route = %q, want /agents", v.AsString())
			}
			if v, _ := attr(srv, "http.response.status_code"); v.AsInt64() != http.StatusCreated {
				t.Errorf("http.response.status_code = %d, want 201", v.AsInt64())
			}
			childOf := func(parent sdktrace.ReadOnlySpan) func(sdktrace.ReadOnlySpan) bool {
				return func(s sdktrace.ReadOnlySpan) bool {
					return s.SpanContext().TraceID() == parent.SpanContext().TraceID() && s.Parent().SpanID() == parent.SpanContext().SpanID()
				}
			}
			isDB := func(s sdktrace.ReadOnlySpan) bool {
				v, _ := attr(s, "db.system.name")
				return s.SpanKind() == trace.SpanKindClient && v.AsString() == "postgresql"
			}
			if db := find(func(s sdktrace.ReadOnlySpan) bool { return childOf(srv)(s) && isDB(s) }); len(db) == 0 {
				t.Errorf("no database span is a child of the server span; spans: %v", names(ended))
			}
			appends := find(func(s sdktrace.ReadOnlySpan) bool { return childOf(srv)(s) && s.Name() == "append agent" })
			if len(appends) != 1 {
				t.Fatalf("%d append spans under the server span, want 1; spans: %v", len(appends), names(ended))
			}
			appendSpan := appends[0].SpanContext()
			if v, _ := attr(appends[0], "lectern.stream"); v.AsString() != stream {
				t.Errorf("append span's stream = %q, want %q", v.AsString(), stream)
			}
			if store == "postgres" {
				if db := find(func(s sdktrace.ReadOnlySpan) bool { return childOf(appends[0])(s) && isDB(s) }); len(db) == 0 {
					t.Errorf("no database span is a child of the append span; spans: %v", names(ended))
				}
			}

			meta := e.recorded(t, stream)
			want := fmt.Sprintf("00-%s-%s-01", appendSpan.TraceID(), appendSpan.SpanID())
			if meta.TraceParent != want {
				t.Errorf("the event's traceparent = %q, want the append span's %q", meta.TraceParent, want)
			}

			// The agents projection's span links to the append; its own
			// statements are its children.
			var applied sdktrace.ReadOnlySpan
			poll.Must(t, 10*time.Second, "a span of the agents projection linked to the append", func() bool {
				for _, s := range spans.GetSpans().Snapshots() {
					if v, _ := attr(s, "lectern.projection"); v.AsString() != projections.AgentsProjection {
						continue
					}
					if slices.ContainsFunc(s.Links(), func(l sdktrace.Link) bool {
						return l.SpanContext.TraceID() == appendSpan.TraceID() && l.SpanContext.SpanID() == appendSpan.SpanID()
					}) {
						applied = s
						return true
					}
				}
				return false
			})
			if applied.Name() != "projection apply" || applied.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("projection span %q of kind %v, want \"projection apply\", a consumer", applied.Name(), applied.SpanKind())
			}
			ended = spans.GetSpans().Snapshots()
			if db := find(func(s sdktrace.ReadOnlySpan) bool { return childOf(applied)(s) && isDB(s) }); len(db) == 0 {
				t.Errorf("no database span is a child of the projection's span; spans: %v", names(ended))
			}
		})
	}
}

// With tracing off, nothing is traced: an event records no trace context,
// even when its request carried one.
func TestUntracedEventsCarryNoTraceContext(t *testing.T) {
	e := startTraced(t, "postgres", nil)
	stream := e.createAgent(t)
	if meta := e.recorded(t, stream); meta.TraceParent != "" || meta.TraceState != "" {
		t.Errorf("untraced event's trace context = %q %q, want none", meta.TraceParent, meta.TraceState)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}
