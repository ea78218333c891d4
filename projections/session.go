package projections

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/personal"
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
	return []Projection{withLoader(Projection{Name: SessionsProjection, Tables: sessionTables, Handlers: []GroupHandler{
		OnSet(projectSessionsStarted),
		OnSet(projectTurnsRecorded),
		OnSet(projectSettingsUpdated),
		OnSet(projectUserErased),
	}}, newSessionLoader)}
}

// sessionTables are the tables of the sessions' handlers, and loader.
var sessionTables = []string{"practice_sessions", "practice_session_counts", "session_settings", "session_few_shot_links",
	"session_models", "session_responses"}

// Each handler is one statement (data-modifying CTEs) for any number of
// events, each of a different session. The session row's version guards
// every write: an event older than the row, or applied already, changes
// nothing (its session is missing from the "advanced" CTE).

// sessionsAdvanced is the CTE that moves each event's session row to the
// event's version and time; ev is the CTE of the events (session_id, at,
// version).
const sessionsAdvanced = `advanced AS (
		UPDATE practice_sessions p SET updated_at = ev.at, version = ev.version
		FROM ev WHERE p.id = ev.session_id AND p.version < ev.version
		RETURNING p.id)`

// projectSessionsStarted writes the sessions; their count, settings and
// links only for the session rows that are new.
func projectSessionsStarted(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.SessionStarted) error {
	n := len(es)
	versions, at := metaColumns(ms)
	ids, users := make([]int64, n), make([]int64, n)
	classes, projects, agents := make([]*int64, n), make([]*int64, n), make([]*int64, n)
	knowledge, titles := make([]string, n), make([]*string, n)
	var st settingsRows
	for i, e := range es {
		if err := st.add(e.SessionID, e.Settings); err != nil {
			return err
		}
		ids[i], users[i], classes[i], projects[i], agents[i], titles[i] = e.SessionID, e.UserID, e.ClassID, e.ProjectID, e.AgentID, e.Title
		knowledge[i] = int64Array(e.KnowledgeIDs)
	}
	_, err := tx.Exec(ctx, `
		WITH ev AS (
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
				$8::timestamptz[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[], $14::text[])
				AS ev(session_id, user_id, class_id, project_id, agent_id, knowledge_ids, title, at, version, setting_id,
					style_preset, style_params, generation_params, agent_snapshot)),
		created AS (
			INSERT INTO practice_sessions (id, user_id, class_id, project_id, agent_id, knowledge_ids, title, created_at, updated_at, version)
			SELECT session_id, user_id, class_id, project_id, agent_id, knowledge_ids::bigint[], title, at, at, version FROM ev
			ON CONFLICT (user_id, id) DO NOTHING
			RETURNING id, user_id),
		counted AS (
			INSERT INTO practice_session_counts (user_id, total) SELECT user_id, count(*) FROM created GROUP BY user_id
			ON CONFLICT (user_id) DO UPDATE SET total = practice_session_counts.total + EXCLUDED.total),
		settings AS (
			INSERT INTO session_settings (id, session_id, style_preset, style_params, generation_params, agent_snapshot, created_at, updated_at)
			SELECT ev.setting_id, ev.session_id, ev.style_preset, ev.style_params::json, ev.generation_params::json,
				ev.agent_snapshot::json, ev.at, ev.at
			FROM ev JOIN created ON created.id = ev.session_id
			ON CONFLICT (id) DO NOTHING)
		INSERT INTO session_few_shot_links (id, setting_id, session_id, example_id, sort_order, created_at)
		SELECT l.id, ev.setting_id, ev.session_id, l.example_id, l.sort_order, ev.at
		FROM unnest($15::bigint[], $16::bigint[], $17::bigint[], $18::int[]) AS l(id, session_id, example_id, sort_order)
			JOIN created ON created.id = l.session_id JOIN ev ON ev.session_id = l.session_id
		ON CONFLICT (id) DO NOTHING`,
		ids, users, classes, projects, agents, knowledge, titles, at, versions, st.ids, st.presets, st.styles, st.generations, st.snapshots,
		st.linkIDs, st.linkSessions, st.examples, st.orders)
	return err
}

// int64Array is ids as a PostgreSQL array literal (a text cast to bigint[]
// in SQL: arrays of arrays must be rectangular).
func int64Array(ids []int64) string {
	b := make([]byte, 0, 2+8*len(ids))
	b = append(b, '{')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, '}'))
}

