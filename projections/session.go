package projections

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"lectern/events"
)

// SessionsProjection maintains practice_sessions, practice_session_counts,
// session_settings, session_few_shot_links, session_models and
// session_responses: one consumer group (a persisted identifier) for the
// whole area.
const SessionsProjection = PracticeProjection

// PracticeProjection is the consumer group of few-shot examples and practice
// sessions.
const PracticeProjection = "practice"

// SessionProjections project practice sessions.
func SessionProjections() []Projection {
	return []Projection{{Name: SessionsProjection, Tables: []string{"practice_sessions", "practice_session_counts", "session_settings", "session_few_shot_links", "session_models", "session_responses"}, Handlers: []GroupHandler{
		On(projectSessionStarted),
		On(projectTurnRecorded),
		On(projectSettingsUpdated),
	}}}
}

// Each event is one statement (data-modifying CTEs): a replay pipelines
// statements, and their number is what it costs. The session row's version
// guards every write: an event older than the row, or applied already,
// changes nothing (the "advanced" CTE is empty then).

// advanced is the CTE that moves the session row ($1) to the event's version
// ($3) at its time ($2).
const advanced = `advanced AS (
		UPDATE practice_sessions SET updated_at = $2, version = $3 WHERE id = $1 AND version < $3 RETURNING id)`

func projectSessionStarted(ctx context.Context, tx pgx.Tx, m events.Meta, e events.SessionStarted) error {
	knowledge := e.KnowledgeIDs
	if knowledge == nil {
		knowledge = []int64{}
	}
	st, err := encodeSettings(e.Settings)
	if err != nil {
		return err
	}
	// The count, the settings and the links are written only when the
	// session row is new.
	_, err = tx.Exec(ctx, `
		WITH created AS (
			INSERT INTO practice_sessions (id, user_id, class_id, project_id, agent_id, knowledge_ids, title, created_at, updated_at, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)
			ON CONFLICT (user_id, id) DO NOTHING
			RETURNING id, user_id),
		counted AS (
			INSERT INTO practice_session_counts (user_id, total) SELECT user_id, 1 FROM created
			ON CONFLICT (user_id) DO UPDATE SET total = practice_session_counts.total + 1),
		settings AS (
			INSERT INTO session_settings (id, session_id, style_preset, style_params, generation_params, agent_snapshot, created_at, updated_at)
			SELECT $10, id, $11, $12::json, $13::json, $14::json, $8, $8 FROM created
			ON CONFLICT (id) DO NOTHING)
		INSERT INTO session_few_shot_links (id, setting_id, session_id, example_id, sort_order, created_at)
		SELECT l.id, $10, $1, l.example_id, l.sort_order, $8
		FROM created, unnest($15::bigint[], $16::bigint[], $17::int[]) AS l(id, example_id, sort_order)
		ON CONFLICT (id) DO NOTHING`,
		e.SessionID, e.UserID, e.ClassID, e.ProjectID, e.AgentID, knowledge, e.Title, m.RecordedAt, m.Version,
		e.Settings.SettingID, e.Settings.StylePreset, st.style, st.generation, st.agent, st.linkIDs, st.examples, st.orders)
	return err
}

// settingsColumns are a session's settings as the statements bind them.
type settingsColumns struct {
	style, generation, agent string
	linkIDs, examples        []int64
	orders                   []int32
}

func encodeSettings(s events.SessionSettings) (settingsColumns, error) {
	var c settingsColumns
	gp, err := json.Marshal(s.GenerationParams)
	if err != nil {
		return c, err
	}
	agent := []byte(`{}`)
	if s.AgentSnapshot != nil {
		if agent, err = json.Marshal(s.AgentSnapshot); err != nil {
			return c, err
		}
	}
	c.style, c.generation, c.agent = string(s.StyleParams), string(gp), string(agent)
	if c.style == "" {
		c.style = "{}"
	}
	c.linkIDs = make([]int64, len(s.FewShotLinks))
	c.examples = make([]int64, len(s.FewShotLinks))
	c.orders = make([]int32, len(s.FewShotLinks))
	for i, l := range s.FewShotLinks {
		c.linkIDs[i], c.examples[i], c.orders[i] = l.LinkID, l.ExampleID, int32(l.SortOrder)
	}
	return c, nil
}

