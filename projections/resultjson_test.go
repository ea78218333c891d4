package projections

import (
	"encoding/json"
	"testing"

	"lectern/events"
)

// resultJSON writes a turn's token usage by hand: what json.Marshal writes.
func TestResultJSONIsMarshal(t *testing.T) {
	for _, u := range []events.TokenUsage{{}, {PromptTokens: 20, CompletionTokens: 6, TotalTokens: 26}, {PromptTokens: -1, TotalTokens: 1 << 40}} {
		want, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := resultJSON(events.TurnResult{TokenUsage: u})
		if err != nil || got != string(want) {
			t.Errorf("usage %+v: %s, %v; want %s", u, got, err, want)
		}
	}
}