// settingsRows are the settings of several sessions as the statements bind
// them, one element per session, and their few-shot links flattened: link
// i belongs to session linkSessions[i].
type settingsRows struct {
	ids                                     []int64
	presets, styles, generations, snapshots []string
	linkIDs, linkSessions, examples         []int64
	orders                                  []int32
}

func (r *settingsRows) add(session int64, s events.SessionSettings) error {
	style, generation, snapshot, err := settingsJSON(s)
	if err != nil {
		return err
	}
	r.ids, r.presets, r.styles = append(r.ids, s.SettingID), append(r.presets, s.StylePreset), append(r.styles, style)
	r.generations, r.snapshots = append(r.generations, generation), append(r.snapshots, snapshot)
	for _, l := range s.FewShotLinks {
		r.linkIDs, r.linkSessions = append(r.linkIDs, l.LinkID), append(r.linkSessions, session)
		r.examples, r.orders = append(r.examples, l.ExampleID), append(r.orders, int32(l.SortOrder))
	}
	return nil
}

// settingsJSON is the settings' objects as session_settings stores them.
func settingsJSON(s events.SessionSettings) (style, generation, snapshot string, err error) {
	gp, err := json.Marshal(s.GenerationParams)
	if err != nil {
		return "", "", "", err
	}
	agent := []byte(`{}`)
	if s.AgentSnapshot != nil {
		if agent, err = json.Marshal(s.AgentSnapshot); err != nil {
			return "", "", "", err
		}
	}
	style = string(s.StyleParams)
	if style == "" {
		style = "{}"
	}
	return style, string(gp), string(agent), nil
}

// resultJSON is a model's token usage and failure (nil when it answered) as
// session_responses stores them.
func resultJSON(r events.TurnResult) (usage string, failure *string, err error) {
	// What json.Marshal writes of TokenUsage, without its reflection.
	u := make([]byte, 0, 64)
	u = append(u, `{"prompt_tokens":`...)
	u = strconv.AppendInt(u, int64(r.TokenUsage.PromptTokens), 10)
	u = append(u, `,"completion_tokens":`...)
	u = strconv.AppendInt(u, int64(r.TokenUsage.CompletionTokens), 10)
	u = append(u, `,"total_tokens":`...)
	u = strconv.AppendInt(u, int64(r.TokenUsage.TotalTokens), 10)
	u = append(u, '}')
	if r.Error != nil {
		raw, err := json.Marshal(r.Error)
		if err != nil {
			return "", nil, err
		}
		s := string(raw)
		failure = &s
	}
	return string(u), failure, nil
}

// projectTurnsRecorded writes each turn's models (the first turn's) and
// responses.
func projectTurnsRecorded(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.SessionTurnRecorded) error {
	n := len(es)
	versions, at := metaColumns(ms)
	sessions, turns, prompts, params := make([]int64, n), make([]int32, n), make([]string, n), make([]string, n)
	// One element per model answer.
	var (
		rSessions, models, modelIDs, responses, latencies []int64
		names, texts, usages                              []string
		failures                                          []*string
		primary                                           []bool
		positions                                         []int32
	)
	for i, e := range es {
		p, err := json.Marshal(e.Params)
		if err != nil {
			return err
		}
		sessions[i], turns[i], prompts[i], params[i] = e.SessionID, int32(e.Turn), e.PromptText, string(p)
		for pos, r := range e.Results {
			usage, failure, err := resultJSON(r)
			if err != nil {
				return err
			}
			rSessions = append(rSessions, e.SessionID)
			models, modelIDs, responses = append(models, r.SessionModelID), append(modelIDs, r.ModelID), append(responses, r.ResponseID)
			latencies, names, texts = append(latencies, r.LatencyMS), append(names, r.ModelName), append(texts, r.ResponseText)
			usages, failures, primary = append(usages, usage), append(failures, failure), append(primary, r.IsPrimary)
			positions = append(positions, int32(pos))
		}
	}
	_, err := tx.Exec(ctx, `
		WITH ev AS (
			SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::bigint[], $4::int[], $5::text[], $6::text[])
				AS ev(session_id, at, version, turn, prompt_text, params)),
		`+sessionsAdvanced+`,
		r AS (
			SELECT r.*, ev.at, ev.turn, ev.prompt_text, ev.params
			FROM unnest($7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::bigint[], $12::text[], $13::text[],
				$14::bigint[], $15::bool[], $16::text[], $17::int[])
				AS r(session_id, model, model_id, name, id, text, usage, latency, is_primary, error, position)
				JOIN advanced ON advanced.id = r.session_id JOIN ev ON ev.session_id = r.session_id),
		models AS (
			INSERT INTO session_models (id, session_id, model_id, model_name, created_at)
			SELECT model, session_id, model_id, name, at FROM r
			ON CONFLICT (id) DO NOTHING)
		INSERT INTO session_responses (id, session_id, session_model_id, turn, position, model_name, prompt_text,
			response_text, token_usage, latency_ms, is_primary, generation_params, error, created_at)
		SELECT id, session_id, model, turn, position, name, prompt_text, text, usage::json, latency, is_primary,
			params::json, error::json, at
		FROM r
		ON CONFLICT (id) DO NOTHING`,
		sessions, at, versions, turns, prompts, params,
		rSessions, models, modelIDs, names, responses, texts, usages, latencies, primary, failures, positions)
	return err
}

