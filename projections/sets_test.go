package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/events"
	"lectern/pgtest"
)

func TestArrayLiteralsRoundTrip(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	texts := []string{"", "plain", `quote"d`, `back\slash`, `\"both\"`, "comma,and{braces}", "NULL", " spaced ", "ünïcødé"}
	for _, in := range [][]string{{}, texts} {
		var out []string
		if err := pool.QueryRow(ctx, `SELECT $1::text::text[]`, textArray(in)).Scan(&out); err != nil {
			t.Fatalf("%q: %v", textArray(in), err)
		}
		if diff := cmp.Diff(in, out); diff != "" {
			t.Errorf("text[] literal %q (-sent +read):\n%s", textArray(in), diff)
		}
	}
	for _, in := range [][]int64{{}, {7}, {-1, 0, 9223372036854775807}} {
		var out []int64
		if err := pool.QueryRow(ctx, `SELECT $1::text::bigint[]`, int64Array(in)).Scan(&out); err != nil {
			t.Fatalf("%q: %v", int64Array(in), err)
		}
		if diff := cmp.Diff(in, out); diff != "" {
			t.Errorf("bigint[] literal %q (-sent +read):\n%s", int64Array(in), diff)
		}
	}
}

// practiceStep is a set of events, each of a different stream, as a replay
// hands them to a handler in one call.
type practiceStep []struct {
	m events.Meta
	e events.Event
}

