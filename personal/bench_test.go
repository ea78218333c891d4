package personal_test

import (
	"context"
	"encoding/json"
	"testing"

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
