package llm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestEchoModels(t *testing.T) {
	t.Parallel()
	fewShot := []Message{
		{Role: RoleSystem, Content: "You are terse."},
		{Role: RoleUser, Content: "one two"},
		{Role: RoleAssistant, Content: "three"},
	}
	tests := []struct {
		name     string
		model    string
		messages []Message
		want     string
		usage    Usage
	}{
		{"echo answers with the prompt", "echo", []Message{{Role: RoleUser, Content: "Hello there"}}, "Hello there", Usage{2, 2, 4}},
		{"echo answers the last user message", "echo", append(fewShot, Message{Role: RoleUser, Content: "four  five\tsix"}), "four  five\tsix", Usage{9, 3, 12}},
		{"echo-reverse reverses", "echo-reverse", []Message{{Role: RoleUser, Content: "abc def"}}, "fed cba", Usage{2, 2, 4}},
		{"echo-reverse reverses runes, not bytes", "echo-reverse", []Message{{Role: RoleUser, Content: "héllo, 世界 🙂"}}, "🙂 界世 ,olléh", Usage{3, 3, 6}},
		{"no user message answers nothing", "echo", []Message{{Role: RoleSystem, Content: "just a system prompt"}}, "", Usage{4, 0, 4}},
		{"empty prompt", "echo-reverse", []Message{{Role: RoleUser, Content: ""}}, "", Usage{}},
	}
	g := New(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, ok := g.Catalogue().ByName(tt.model)
			if !ok {
				t.Fatalf("no model %q in the default catalogue", tt.model)
			}

			got := g.Complete(t.Context(), m, Request{Messages: tt.messages})

			want := Result{Model: m, Text: tt.want, Usage: tt.usage, Attempts: 1}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Result{}, "Latency")); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if got.Latency < 0 {
				t.Errorf("Latency = %s", got.Latency)
			}
		})
	}
}

func TestCompleteRejectsUnusableRequests(t *testing.T) {
	t.Parallel()
	g := New(nil)
	echo := g.Catalogue().Default()
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"no messages", Request{}, "no messages"},
		{"unknown role", Request{Messages: []Message{{Role: "tool", Content: "x"}}}, `message 0 has unknown role "tool"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := g.Complete(t.Context(), echo, tt.req)
			want := &Error{Kind: KindInvalidRequest, Message: tt.want}
			if diff := cmp.Diff(want, got.Err, cmpopts.IgnoreUnexported(Error{})); diff != "" {
				t.Errorf("Err (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompleteUnknownProvider(t *testing.T) {
	t.Parallel()
	m := Model{ID: 9, Name: "odd", Provider: "carrier-pigeon"}
	got := New(nil).Complete(t.Context(), m, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if got.Err == nil || got.Err.Kind != KindUnavailable {
		t.Errorf("Err = %v, want unavailable", got.Err)
	}
}

func TestCompleteAllKeepsOrderAndEmptyInput(t *testing.T) {
	t.Parallel()
	g := New(nil)
	c := g.Catalogue()
	echo, _ := c.ByName("echo")
	rev, _ := c.ByName("echo-reverse")
	req := Request{Messages: []Message{{Role: RoleUser, Content: "abc"}}}

	got := g.CompleteAll(t.Context(), []Model{rev, echo, rev}, req)

	var texts []string
	for _, r := range got {
		texts = append(texts, r.Model.Name+"="+r.Text)
	}
	if diff := cmp.Diff([]string{"echo-reverse=cba", "echo=abc", "echo-reverse=cba"}, texts); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if got := g.CompleteAll(t.Context(), nil, req); len(got) != 0 {
		t.Errorf("CompleteAll(no models) = %v, want none", got)
	}
}

func TestModelCost(t *testing.T) {
	t.Parallel()
	m := Model{PriceInput: 0.15, PriceOutput: 0.60}
	got := m.Cost(Usage{PromptTokens: 2_000_000, CompletionTokens: 500_000, TotalTokens: 2_500_000})
	if want := 0.6; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("Cost = %v, want %v", got, want)
	}
}
