package aggregates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"lectern/events"
)

// Style presets (DESIGN §6).
const (
	PresetAccurate = "accurate"
	PresetBalanced = "balanced"
	PresetCreative = "creative"
	PresetCustom   = "custom"
	// DefaultStylePreset is a session's preset when none is given, and what
	// null resets it to.
	DefaultStylePreset = PresetBalanced
)

// StylePresets are every style preset.
var StylePresets = []string{PresetAccurate, PresetBalanced, PresetCreative, PresetCustom}

// Response length presets.
const (
	LengthShort  = "short"
	LengthMedium = "medium"
	LengthLong   = "long"
)

// ResponseLengthPresets are every response length preset.
var ResponseLengthPresets = []string{LengthShort, LengthMedium, LengthLong}

// responseLengthTokens is the max_tokens of each response length preset.
var responseLengthTokens = map[string]int{LengthShort: 256, LengthMedium: 1024, LengthLong: 4096}

// presetSampling is the temperature and top_p of each style preset; custom
// has none (the caller's generation_params alone).
var presetSampling = map[string][2]float64{
	PresetAccurate: {0.2, 0.9},
	PresetBalanced: {0.7, 1.0},
	PresetCreative: {1.0, 1.0},
}

// EffectiveParams resolves what a turn sends: the style preset's temperature
// and top_p, each overridden by an explicit generation parameter; max_tokens
// and max_completion_tokens as given, and, when neither is, the response
// length preset's max_tokens.
func EffectiveParams(preset string, gp events.GenerationParams) events.TurnParams {
	var p events.TurnParams
	if s, ok := presetSampling[preset]; ok {
		p.Temperature, p.TopP = ptrTo(s[0]), ptrTo(s[1])
	}
	if gp.Temperature != nil {
		p.Temperature = ptrTo(*gp.Temperature)
	}
	if gp.TopP != nil {
		p.TopP = ptrTo(*gp.TopP)
	}
	if gp.MaxTokens != nil {
		p.MaxTokens = ptrTo(*gp.MaxTokens)
	}
	if gp.MaxCompletionTokens != nil {
		p.MaxCompletionTokens = ptrTo(*gp.MaxCompletionTokens)
	}
	if p.MaxTokens == nil && p.MaxCompletionTokens == nil && gp.ResponseLengthPreset != nil {
		if n, ok := responseLengthTokens[*gp.ResponseLengthPreset]; ok {
			p.MaxTokens = ptrTo(n)
		}
	}
	return p
}

func ptrTo[T any](v T) *T { return &v }

// FewShotPair is a few-shot example's texts.
type FewShotPair struct {
	Input, Output string
}

// Prompt is everything a turn's messages are built from.
type Prompt struct {
	// Agent is the session's agent snapshot; nil without an agent.
	Agent *events.AgentSnapshot
	// StyleParams is a JSON object (canonical or not); empty or {} adds nothing.
	StyleParams json.RawMessage
	// Examples are the few-shot examples, in sort order.
	Examples []FewShotPair
	// History is the session's earlier turns, in order.
	History []Turn
	// Text is the new prompt.
	Text string
	// Passages are the texts retrieved from the session's knowledge
	// documents for this prompt, best first.
	Passages []string
}

// Messages builds the chat a turn sends: a system message (the agent's system
// prompt, then the style parameters), the few-shot examples as user and
// assistant pairs, each earlier turn as the user's prompt and the primary
// model's answer (left out when that model failed), and the new prompt.
func (p Prompt) Messages() []events.ChatMessage {
	recorded, _ := p.Recorded()
	return SentMessages(recorded, p.History)
}

// Recorded is what a turn's event holds of its messages: Messages less the
// history, and how many earlier turns that history held.
func (p Prompt) Recorded() (messages []events.ChatMessage, historyTurns int) {
	var out []events.ChatMessage
	if system := p.system(); system != "" {
		out = append(out, events.ChatMessage{Role: RoleSystemMessage, Content: system})
	}
	for _, x := range p.Examples {
		out = append(out,
			events.ChatMessage{Role: RoleUserMessage, Content: x.Input},
			events.ChatMessage{Role: RoleAssistantMessage, Content: x.Output})
	}
	return append(out, events.ChatMessage{Role: RoleUserMessage, Content: p.Text}), len(p.History)
}

// LastTurns are the last n of turns: all of them when there are fewer,
// none for n of 0 or less (a version 1 event, or one written by hand).
func LastTurns(turns []Turn, n int) []Turn {
	return turns[len(turns)-min(max(n, 0), len(turns)):]
}

// SentMessages are the messages a turn sent: recorded, as its event holds
// them (its last message the prompt), with the history of the earlier
// turns put back before the prompt, each turn's prompt and its primary
// model's answer (left out when that model failed).
func SentMessages(recorded []events.ChatMessage, earlier []Turn) []events.ChatMessage {
	if len(recorded) == 0 || len(earlier) == 0 {
		return recorded
	}
	last := len(recorded) - 1
	out := make([]events.ChatMessage, 0, len(recorded)+2*len(earlier))
	out = append(out, recorded[:last]...)
	for _, t := range earlier {
		out = append(out, events.ChatMessage{Role: RoleUserMessage, Content: t.PromptText})
		if r, ok := t.Primary(); ok && r.Error == nil {
			out = append(out, events.ChatMessage{Role: RoleAssistantMessage, Content: r.ResponseText})
		}
	}
	return append(out, recorded[last])
}

// Message roles of a turn's chat.
const (
	RoleSystemMessage    = "system"
	RoleUserMessage      = "user"
	RoleAssistantMessage = "assistant"
)

// system is the system message: the agent's system prompt, a blank line, and
// the style parameters as "Style parameters:" and one "- key: value" line
// each, keys sorted (strings as they are, other values as compact JSON).
func (p Prompt) system() string {
	var parts []string
	if p.Agent != nil && strings.TrimSpace(p.Agent.SystemPrompt) != "" {
		parts = append(parts, p.Agent.SystemPrompt)
	}
	if style := styleLines(p.StyleParams); style != "" {
		parts = append(parts, style)
	}
	if len(p.Passages) > 0 {
		parts = append(parts, passageLines(p.Passages))
	}
	return strings.Join(parts, "\n\n")
}

// passageLines is "Use these passages:" and one "[n] text" line each.
func passageLines(passages []string) string {
	var b strings.Builder
	b.WriteString("Use these passages:")
	for i, p := range passages {
		fmt.Fprintf(&b, "\n[%d] %s", i+1, p)
	}
	return b.String()
}

func styleLines(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || len(obj) == 0 {
		return ""
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("Style parameters:")
	for _, k := range keys {
		b.WriteString("\n- ")
		b.WriteString(k)
		b.WriteString(": ")
		var s string
		if json.Unmarshal(obj[k], &s) == nil {
			b.WriteString(s)
			continue
		}
		var compact bytes.Buffer
		if json.Compact(&compact, obj[k]) == nil {
			b.Write(compact.Bytes())
		}
	}
	return b.String()
}
