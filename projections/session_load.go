package projections

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"lectern/events"
	"lectern/personal"
)

// sessionLoader is the sessions' Loader: the rows projectSessionsStarted,
// projectTurnsRecorded, projectSettingsUpdated and projectUserErased write,
// folded in memory.
// A session's row, settings and links change until the log is read; its
// models and responses are written once, so they are handed over as they
// gather (an erasure changes responses later: the replay applies it again
// to those handed over, see crossStream). Ids are the sequences' (unique
// across sessions), as the handlers' conflict targets assume.
type sessionLoader struct {
	sessions map[int64]*loadedSession
	started  []*loadedSession // in the order they started: rows go in that order
	counts   map[int64]int64  // sessions per user
	userSeen []int64          // users in the order of their first session
	byUser   map[int64][]*loadedSession
	// Rows no later event changes, not handed over yet.
	models    []modelRow
	responses []responseRow
	// batch is how many such rows Rows waits for while the log is read.
	batch int
}

type loadedSession struct {
	id, user              int64
	class, project, agent *int64
	knowledge             []int64
	title                 *string
	createdAt, updatedAt  time.Time
	version               int64
	settings              loadedSettings
	links                 []loadedLink
	models                []int64 // the session model ids written
}

type loadedSettings struct {
	id                               int64
	preset, style, generation, agent string
	createdAt, updatedAt             time.Time
}

// modelRow and responseRow are rows of session_models and
// session_responses, as COPY reads them (see structRows).
type modelRow struct {
	id, session, model int64
	name               string
	at                 time.Time
}

type responseRow struct {
	id, session, model int64
	turn, position     int32
	name, prompt, text string
	usage              string
	latency            int64
	primary            bool
	params             string
	failure            *string
	at                 time.Time
}

func (r *modelRow) fields(v []any) []any {
	return append(v, &r.id, &r.session, &r.model, &r.name, &r.at)
}

func (r *responseRow) fields(v []any) []any {
	return append(v, &r.id, &r.session, &r.model, &r.turn, &r.position, &r.name, &r.prompt,
		&r.text, &r.usage, &r.latency, &r.primary, &r.params, &r.failure, &r.at)
}

type loadedLink struct {
	id, setting, example int64
	order                int32
	createdAt            time.Time
}

// newSessionLoader returns an empty sessions loader.
func newSessionLoader() Loader {
	return &sessionLoader{sessions: map[int64]*loadedSession{}, counts: map[int64]int64{}, byUser: map[int64][]*loadedSession{},
		batch: 20_000}
}

func (l *sessionLoader) Tables() []string { return sessionTables }

// Held counts a session as one row (its settings and links with it), and
// the models and responses not handed over yet.
func (l *sessionLoader) Held() int { return len(l.started) + len(l.models) + len(l.responses) }

func (l *sessionLoader) Types() []string {
	return []string{events.SessionStarted{}.EventType(), events.SessionTurnRecorded{}.EventType(),
		events.SessionSettingsUpdated{}.EventType(), events.UserErased{}.EventType()}
}

func (l *sessionLoader) Fold(m events.Meta, e any) error {
	switch e := e.(type) {
	case *events.SessionStarted:
		return l.start(m, e)
	case *events.SessionTurnRecorded:
		return l.turn(m, e)
	case *events.SessionSettingsUpdated:
		return l.updateSettings(m, e)
	case *events.UserErased:
		l.erase(e.UserID)
		return nil
	}
	return fmt.Errorf("sessions loader: no fold for %T", e)
}

// start is projectSessionsStarted: a session already there stays as it is.
func (l *sessionLoader) start(m events.Meta, e *events.SessionStarted) error {
	if _, ok := l.sessions[e.SessionID]; ok {
		return nil
	}
	style, generation, agent, err := settingsJSON(e.Settings)
	if err != nil {
		return err
	}
	knowledge := e.KnowledgeIDs
	if knowledge == nil {
		knowledge = []int64{} // NULL otherwise; the handler binds '{}'
	}
	s := &loadedSession{id: e.SessionID, user: e.UserID, class: e.ClassID, project: e.ProjectID, agent: e.AgentID,
		knowledge: knowledge, title: e.Title, createdAt: m.RecordedAt, updatedAt: m.RecordedAt, version: m.Version,
		settings: loadedSettings{id: e.Settings.SettingID, preset: e.Settings.StylePreset, style: style, generation: generation,
			agent: agent, createdAt: m.RecordedAt, updatedAt: m.RecordedAt}}
	for _, fl := range e.Settings.FewShotLinks {
		if !slices.ContainsFunc(s.links, func(k loadedLink) bool { return k.id == fl.LinkID }) {
			s.links = append(s.links, loadedLink{id: fl.LinkID, setting: e.Settings.SettingID, example: fl.ExampleID,
				order: int32(fl.SortOrder), createdAt: m.RecordedAt})
		}
	}
	l.sessions[s.id] = s
	l.started = append(l.started, s)
	if l.counts[s.user] == 0 {
		l.userSeen = append(l.userSeen, s.user)
	}
	l.counts[s.user]++
	l.byUser[s.user] = append(l.byUser[s.user], s)
	return nil
}

// advance is the handlers' "advanced" CTE: the session an event applies to,
// moved to the event's version and time, or nil when there is no such
// session or the event is not newer than it.
func (l *sessionLoader) advance(m events.Meta, session int64) *loadedSession {
	s := l.sessions[session]
	if s == nil || s.version >= m.Version {
		return nil
	}
	s.updatedAt, s.version = m.RecordedAt, m.Version
	return s
}

