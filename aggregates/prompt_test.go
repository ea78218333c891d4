package aggregates_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/events"
)

func msg(role, content string) events.ChatMessage {
	return events.ChatMessage{Role: role, Content: content}
}

func TestPromptMessages(t *testing.T) {
	agent := &events.AgentSnapshot{AgentID: 4, Name: "Tutor", SystemPrompt: "You are a patient tutor."}
	answered := func(n int, prompt, primary, other string) aggregates.Turn {
		return aggregates.Turn{Number: n, PromptText: prompt, Results: []events.TurnResult{
			{ModelName: "b", ResponseText: other},
			{ModelName: "a", ResponseText: primary, IsPrimary: true},
		}}
	}
	cases := []struct {
		name   string
		prompt aggregates.Prompt
		want   []events.ChatMessage
	}{
		{
			name:   "a bare prompt is one user message",
			prompt: aggregates.Prompt{Text: "Hello"},
			want:   []events.ChatMessage{msg("user", "Hello")},
		},
		{
			name:   "the agent's system prompt comes first",
			prompt: aggregates.Prompt{Agent: agent, StyleParams: json.RawMessage(`{}`), Text: "Hi"},
			want:   []events.ChatMessage{msg("system", "You are a patient tutor."), msg("user", "Hi")},
		},
		{
			name: "style parameters follow the system prompt, keys sorted, strings bare, other values as JSON",
			prompt: aggregates.Prompt{Agent: agent, Text: "Hi",
				StyleParams: json.RawMessage(`{"persona":"pirate","format":"bullets","self_check":true,"hints":{"mode":"socratic"}}`)},
			want: []events.ChatMessage{
				msg("system", "You are a patient tutor.\n\nStyle parameters:\n- format: bullets\n- hints: {\"mode\":\"socratic\"}\n- persona: pirate\n- self_check: true"),
				msg("user", "Hi"),
			},
		},
		{
			name:   "style parameters alone make the system message",
			prompt: aggregates.Prompt{StyleParams: json.RawMessage(`{"format":"prose"}`), Text: "Hi"},
			want:   []events.ChatMessage{msg("system", "Style parameters:\n- format: prose"), msg("user", "Hi")},
		},
		{
			name:   "an agent with a blank system prompt adds nothing",
			prompt: aggregates.Prompt{Agent: &events.AgentSnapshot{SystemPrompt: "  "}, Text: "Hi"},
			want:   []events.ChatMessage{msg("user", "Hi")},
		},
		{
			name: "few-shot examples are user and assistant pairs in order, before the history",
			prompt: aggregates.Prompt{Agent: agent, Text: "3+3?",
				Examples: []aggregates.FewShotPair{{Input: "1+1?", Output: "2"}, {Input: "2+2?", Output: "4"}},
				History:  []aggregates.Turn{answered(1, "5+5?", "10", "ten")}},
			want: []events.ChatMessage{
				msg("system", "You are a patient tutor."),
				msg("user", "1+1?"), msg("assistant", "2"),
				msg("user", "2+2?"), msg("assistant", "4"),
				msg("user", "5+5?"), msg("assistant", "10"),
				msg("user", "3+3?"),
			},
		},
		{
			name: "history takes the primary answer of each turn and skips a failed one",
			prompt: aggregates.Prompt{Text: "third", History: []aggregates.Turn{
				answered(1, "first", "one", "uno"),
				{Number: 2, PromptText: "second", Results: []events.TurnResult{
					{ModelName: "a", IsPrimary: true, Error: &events.ModelError{Kind: "timeout", Message: "late"}},
					{ModelName: "b", ResponseText: "dos"},
				}},
			}},
			want: []events.ChatMessage{
				msg("user", "first"), msg("assistant", "one"),
				msg("user", "second"),
				msg("user", "third"),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.prompt.Messages()); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			// What the turn's event records, and the turns before it, give
			// the messages back.
			recorded, n := tc.prompt.Recorded()
			if n != len(tc.prompt.History) || recorded[len(recorded)-1] != msg("user", tc.prompt.Text) {
				t.Errorf("recorded %v after %d turns", recorded, n)
			}
			if diff := cmp.Diff(tc.want, aggregates.SentMessages(recorded, aggregates.LastTurns(tc.prompt.History, n))); diff != "" {
				t.Errorf("sent messages rebuilt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLastTurns(t *testing.T) {
	turns := []aggregates.Turn{{Number: 1}, {Number: 2}, {Number: 3}}
	for n, want := range map[int][]int{-1: {}, 0: {}, 2: {2, 3}, 3: {1, 2, 3}, 9: {1, 2, 3}} {
		got := []int{}
		for _, t := range aggregates.LastTurns(turns, n) {
			got = append(got, t.Number)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("LastTurns(%d) (-want +got):\n%s", n, diff)
		}
	}
}

func TestEffectiveParams(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int) *int { return &v }
	cases := []struct {
		name   string
		preset string
		given  events.GenerationParams
		want   events.TurnParams
	}{
		{"accurate", "accurate", events.GenerationParams{}, events.TurnParams{Temperature: f(0.2), TopP: f(0.9)}},
		{"balanced", "balanced", events.GenerationParams{}, events.TurnParams{Temperature: f(0.7), TopP: f(1)}},
		{"creative", "creative", events.GenerationParams{}, events.TurnParams{Temperature: f(1), TopP: f(1)}},
		{"custom sends nothing of its own", "custom", events.GenerationParams{}, events.TurnParams{}},
		{"custom sends the caller's", "custom", events.GenerationParams{Temperature: f(0.3), MaxTokens: n(50)},
			events.TurnParams{Temperature: f(0.3), MaxTokens: n(50)}},
		{"explicit values win over the preset", "accurate", events.GenerationParams{Temperature: f(0), TopP: f(0.5)},
			events.TurnParams{Temperature: f(0), TopP: f(0.5)}},
		{"short", "custom", events.GenerationParams{ResponseLengthPreset: ptr("short")}, events.TurnParams{MaxTokens: n(256)}},
		{"medium", "custom", events.GenerationParams{ResponseLengthPreset: ptr("medium")}, events.TurnParams{MaxTokens: n(1024)}},
		{"long", "balanced", events.GenerationParams{ResponseLengthPreset: ptr("long")},
			events.TurnParams{Temperature: f(0.7), TopP: f(1), MaxTokens: n(4096)}},
		{"max_tokens wins over the length preset", "custom", events.GenerationParams{ResponseLengthPreset: ptr("long"), MaxTokens: n(10)},
			events.TurnParams{MaxTokens: n(10)}},
		{"max_completion_tokens wins over the length preset", "custom",
			events.GenerationParams{ResponseLengthPreset: ptr("short"), MaxCompletionTokens: n(20)},
			events.TurnParams{MaxCompletionTokens: n(20)}},
		{"both max tokens are sent", "custom", events.GenerationParams{MaxTokens: n(10), MaxCompletionTokens: n(20)},
			events.TurnParams{MaxTokens: n(10), MaxCompletionTokens: n(20)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, aggregates.EffectiveParams(tc.preset, tc.given)); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}