// projectSettingsUpdated replaces each session's settings and few-shot links
// (links that left the list are deleted, links that stay keep their
// creation time).
func projectSettingsUpdated(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.SessionSettingsUpdated) error {
	versions, at := metaColumns(ms)
	sessions := make([]int64, len(es))
	var st settingsRows
	for i, e := range es {
		if err := st.add(e.SessionID, e.Settings); err != nil {
			return err
		}
		sessions[i] = e.SessionID
	}
	_, err := tx.Exec(ctx, `
		WITH ev AS (
			SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
				AS ev(session_id, at, version, setting_id, style_preset, style_params, generation_params, agent_snapshot)),
		`+sessionsAdvanced+`,
		settings AS (
			UPDATE session_settings s SET style_preset = ev.style_preset, style_params = ev.style_params::json,
				generation_params = ev.generation_params::json, agent_snapshot = ev.agent_snapshot::json, updated_at = ev.at
			FROM ev JOIN advanced ON advanced.id = ev.session_id
			WHERE s.session_id = ev.session_id),
		l AS (
			SELECT * FROM unnest($9::bigint[], $10::bigint[], $11::bigint[], $12::int[]) AS l(id, session_id, example_id, sort_order)),
		dropped AS (
			DELETE FROM session_few_shot_links d USING advanced
			WHERE d.session_id = advanced.id AND NOT EXISTS (SELECT 1 FROM l WHERE l.id = d.id))
		INSERT INTO session_few_shot_links (id, setting_id, session_id, example_id, sort_order, created_at)
		SELECT l.id, ev.setting_id, l.session_id, l.example_id, l.sort_order, ev.at
		FROM l JOIN advanced ON advanced.id = l.session_id JOIN ev ON ev.session_id = l.session_id
		ON CONFLICT (id) DO UPDATE SET sort_order = EXCLUDED.sort_order`,
		sessions, at, versions, st.ids, st.presets, st.styles, st.generations, st.snapshots,
		st.linkIDs, st.linkSessions, st.examples, st.orders)
	return err
}

// projectUserErased anonymises the erased users' sessions: they read as
// session.started, session.turn_recorded and session.settings_updated at
// their placeholders. No title; no style parameters (the user's free text)
// and no agent snapshot, which the settings store as {}; every turn's
// prompt and answers "[erased]", a failed model's empty answer too, and no
// model's error (a provider's message may quote the prompt); the messages
// sent are stored nowhere. The sessions' streams did not move (see
// crossStream).
func projectUserErased(ctx context.Context, tx pgx.Tx, _ []events.Meta, es []events.UserErased) error {
	_, err := tx.Exec(ctx, `
		WITH erased AS (
			UPDATE practice_sessions SET title = NULL WHERE user_id = ANY($1::bigint[])
			RETURNING id),
		settings AS (
			UPDATE session_settings s SET style_params = '{}'::json, agent_snapshot = '{}'::json
			FROM erased WHERE s.session_id = erased.id)
		UPDATE session_responses r SET prompt_text = $2, response_text = $2, error = NULL
		FROM erased WHERE r.session_id = erased.id AND (r.prompt_text <> $2 OR r.response_text <> $2 OR r.error IS NOT NULL)`,
		erasedIDs(es), personal.ErasedText)
	return err
}