// turn is projectTurnsRecorded.
func (l *sessionLoader) turn(m events.Meta, e *events.SessionTurnRecorded) error {
	s := l.advance(m, e.SessionID)
	if s == nil {
		return nil
	}
	params, err := json.Marshal(e.Params)
	if err != nil {
		return err
	}
	if l.responses == nil { // a batch's worth at once, not grown by doubling
		l.models, l.responses = make([]modelRow, 0, l.batch/4), make([]responseRow, 0, l.batch)
	}
	for pos, r := range e.Results {
		usage, failure, err := resultJSON(r)
		if err != nil {
			return err
		}
		if !slices.Contains(s.models, r.SessionModelID) {
			s.models = append(s.models, r.SessionModelID)
			l.models = append(l.models, modelRow{id: r.SessionModelID, session: s.id, model: r.ModelID, name: r.ModelName, at: m.RecordedAt})
		}
		l.responses = append(l.responses, responseRow{id: r.ResponseID, session: s.id, model: r.SessionModelID, turn: int32(e.Turn),
			position: int32(pos), name: r.ModelName, prompt: e.PromptText, text: r.ResponseText, usage: usage, latency: r.LatencyMS,
			primary: r.IsPrimary, params: string(params), failure: failure, at: m.RecordedAt})
	}
	return nil
}

// erase is projectUserErased on the rows the loader holds; those it handed
// over already are the replay's to anonymise (see crossStream).
func (l *sessionLoader) erase(user int64) {
	mine := map[int64]bool{}
	for _, s := range l.byUser[user] {
		s.title, s.settings.style, s.settings.agent = nil, "{}", "{}"
		mine[s.id] = true
	}
	if len(mine) == 0 {
		return
	}
	for i := range l.responses {
		if r := &l.responses[i]; mine[r.session] {
			r.prompt, r.text, r.failure = personal.ErasedText, personal.ErasedText, nil
		}
	}
}

// updateSettings is projectSettingsUpdated: the settings row keeps its id
// and creation time; links that stay keep theirs (and their example), with
// the new sort order; links that left the list go.
func (l *sessionLoader) updateSettings(m events.Meta, e *events.SessionSettingsUpdated) error {
	s := l.advance(m, e.SessionID)
	if s == nil {
		return nil
	}
	style, generation, agent, err := settingsJSON(e.Settings)
	if err != nil {
		return err
	}
	st := &s.settings
	st.preset, st.style, st.generation, st.agent, st.updatedAt = e.Settings.StylePreset, style, generation, agent, m.RecordedAt
	links := make([]loadedLink, 0, len(e.Settings.FewShotLinks))
	for _, fl := range e.Settings.FewShotLinks {
		link := loadedLink{id: fl.LinkID, setting: e.Settings.SettingID, example: fl.ExampleID, order: int32(fl.SortOrder),
			createdAt: m.RecordedAt}
		if i := slices.IndexFunc(s.links, func(k loadedLink) bool { return k.id == fl.LinkID }); i >= 0 {
			link = s.links[i]
			link.order = int32(fl.SortOrder)
		}
		links = append(links, link)
	}
	s.links = links
	return nil
}

var (
	sessionModelColumns    = []string{"id", "session_id", "model_id", "model_name", "created_at"}
	sessionResponseColumns = []string{"id", "session_id", "session_model_id", "turn", "position", "model_name", "prompt_text",
		"response_text", "token_usage", "latency_ms", "is_primary", "generation_params", "error", "created_at"}
)

func (l *sessionLoader) Rows(final bool) ([]TableRows, error) {
	if !final && len(l.models)+len(l.responses) < l.batch {
		return nil, nil
	}
	out := []TableRows{
		{Table: "session_models", Columns: sessionModelColumns, Rows: structRows(l.models)},
		{Table: "session_responses", Columns: sessionResponseColumns, Rows: structRows(l.responses)},
	}
	l.models, l.responses = nil, nil
	if !final {
		return out, nil
	}
	type link struct {
		session int64
		loadedLink
	}
	var links []link
	for _, s := range l.started {
		for _, k := range s.links {
			links = append(links, link{s.id, k})
		}
	}
	sessions := rowsOf(l.started, func(s *loadedSession) []any {
		return []any{s.id, s.user, s.class, s.project, s.agent, s.knowledge, s.title, s.createdAt, s.updatedAt, s.version}
	})
	settings := rowsOf(l.started, func(s *loadedSession) []any {
		st := s.settings
		return []any{st.id, s.id, st.preset, st.style, st.generation, st.agent, st.createdAt, st.updatedAt}
	})
	linkRows := rowsOf(links, func(k link) []any {
		return []any{k.id, k.setting, k.session, k.example, k.order, k.createdAt}
	})
	sessionCounts := l.counts
	counts := rowsOf(l.userSeen, func(u int64) []any { return []any{u, sessionCounts[u]} })
	l.sessions, l.started, l.counts, l.userSeen = map[int64]*loadedSession{}, nil, map[int64]int64{}, nil
	l.byUser = map[int64][]*loadedSession{}
	return append(out,
		TableRows{Table: "practice_sessions", Columns: []string{"id", "user_id", "class_id", "project_id", "agent_id", "knowledge_ids",
			"title", "created_at", "updated_at", "version"}, Rows: sessions},
		TableRows{Table: "practice_session_counts", Columns: []string{"user_id", "total"}, Rows: counts},
		TableRows{Table: "session_settings", Columns: []string{"id", "session_id", "style_preset", "style_params", "generation_params",
			"agent_snapshot", "created_at", "updated_at"}, Rows: settings},
		TableRows{Table: "session_few_shot_links", Columns: []string{"id", "setting_id", "session_id", "example_id", "sort_order",
			"created_at"}, Rows: linkRows},
	), nil
}
