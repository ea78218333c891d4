package events

import "encoding/json"

// Stream category of practice sessions.
const CategorySession = "session"

// registerSessions registers the events of practice sessions.
func registerSessions(r *Registry) {
	register[SessionStarted](r)
	register[SessionTurnRecorded](r)
	register[SessionSettingsUpdated](r)
}

// GenerationParams are the generation parameters a caller set on a session,
// as given: null was not given (null and absent alike).
type GenerationParams struct {
	Temperature          *float64 `json:"temperature"`
	TopP                 *float64 `json:"top_p"`
	ResponseLengthPreset *string  `json:"response_length_preset"`
	MaxCompletionTokens  *int     `json:"max_completion_tokens"`
	MaxTokens            *int     `json:"max_tokens"`
}

// AgentSnapshot is an agent as it was when a session started: later edits of
// the agent do not rewrite the session's history.
type AgentSnapshot struct {
	AgentID         int64   `json:"agent_id"`
	Name            string  `json:"name"`
	SystemPrompt    string  `json:"system_prompt"`
	RoleDescription *string `json:"role_description"`
}

// FewShotLink places one of the owner's few-shot examples in a session's
// prompt. A link keeps its id (and creation time) while its example stays in
// the list.
type FewShotLink struct {
	LinkID    int64 `json:"link_id"`
	ExampleID int64 `json:"example_id"`
	SortOrder int   `json:"sort_order"`
}

// SessionSettings are a session's tuning settings, in full.
type SessionSettings struct {
	SettingID   int64  `json:"setting_id"`
	StylePreset string `json:"style_preset"`
	// StyleParams is a JSON object in canonical form (compact, keys sorted).
	StyleParams      json.RawMessage  `json:"style_params"`
	GenerationParams GenerationParams `json:"generation_params"`
	// AgentSnapshot is null for a session without an agent.
	AgentSnapshot *AgentSnapshot `json:"agent_snapshot"`
	FewShotLinks  []FewShotLink  `json:"few_shot_links"`
}

// SessionStarted: a user started a practice session (its first turn is the
// next event of the stream, appended with it).
type SessionStarted struct {
	SessionID    int64           `json:"session_id"`
	UserID       int64           `json:"user_id"`
	ClassID      *int64          `json:"class_id"`
	ProjectID    *int64          `json:"project_id"`
	AgentID      *int64          `json:"agent_id"`
	KnowledgeIDs []int64         `json:"knowledge_ids"`
	Title        *string         `json:"title"`
	Settings     SessionSettings `json:"settings"`
}

// ChatMessage is one message sent to the models.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// TurnParams are the generation parameters sent to every model of a turn,
// after the style preset and the response length were resolved; null: not
// sent (the provider's default).
type TurnParams struct {
	Temperature         *float64 `json:"temperature"`
	TopP                *float64 `json:"top_p"`
	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
}

// TokenUsage is a model call's token usage.
type TokenUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ModelError is why a model of a turn gave no answer.
type ModelError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// TurnResult is one model's outcome in a turn.
type TurnResult struct {
	// SessionModelID is the model's id in the session, the same in every turn.
	SessionModelID int64  `json:"session_model_id"`
	ModelID        int64  `json:"model_id"`
	ModelName      string `json:"model_name"`
	Provider       string `json:"provider"`
	// ProviderModel is the provider's model id; null for the offline models.
	ProviderModel *string `json:"provider_model"`
	ResponseID    int64   `json:"response_id"`
	// ResponseText is "" when the model failed.
	ResponseText string     `json:"response_text"`
	TokenUsage   TokenUsage `json:"token_usage"`
	LatencyMS    int64      `json:"latency_ms"`
	Attempts     int        `json:"attempts"`
	IsPrimary    bool       `json:"is_primary"`
	// Error is null when the model answered.
	Error *ModelError `json:"error"`
}

// SessionTurnRecorded: the models of a turn answered (at least one of them);
// it holds the messages and parameters they were sent.
//
// Messages are the messages sent less the session's history: the prompts
// and primary answers of the HistoryTurns turns before this one, which went
// between the few-shot examples and the prompt (aggregates.SentMessages puts
// them back). Each turn records what it adds, so that a turn's event does
// not grow with the session (every turn resending the history made a long
// session's turns too large to record). Version 1 held the messages whole:
// its HistoryTurns reads as 0.
type SessionTurnRecorded struct {
	SessionID    int64         `json:"session_id"`
	Turn         int           `json:"turn"`
	PromptText   string        `json:"prompt_text"`
	Messages     []ChatMessage `json:"messages"`
	HistoryTurns int           `json:"history_turns"`
	Params       TurnParams    `json:"params"`
	Results      []TurnResult  `json:"results"`
	// Passages are the knowledge passages the prompt carried (absent: none).
	Passages []Passage `json:"passages,omitempty"`
}

// SessionSettingsUpdated: the owner changed a session's settings. It carries
// the full new settings, and which of them changed, so a replay needs no
// earlier state.
type SessionSettingsUpdated struct {
	SessionID int64           `json:"session_id"`
	Settings  SessionSettings `json:"settings"`
	Changed   []string        `json:"changed"`
}

// EventType implements Event.
func (SessionStarted) EventType() string { return "session.started" }

// SchemaVersion implements Event.
func (SessionStarted) SchemaVersion() int { return 1 }

// EventType implements Event.
func (SessionTurnRecorded) EventType() string { return "session.turn_recorded" }

// SchemaVersion implements Event.
func (SessionTurnRecorded) SchemaVersion() int { return 2 }

// EventType implements Event.
func (SessionSettingsUpdated) EventType() string { return "session.settings_updated" }

// SchemaVersion implements Event.
func (SessionSettingsUpdated) SchemaVersion() int { return 1 }

var (
	_ Event = SessionStarted{}
	_ Event = SessionTurnRecorded{}
	_ Event = SessionSettingsUpdated{}
)
