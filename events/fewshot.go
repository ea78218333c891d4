package events

import "encoding/json"

// Stream category of few-shot examples.
const CategoryFewShot = "fewshot"

// FewShotCreated: a user added an input/output pair to their few-shot library.
// Meta is the user's free-form JSON object, kept exactly as decided (compact,
// keys sorted), so that large numbers survive a replay.
type FewShotCreated struct {
	ExampleID  int64           `json:"example_id"`
	UserID     int64           `json:"user_id"`
	Title      *string         `json:"title"`
	InputText  string          `json:"input_text"`
	OutputText string          `json:"output_text"`
	Meta       json.RawMessage `json:"meta"`
	IsActive   bool            `json:"is_active"`
}

// FewShotUpdated: the owner edited a few-shot example. It carries every
// editable field's new value, and which of them changed, so a replay needs no
// earlier state.
type FewShotUpdated struct {
	ExampleID  int64           `json:"example_id"`
	Title      *string         `json:"title"`
	InputText  string          `json:"input_text"`
	OutputText string          `json:"output_text"`
	Meta       json.RawMessage `json:"meta"`
	IsActive   bool            `json:"is_active"`
	Changed    []string        `json:"changed"`
}

// EventType implements Event.
func (FewShotCreated) EventType() string { return "fewshot.created" }

// SchemaVersion implements Event.
func (FewShotCreated) SchemaVersion() int { return 1 }

// EventType implements Event.
func (FewShotUpdated) EventType() string { return "fewshot.updated" }

// SchemaVersion implements Event.
func (FewShotUpdated) SchemaVersion() int { return 1 }

var (
	_ Event = FewShotCreated{}
	_ Event = FewShotUpdated{}
)
