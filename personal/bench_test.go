package personal_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"lectern/benchlog"
	"lectern/events"
	"lectern/personal"
)

func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	sealed, err := s.Seal(ctx, "agent.created", json.RawMessage(`{"agent_id":3,"owner_id":7,"name":"Tutor","system_prompt":"Be kind and precise, and explain each step.","role_description":null,"template_source":null,"is_active":true}`), 7)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Open(ctx, "agent.created", sealed); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	data := json.RawMessage(`{"agent_id":3,"owner_id":7,"name":"Tutor","system_prompt":"Be kind and precise, and explain each step.","role_description":null,"template_source":null,"is_active":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Seal(ctx, "agent.created", data, 7); err != nil {
			b.Fatal(err)
		}
	}
}

// A practice turn, the log's most common event: its prompt, its messages
// and each model's answer (nested in results) are personal.
func BenchmarkOpenTurn(b *testing.B) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	sealed, err := s.Seal(ctx, "session.turn_recorded", benchTurn, 7)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Open(ctx, "session.turn_recorded", sealed); err != nil {
			b.Fatal(err)
		}
	}
}

// Decoding a practice turn as a replay does: in clear, sealed through Open
// then decoded, and sealed through OpenInto (what the service's registry
// does).
func BenchmarkDecodeTurn(b *testing.B) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	sealed, err := s.Seal(ctx, "session.turn_recorded", benchTurn, 7)
	if err != nil {
		b.Fatal(err)
	}
	openOnly := events.NewRegistry().OpenWith(func(t string, d json.RawMessage) (json.RawMessage, error) { return s.Open(ctx, t, d) })
	for _, c := range []struct {
		name     string
		registry *events.Registry
		data     json.RawMessage
	}{
		{"clear", events.NewRegistry(), benchTurn},
		{"open-then-decode", openOnly, sealed},
		{"open-into", s.Opening(events.NewRegistry()), sealed},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var e events.SessionTurnRecorded
				if err := c.registry.DecodeInto("session.turn_recorded", events.SessionTurnRecorded{}.SchemaVersion(), c.data, &e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var benchTurn = json.RawMessage(`{"session_id":7,"turn":3,"prompt_text":"Question 3 of user 7?","messages":[{"role":"system","content":"You are a patient tutor."},{"role":"user","content":"Question?"}],"results":[{"session_model_id":14,"model_id":1,"model_name":"echo","provider":"offline","response_id":118,"response_text":"An answer of a few words.","token_usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26},"latency_ms":40,"attempts":1,"is_primary":true},{"session_model_id":15,"model_id":2,"model_name":"echo-reverse","provider":"offline","response_id":119,"response_text":"An answer of a few words.","token_usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26},"latency_ms":40,"attempts":1,"is_primary":false}]}`)

// The ten events of a user in the replay bench's log (cmd/lectern-bench),
// decoded as a replay decodes them: in clear, and sealed (OpenInto). The
// log of many users: each user's key is looked up as a replay's are.
func BenchmarkDecodeLog(b *testing.B) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	type stored struct {
		typ           string
		version       int
		clear, sealed json.RawMessage
		v             func() any
	}
	var log []stored
	for user := int64(1); user <= 500; user++ {
		for _, le := range benchlog.UserEvents(user) {
			e := le.Event
			clear, err := json.Marshal(e)
			if err != nil {
				b.Fatal(err)
			}
			sealed, err := s.Seal(ctx, e.EventType(), clear, user)
			if err != nil {
				b.Fatal(err)
			}
			log = append(log, stored{e.EventType(), e.SchemaVersion(), clear, sealed, newOf(e)})
		}
	}
	for _, c := range []struct {
		name     string
		registry *events.Registry
		sealed   bool
	}{{"clear", events.NewRegistry(), false}, {"sealed", s.Opening(events.NewRegistry()), true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, ev := range log {
					data := ev.clear
					if c.sealed {
						data = ev.sealed
					}
					if err := c.registry.DecodeInto(ev.typ, ev.version, data, ev.v()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(log)), "ns/event")
		})
	}
}

// newOf returns a function that makes a new zero event of e's type.
func newOf(e events.Event) func() any {
	t := reflect.TypeOf(e)
	return func() any { return reflect.New(t).Interface() }
}