// Set handlers given several streams' events at once leave the tables as the
// same events applied one at a time do, guards included: events delivered
// again, or older than the row, change nothing. So does the sessions' loader
// (a replay's catch-up), handing rows over all at the end, or as it goes
// with the erasures applied again once it has handed all over, as a replay
// does: rows it handed over before an erasure are out of its reach (see
// crossStream).
func TestSetHandlersMatchOneAtATime(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	meta := func(stream string, version int64) events.Meta {
		return events.Meta{StreamID: stream, Version: version, RecordedAt: at.Add(time.Duration(version) * time.Minute)}
	}
	temp := 0.5
	settings := func(session int64, preset string, links ...events.FewShotLink) events.SessionSettings {
		return events.SessionSettings{SettingID: session * 10, StylePreset: preset, StyleParams: json.RawMessage(`{"tone": "warm"}`),
			GenerationParams: events.GenerationParams{Temperature: &temp}, FewShotLinks: links,
			AgentSnapshot: &events.AgentSnapshot{AgentID: 3, Name: "Tutor", SystemPrompt: "Be kind"}}
	}
	class := int64(4)
	title := "Fractions"
	started := func(session, user int64, links ...events.FewShotLink) events.Event {
		return events.SessionStarted{SessionID: session, UserID: user, ClassID: &class, KnowledgeIDs: []int64{session, 2},
			Title: &title, Settings: settings(session, "accurate", links...)}
	}
	turn := func(session int64, n int) events.Event {
		t := events.SessionTurnRecorded{SessionID: session, Turn: n, PromptText: fmt.Sprintf("Question %d?", n)}
		for m, name := range []string{"echo", "echo-reverse"} {
			r := events.TurnResult{SessionModelID: session*100 + int64(m), ModelID: int64(m + 1), ModelName: name,
				ResponseID: session*1000 + int64(n*10+m), ResponseText: "answer", LatencyMS: 12, IsPrimary: m == 0,
				TokenUsage: events.TokenUsage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}}
			if m == 1 && n == 2 {
				r.ResponseText, r.Error = "", &events.ModelError{Kind: "timeout", Message: "too slow"}
			}
			t.Results = append(t.Results, r)
		}
		return t
	}
	link := func(id, example int64, order int) events.FewShotLink {
		return events.FewShotLink{LinkID: id, ExampleID: example, SortOrder: order}
	}
	updated := func(session int64, preset string, links ...events.FewShotLink) events.Event {
		return events.SessionSettingsUpdated{SessionID: session, Settings: settings(session, preset, links...), Changed: []string{"style_preset"}}
	}
	step := func(pairs ...any) practiceStep {
		var s practiceStep
		for i := 0; i < len(pairs); i += 2 {
			s = append(s, struct {
				m events.Meta
				e events.Event
			}{pairs[i].(events.Meta), pairs[i+1].(events.Event)})
		}
		return s
	}
	a, b, c := "session-1", "session-2", "session-3"
	steps := []practiceStep{
		step(meta(a, 1), started(1, 7, link(11, 5, 0)), meta(b, 1), started(2, 7), meta(c, 1), started(3, 8)),
		step(meta(a, 2), turn(1, 1), meta(b, 2), turn(2, 1), meta(c, 2), updated(3, "creative", link(31, 5, 0), link(32, 6, 1))),
		// Delivered again: nothing changes, the count stays.
		step(meta(a, 1), started(1, 7, link(11, 5, 0)), meta(b, 2), turn(2, 1)),
		step(meta(a, 3), updated(1, "creative", link(12, 6, 0)), meta(b, 3), turn(2, 2), meta(c, 3), turn(3, 1)),
		// Older than the rows: nothing changes.
		step(meta(a, 2), turn(1, 1), meta(c, 2), updated(3, "accurate")),
		step(meta(a, 4), turn(1, 2), meta(c, 4), updated(3, "balanced", link(32, 6, 0))),
		// User 7 (sessions 1 and 2) is erased; again, it changes nothing more.
		step(meta("user-7", 2), events.UserErased{UserID: 7, Actor: 7}),
		step(meta("user-7", 2), events.UserErased{UserID: 7, Actor: 7}),
		// The sessions' versions did not move: their next events apply (at
		// their placeholders, as they are read once erased).
		step(meta(b, 4), erasedTurn(turn(2, 3))),
	}
	handlers := map[string]replayable{}
	for _, h := range SessionProjections()[0].Handlers {
		handlers[marshaler{}.Name(h.NewEvent())] = h.(replayable)
	}
	apply := func(pool *pgxpool.Pool, oneAtATime bool) map[string][]string {
		ctx := context.Background()
		for i, s := range steps {
			groups := map[string][]int{} // event type -> the step's events of it, in order
			var order []string
			for j, x := range s {
				name := x.e.EventType()
				if _, ok := groups[name]; !ok {
					order = append(order, name)
				}
				groups[name] = append(groups[name], j)
			}
			for _, name := range order {
				var ms []events.Meta
				var es []any
				for _, j := range groups[name] {
					ms = append(ms, s[j].m)
					es = append(es, pointerTo(s[j].e))
				}
				calls := [][2]int{{0, len(es)}}
				if oneAtATime {
					calls = nil
					for k := range es {
						calls = append(calls, [2]int{k, k + 1})
					}
				}
				for _, call := range calls {
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						return handlers[name].applyAll(ctx, tx, ms[call[0]:call[1]], es[call[0]:call[1]])
					})
					if err != nil {
						t.Fatalf("step %d, %s: %v", i, name, err)
					}
				}
			}
		}
		return tableRows(t, pool, SessionProjections()[0].Tables)
	}
	load := func(pool *pgxpool.Pool, batch int, reapply bool) map[string][]string {
		ctx := context.Background()
		l := newSessionLoader().(*sessionLoader)
		l.batch = batch
		var erasures []any
		write := func(final bool) {
			rows, err := l.Rows(final)
			if err != nil {
				t.Fatal(err)
			}
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return copyRows(ctx, tx, "", rows) }); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range steps {
			for _, x := range s {
				if err := l.Fold(x.m, pointerTo(x.e)); err != nil {
					t.Fatal(err)
				}
				if crossStream(x.e.EventType()) {
					erasures = append(erasures, pointerTo(x.e))
				}
			}
			write(false)
		}
		write(true)
		if !reapply {
			erasures = nil
		}
		for _, e := range erasures {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				return handlers[userErased].applyAll(ctx, tx, []events.Meta{{}}, []any{e})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		return tableRows(t, pool, SessionProjections()[0].Tables)
	}
	one := apply(pgtest.Fresh(t), true)
	set := apply(pgtest.Fresh(t), false)
	if diff := cmp.Diff(one, set); diff != "" {
		t.Fatalf("set-wise differs from one at a time (-one +set):\n%s", diff)
	}
	for _, c := range []struct {
		batch   int
		reapply bool
	}{{1, true}, {1000, false}} {
		if diff := cmp.Diff(one, load(pgtest.Fresh(t), c.batch, c.reapply)); diff != "" {
			t.Fatalf("the loader (rows handed over after %d, erasures applied again: %v) differs from the handlers (-handlers +loader):\n%s",
				c.batch, c.reapply, diff)
		}
	}
	checkSessionRows(t, one)
}