// projectTurnRecorded writes the turn's models (the first turn's) and
// responses.
func projectTurnRecorded(ctx context.Context, tx pgx.Tx, m events.Meta, e events.SessionTurnRecorded) error {
	params, err := json.Marshal(e.Params)
	if err != nil {
		return err
	}
	n := len(e.Results)
	models, modelIDs, responses, latencies := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	names, texts, usages := make([]string, n), make([]string, n), make([]string, n)
	failures, primary := make([]*string, n), make([]bool, n)
	for i, r := range e.Results {
		usage, err := json.Marshal(r.TokenUsage)
		if err != nil {
			return err
		}
		if r.Error != nil {
			raw, err := json.Marshal(r.Error)
			if err != nil {
				return err
			}
			s := string(raw)
			failures[i] = &s
		}
		models[i], modelIDs[i], responses[i], latencies[i] = r.SessionModelID, r.ModelID, r.ResponseID, r.LatencyMS
		names[i], texts[i], usages[i], primary[i] = r.ModelName, r.ResponseText, string(usage), r.IsPrimary
	}
	_, err = tx.Exec(ctx, `
		WITH `+advanced+`,
		models AS (
			INSERT INTO session_models (id, session_id, model_id, model_name, created_at)
			SELECT r.model, $1, r.model_id, r.name, $2
			FROM advanced, unnest($4::bigint[], $5::bigint[], $6::text[]) AS r(model, model_id, name)
			ON CONFLICT (id) DO NOTHING)
		INSERT INTO session_responses (id, session_id, session_model_id, turn, position, model_name, prompt_text,
			response_text, token_usage, latency_ms, is_primary, generation_params, error, created_at)
		SELECT r.id, $1, r.model, $7, r.position - 1, r.name, $8, r.text, r.usage::json, r.latency, r.is_primary, $9::json, r.error::json, $2
		FROM advanced, unnest($10::bigint[], $4::bigint[], $6::text[], $11::text[], $12::text[], $13::bigint[], $14::bool[], $15::text[])
			WITH ORDINALITY AS r(id, model, name, text, usage, latency, is_primary, error, position)
		ON CONFLICT (id) DO NOTHING`,
		e.SessionID, m.RecordedAt, m.Version, models, modelIDs, names, e.Turn, e.PromptText, string(params),
		responses, texts, usages, latencies, primary, failures)
	return err
}

// projectSettingsUpdated replaces the settings and the few-shot links (links
// that left the list are deleted, links that stay keep their creation time).
func projectSettingsUpdated(ctx context.Context, tx pgx.Tx, m events.Meta, e events.SessionSettingsUpdated) error {
	st, err := encodeSettings(e.Settings)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		WITH `+advanced+`,
		settings AS (
			UPDATE session_settings SET style_preset = $4, style_params = $5::json, generation_params = $6::json,
				agent_snapshot = $7::json, updated_at = $2
			WHERE session_id = $1 AND EXISTS (SELECT 1 FROM advanced)),
		dropped AS (
			DELETE FROM session_few_shot_links
			WHERE session_id = $1 AND NOT (id = ANY($8)) AND EXISTS (SELECT 1 FROM advanced))
		INSERT INTO session_few_shot_links (id, setting_id, session_id, example_id, sort_order, created_at)
		SELECT l.id, $11, $1, l.example_id, l.sort_order, $2
		FROM advanced, unnest($8::bigint[], $9::bigint[], $10::int[]) AS l(id, example_id, sort_order)
		ON CONFLICT (id) DO UPDATE SET sort_order = EXCLUDED.sort_order`,
		e.SessionID, m.RecordedAt, m.Version, e.Settings.StylePreset, st.style, st.generation, st.agent,
		st.linkIDs, st.examples, st.orders, e.Settings.SettingID)
	return err
}
