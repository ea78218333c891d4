// Package benchlog is the log the replay benchmarks read: ten events a
// user, as a practice user makes them. cmd/lectern-bench appends it by the
// hundred thousand; personal's BenchmarkDecodeLog decodes it in memory.
package benchlog

import (
	"encoding/json"
	"fmt"

	"lectern/events"
	"lectern/eventstore"
)

// Event is an event of the log, in its stream at its version.
type Event struct {
	Stream  string
	Version int64
	Event   events.Event
}

// UserEvents are the events of user id: signing up, an agent made and
// renamed, a few-shot example, and a session of four turns whose settings
// change half-way.
func UserEvents(id int64) []Event {
	prompt := "You are a patient tutor."
	temp := 0.7
	settings := events.SessionSettings{SettingID: id, StylePreset: "accurate", StyleParams: json.RawMessage(`{}`),
		GenerationParams: events.GenerationParams{Temperature: &temp},
		AgentSnapshot:    &events.AgentSnapshot{AgentID: id, Name: "Tutor", SystemPrompt: prompt}}
	turn := func(n int) events.SessionTurnRecorded {
		t := events.SessionTurnRecorded{SessionID: id, Turn: n, PromptText: fmt.Sprintf("Question %d of user %d?", n, id),
			Messages: []events.ChatMessage{{Role: "system", Content: prompt}, {Role: "user", Content: "Question?"}}}
		for m, name := range []string{"echo", "echo-reverse"} {
			t.Results = append(t.Results, events.TurnResult{SessionModelID: id*2 + int64(m), ModelID: int64(m + 1), ModelName: name,
				Provider: "offline", ResponseID: (id*8+int64(n))*2 + int64(m), ResponseText: "An answer of a few words.",
				TokenUsage: events.TokenUsage{PromptTokens: 20, CompletionTokens: 6, TotalTokens: 26}, LatencyMS: 40, Attempts: 1,
				IsPrimary: m == 0})
		}
		return t
	}
	creative := settings
	creative.StylePreset = "creative"
	user, agent := eventstore.StreamName("user", id), eventstore.StreamName("agent", id)
	fewshot, session := eventstore.StreamName("fewshot", id), eventstore.StreamName("session", id)
	return []Event{
		{user, 1, events.UserSignedUp{UserID: id, Email: fmt.Sprintf("u%d@example.com", id), Name: "User", Roles: []string{"user"}}},
		{agent, 1, events.AgentCreated{AgentID: id, OwnerID: id, Name: "Tutor", SystemPrompt: prompt, IsActive: true}},
		{agent, 2, events.AgentUpdated{AgentID: id, Name: "Patient tutor", SystemPrompt: prompt, IsActive: true, Changed: []string{"name"}}},
		{fewshot, 1, events.FewShotCreated{ExampleID: id, UserID: id, InputText: "2+2?", OutputText: "4", Meta: json.RawMessage(`{}`),
			IsActive: true}},
		{session, 1, events.SessionStarted{SessionID: id, UserID: id, KnowledgeIDs: []int64{}, Settings: settings}},
		{session, 2, turn(1)},
		{session, 3, turn(2)},
		{session, 4, events.SessionSettingsUpdated{SessionID: id, Settings: creative}},
		{session, 5, turn(3)},
		{session, 6, turn(4)},
	}
}