// An erasure changes rows of other streams than its own: it is applied
// alone, after every event the log has before it and before every event
// the log has after it.
func TestCrossStreamEventsKeepTheirPlace(t *testing.T) {
	item := func(typ, stream string) setItem {
		return setItem{typ: typ, stream: stream, m: events.Meta{EventID: typ + "@" + stream}}
	}
	items := []setItem{
		item("agent.created", "agent-1"), item("agent.created", "agent-2"), item("agent.updated", "agent-1"),
		item("user.erased", "user-7"),
		item("agent.updated", "agent-2"), item("agent.created", "agent-3"), item("user.erased", "user-8"), item("user.erased", "user-9"),
	}
	var got [][]string
	for _, set := range groupSets(items) {
		var ids []string
		for _, m := range set.ms {
			ids = append(ids, m.EventID)
		}
		got = append(got, ids)
	}
	want := [][]string{
		{"agent.created@agent-1", "agent.created@agent-2"}, {"agent.updated@agent-1"},
		{"user.erased@user-7"},
		{"agent.updated@agent-2"}, {"agent.created@agent-3"},
		{"user.erased@user-8"}, {"user.erased@user-9"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("sets (-want +got):\n%s", diff)
	}
}

// tableRows is the tables' rows, as JSON, sorted.
func tableRows(t *testing.T, pool *pgxpool.Pool, tables []string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	for _, table := range tables {
		rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t ORDER BY 1`, pgx.Identifier{table}.Sanitize()))
		if err != nil {
			t.Fatal(err)
		}
		if out[table], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkSessionRows checks that the rows are what the test's events say.
func checkSessionRows(t *testing.T, one map[string][]string) {
	t.Helper()
	if got := one["practice_session_counts"]; !cmp.Equal(got, []string{`{"total": 1, "user_id": 8}`, `{"total": 2, "user_id": 7}`}) {
		t.Errorf("session counts: %v", got)
	}
	if got := len(one["session_responses"]); got != 12 {
		t.Errorf("%d responses, want 12 (six turns of two models)", got)
	}
	// User 7's sessions (1 and 2) are erased, user 8's (3) not.
	for _, table := range []string{"practice_sessions", "session_settings", "session_responses"} {
		for _, row := range one[table] {
			var r struct {
				ID            int64
				SessionID     int64 `json:"session_id"`
				Title         *string
				AgentSnapshot json.RawMessage `json:"agent_snapshot"`
				Prompt        string          `json:"prompt_text"`
				Response      string          `json:"response_text"`
			}
			if err := json.Unmarshal([]byte(row), &r); err != nil {
				t.Fatal(err)
			}
			session := r.SessionID
			if table == "practice_sessions" {
				session = r.ID
			}
			anonymous := r.Title == nil && (r.AgentSnapshot == nil || string(r.AgentSnapshot) == "{}") &&
				(table != "session_responses" || r.Prompt == "[erased]" && r.Response == "[erased]")
			if anonymous != (session != 3) {
				t.Errorf("%s: row %s of session %d: anonymous %v, want %v (only user 7's sessions, 1 and 2)", table, row, session, anonymous, session != 3)
			}
		}
	}
	var presets []string
	for _, row := range one["session_settings"] {
		var s struct {
			SessionID   int64  `json:"session_id"`
			StylePreset string `json:"style_preset"`
		}
		if err := json.Unmarshal([]byte(row), &s); err != nil {
			t.Fatal(err)
		}
		presets = append(presets, fmt.Sprintf("%d:%s", s.SessionID, s.StylePreset))
	}
	if want := []string{"1:creative", "2:accurate", "3:balanced"}; !cmp.Equal(presets, want) {
		t.Errorf("settings presets %v, want %v", presets, want)
	}
	var links []string
	for _, row := range one["session_few_shot_links"] {
		var l struct {
			ID        int64 `json:"id"`
			SortOrder int   `json:"sort_order"`
		}
		if err := json.Unmarshal([]byte(row), &l); err != nil {
			t.Fatal(err)
		}
		links = append(links, fmt.Sprintf("%d@%d", l.ID, l.SortOrder))
	}
	if want := []string{"12@0", "32@0"}; !cmp.Equal(links, want) {
		t.Errorf("few-shot links %v, want %v (session 1 replaced 11 by 12: 11 must go)", links, want)
	}
}

// erasedTurn is e, a turn, as it reads once its user is erased.
func erasedTurn(e events.Event) events.Event {
	t := e.(events.SessionTurnRecorded)
	t.PromptText, t.Messages = "[erased]", []events.ChatMessage{}
	t.Results = slices.Clone(t.Results)
	for i := range t.Results {
		t.Results[i].ResponseText, t.Results[i].Error = "[erased]", nil
	}
	return t
}

// pointerTo returns a pointer to a copy of e's concrete value, as a
// handler's NewEvent would have decoded it.
func pointerTo(e events.Event) any {
	switch e := e.(type) {
	case events.SessionStarted:
		return &e
	case events.SessionTurnRecorded:
		return &e
	case events.SessionSettingsUpdated:
		return &e
	case events.UserErased:
		return &e
	}
	panic(fmt.Sprintf("no pointer for %T", e))
}
