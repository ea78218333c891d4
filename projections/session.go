package projections

import (
	"context"
	"encoding/json"
	"fmt"

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

// advanceSession moves the session row to the event's version; an event
// applied already (or older than the row) leaves it as it is.
func advanceSession(b *pgx.Batch, m events.Meta, sessionID int64) {
	b.Queue(`UPDATE practice_sessions SET updated_at = $2, version = $3 WHERE id = $1 AND version < $3`,
		sessionID, m.RecordedAt, m.Version)
}

func projectSessionStarted(ctx context.Context, tx pgx.Tx, m events.Meta, e events.SessionStarted) error {
	knowledge := e.KnowledgeIDs
	if knowledge == nil {
		knowledge = []int64{}
	}
	b := &pgx.Batch{}
	// The count moves only when the session row is new.
	b.Queue(`
		WITH created AS (
			INSERT INTO practice_sessions (id, user_id, class_id, project_id, agent_id, knowledge_ids, title, created_at, updated_at, version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)
			ON CONFLICT (user_id, id) DO NOTHING
			RETURNING user_id)
		INSERT INTO practice_session_counts (user_id, total) SELECT user_id, 1 FROM created
		ON CONFLICT (user_id) DO UPDATE SET total = practice_session_counts.total + 1`,
		e.SessionID, e.UserID, e.ClassID, e.ProjectID, e.AgentID, knowledge, e.Title, m.RecordedAt, m.Version)
	if err := queueSettings(b, m, e.SessionID, e.Settings, true); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// queueSettings writes a session's settings: the settings row, and its
// few-shot links as the list says (links that left it are deleted, links that
// stay keep their creation time).
func queueSettings(b *pgx.Batch, m events.Meta, sessionID int64, s events.SessionSettings, created bool) error {
	gp, err := json.Marshal(s.GenerationParams)
	if err != nil {
		return err
	}
	agent := []byte(`{}`)
	if s.AgentSnapshot != nil {
		if agent, err = json.Marshal(s.AgentSnapshot); err != nil {
			return err
		}
	}
	style := string(s.StyleParams)
	if style == "" {
		style = "{}"
	}
	if created {
		b.Queue(`
			INSERT INTO session_settings (id, session_id, style_preset, style_params, generation_params, agent_snapshot, created_at, updated_at)
			VALUES ($1, $2, $3, $4::json, $5::json, $6::json, $7, $7)
			ON CONFLICT (id) DO NOTHING`,
			s.SettingID, sessionID, s.StylePreset, style, string(gp), string(agent), m.RecordedAt)
	} else {
		b.Queue(`
			UPDATE session_settings SET style_preset = $2, style_params = $3::json, generation_params = $4::json,
				agent_snapshot = $5::json, updated_at = $6
			WHERE session_id = $1 AND `+atVersion(1, 7),
			sessionID, s.StylePreset, style, string(gp), string(agent), m.RecordedAt, m.Version)
	}
	ids := make([]int64, len(s.FewShotLinks))
	examples := make([]int64, len(s.FewShotLinks))
	orders := make([]int32, len(s.FewShotLinks))
	for i, l := range s.FewShotLinks {
		ids[i], examples[i], orders[i] = l.LinkID, l.ExampleID, int32(l.SortOrder)
	}
	if !created {
		b.Queue(`DELETE FROM session_few_shot_links WHERE session_id = $1 AND NOT (id = ANY($2)) AND `+atVersion(1, 3),
			sessionID, ids, m.Version)
	}
	b.Queue(`
		INSERT INTO session_few_shot_links (id, setting_id, session_id, example_id, sort_order, created_at)
		SELECT l.id, $1, $2, l.example_id, l.sort_order, $6
		FROM unnest($3::bigint[], $4::bigint[], $5::int[]) AS l(id, example_id, sort_order)
		WHERE `+atVersion(2, 7)+`
		ON CONFLICT (id) DO UPDATE SET sort_order = EXCLUDED.sort_order`,
		s.SettingID, sessionID, ids, examples, orders, m.RecordedAt, m.Version)
	return nil
}

// atVersion guards the writes that follow advanceSession (the session id and
// the event's version are parameters $session and $version): they apply only
// while the session row stands at this event's version, so an event delivered
// again after a newer one cannot overwrite the newer state.
func atVersion(session, version int) string {
	return fmt.Sprintf("EXISTS (SELECT 1 FROM practice_sessions WHERE id = $%d AND version = $%d)", session, version)
}

// projectTurnRecorded: a turn's rows are keyed by their ids, so an event
// delivered again writes nothing.
func projectTurnRecorded(ctx context.Context, tx pgx.Tx, m events.Meta, e events.SessionTurnRecorded) error {
	params, err := json.Marshal(e.Params)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	advanceSession(b, m, e.SessionID)
	for i, r := range e.Results {
		usage, err := json.Marshal(r.TokenUsage)
		if err != nil {
			return err
		}
		var failure *string
		if r.Error != nil {
			raw, err := json.Marshal(r.Error)
			if err != nil {
				return err
			}
			s := string(raw)
			failure = &s
		}
		b.Queue(`
			INSERT INTO session_models (id, session_id, model_id, model_name, created_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (id) DO NOTHING`,
			r.SessionModelID, e.SessionID, r.ModelID, r.ModelName, m.RecordedAt)
		b.Queue(`
			INSERT INTO session_responses (id, session_id, session_model_id, turn, position, model_name, prompt_text,
				response_text, token_usage, latency_ms, is_primary, generation_params, error, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::json, $10, $11, $12::json, $13::json, $14)
			ON CONFLICT (id) DO NOTHING`,
			r.ResponseID, e.SessionID, r.SessionModelID, e.Turn, i, r.ModelName, e.PromptText,
			r.ResponseText, string(usage), r.LatencyMS, r.IsPrimary, string(params), failure, m.RecordedAt)
	}
	return tx.SendBatch(ctx, b).Close()
}

func projectSettingsUpdated(ctx context.Context, tx pgx.Tx, m events.Meta, e events.SessionSettingsUpdated) error {
	b := &pgx.Batch{}
	advanceSession(b, m, e.SessionID)
	if err := queueSettings(b, m, e.SessionID, e.Settings, false); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}
