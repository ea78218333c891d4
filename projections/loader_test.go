package projections

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/pgtest"
)

// logged is an event as the log holds it.
type logged struct {
	m events.Meta
	e events.Event
}

// stored is an event whose payload is not its Go value's JSON (a key an
// older shape did not have, say).
type stored struct {
	events.Event
	payload string
}

// checkLoader applies evs, in log order, through p's handlers (one at a time,
// as a live projection's careful poll does), through the same handlers
// set-wise (as a live batch and a replay do: groupSets, applySets), and
// through p's loaders (as a replay's catch-up does), and fails unless p's
// tables end the same each way.
func checkLoader(t *testing.T, p Projection, evs []logged) {
	t.Helper()
	ctx := context.Background()
	handlers := map[string]replayable{}
	for _, h := range p.Handlers {
		handlers[marshaler{}.Name(h.NewEvent())] = h.(replayable)
	}
	decoded := func(ev logged) any { // a pointer, as the replay's decoding gives it
		raw, err := json.Marshal(ev.e)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := ev.e.(stored); ok {
			raw = []byte(s.payload)
		}
		ptr := handlers[ev.e.EventType()].NewEvent()
		if err := json.Unmarshal(raw, ptr); err != nil {
			t.Fatal(err)
		}
		return ptr
	}
	live := pgtest.Fresh(t)
	for _, ev := range evs {
		err := pgx.BeginFunc(ctx, live, func(tx pgx.Tx) error {
			return handlers[ev.e.EventType()].applyAll(ctx, tx, []events.Meta{ev.m}, []any{decoded(ev)})
		})
		if err != nil {
			t.Fatalf("%s: %v", ev.e.EventType(), err)
		}
	}
	want := tableRows(t, live, p.Tables)

	setWise := pgtest.Fresh(t)
	items := make([]setItem, len(evs))
	for i, ev := range evs {
		typ := ev.e.EventType()
		items[i] = setItem{h: handlers[typ], typ: typ, stream: ev.m.StreamID, m: ev.m, e: decoded(ev)}
	}
	sets := groupSets(items)
	if len(sets) == len(items) {
		t.Fatalf("the events make %d sets of one: set-wise is one at a time, the comparison proves nothing", len(sets))
	}
	err := pgx.BeginFunc(ctx, setWise, func(tx pgx.Tx) error {
		ptx := newPipelineTx(tx, defaultPipeline)
		if _, err := applySets(ctx, ptx, sets); err != nil {
			return err
		}
		return ptx.flush(ctx)
	})
	if err != nil {
		t.Fatalf("set-wise: %v", err)
	}
	if diff := cmp.Diff(want, tableRows(t, setWise, p.Tables)); diff != "" {
		t.Fatalf("the handlers set-wise differ from one at a time (-one +set):\n%s", diff)
	}

	loaded := pgtest.Fresh(t)
	for _, newLoader := range p.Loaders {
		l := newLoader()
		for _, ev := range evs {
			if err := l.Fold(ev.m, decoded(ev)); err != nil {
				t.Fatal(err)
			}
		}
		tables, err := l.Rows(true)
		if err != nil {
			t.Fatal(err)
		}
		if err := pgx.BeginFunc(ctx, loaded, func(tx pgx.Tx) error { return copyRows(ctx, tx, "", tables) }); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, tableRows(t, loaded, p.Tables)); diff != "" {
		t.Fatalf("the loader differs from the handlers (-handlers +loader):\n%s", diff)
	}
	for table, rows := range want {
		if len(rows) == 0 {
			t.Fatalf("the events left %s empty: the comparison proves nothing", table)
		}
	}
}

// at is a log event's metadata: its stream, version and a time of its own.
func at(stream string, version int64) events.Meta {
	return events.Meta{StreamID: stream, Version: version,
		RecordedAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(len(stream)*100+int(version)) * time.Minute)}
}

// The loaders of users, agents and few-shot examples, and their handlers
// given events set-wise (OnSet), leave their tables as the handlers one
// event at a time do: events delivered again, or older than the row, change
// nothing; a row an event changes that was never created stays absent; an
// erasure anonymises the user's rows and moves only the user's own.
func TestRowLoadersMatchTheirHandlers(t *testing.T) {
	role, template, title := "Explains", "tutor-v1", "Sums"
	t.Run("users", func(t *testing.T) {
		checkLoader(t, Users(), []logged{
			{at("user-1", 1), events.UserSignedUp{UserID: 1, Email: "a@example.com", Name: "A", Roles: []string{"user"}}},
			{at("user-2", 1), events.UserSignedUp{UserID: 2, Email: "b@example.com", Name: "B"}},
			{at("user-1", 2), events.UserRoleGranted{UserID: 1, Role: "partner"}},
			{at("user-1", 2), events.UserRoleGranted{UserID: 1, Role: "admin"}}, // again: nothing
			{at("user-1", 3), events.UserRoleGranted{UserID: 1, Role: "partner"}},
			{at("user-2", 2), events.UserRoleGranted{UserID: 2, Role: "admin"}},
			{at("user-1", 1), events.UserSignedUp{UserID: 1, Email: "a@example.com", Name: "Again"}},
			{at("user-3", 2), events.UserRoleGranted{UserID: 3, Role: "admin"}}, // no such user
			{at("user-4", 1), events.UserSignedUp{UserID: 4, Email: "d@example.com", Name: "D", Roles: []string{"user"}}},
			{at("user-1", 4), events.UserErased{UserID: 1, Actor: 1}},
			{at("user-1", 4), events.UserErased{UserID: 1, Actor: 1}}, // again: nothing
			{at("user-2", 2), events.UserErased{UserID: 2, Actor: 1}}, // not newer than the row: nothing
			{at("user-4", 2), events.UserErased{UserID: 4, Actor: 1}},
			{at("user-3", 3), events.UserErased{UserID: 3, Actor: 1}}, // no such user
		})
	})
	t.Run("agents", func(t *testing.T) {
		checkLoader(t, Agents(), []logged{
			{at("agent-1", 1), events.AgentCreated{AgentID: 1, OwnerID: 7, Name: "Tutor", SystemPrompt: "Be kind", IsActive: true}},
			{at("agent-2", 1), events.AgentCreated{AgentID: 2, OwnerID: 7, Name: "Coach", SystemPrompt: "Be brief", RoleDescription: &role}},
			{at("agent-1", 2), events.AgentUpdated{AgentID: 1, Name: "Patient tutor", SystemPrompt: "Be kind", TemplateSource: &template,
				IsActive: false, Changed: []string{"name", "is_active"}}},
			{at("agent-1", 2), events.AgentUpdated{AgentID: 1, Name: "Stale", SystemPrompt: "x"}}, // again: nothing
			{at("agent-9", 2), events.AgentUpdated{AgentID: 9, Name: "Nobody", SystemPrompt: "x"}},
			{at("agent-3", 1), events.AgentCreated{AgentID: 3, OwnerID: 8, Name: "Other", SystemPrompt: "Mine", RoleDescription: &role}},
			{at("user-7", 3), events.UserErased{UserID: 7, Actor: 7}},
			{at("user-7", 3), events.UserErased{UserID: 7, Actor: 7}}, // again: nothing more
			// The agents' versions did not move: their next events apply.
			{at("agent-2", 2), events.AgentUpdated{AgentID: 2, Name: "[erased]", SystemPrompt: "[erased]", IsActive: true,
				Changed: []string{"is_active"}}},
			{at("user-5", 2), events.UserErased{UserID: 5, Actor: 1}}, // no agents
		})
	})
	t.Run("few-shot examples", func(t *testing.T) {
		checkLoader(t, FewShotExamples(), []logged{
			{at("fewshot-1", 1), events.FewShotCreated{ExampleID: 1, UserID: 7, InputText: "2+2?", OutputText: "4", IsActive: true}},
			{at("fewshot-2", 1), events.FewShotCreated{ExampleID: 2, UserID: 7, Title: &title, InputText: "1+1?", OutputText: "2",
				Meta: json.RawMessage(`{"level": 1}`)}},
			{at("fewshot-1", 2), events.FewShotUpdated{ExampleID: 1, InputText: "2+2?", OutputText: "Four", Meta: json.RawMessage(`{"b": [1]}`),
				IsActive: true, Changed: []string{"output_text", "meta"}}},
			{at("fewshot-2", 3), events.FewShotUpdated{ExampleID: 2, Title: &title, InputText: "1+1?", OutputText: "Two"}},
			{at("fewshot-2", 2), events.FewShotUpdated{ExampleID: 2, InputText: "old", OutputText: "old"}}, // older: nothing
			{at("fewshot-3", 1), stored{events.FewShotCreated{}, `{"example_id": 3, "user_id": 8, "input_text": "no meta", "output_text": "x"}`}},
			{at("user-7", 2), events.UserErased{UserID: 7, Actor: 7}},
			// The examples' versions did not move: their next events apply.
			{at("fewshot-1", 3), events.FewShotUpdated{ExampleID: 1, InputText: "[erased]", OutputText: "[erased]",
				Meta: json.RawMessage(`{}`), Changed: []string{"is_active"}}},
			{at("user-7", 2), events.UserErased{UserID: 7, Actor: 7}}, // again: nothing more
		})
	})
}

// A loader must fold every event type of its projection's handlers, and
// write its tables: a type left to a handler would be applied to tables that
// hold none of the loader's rows yet.
func TestWithLoaderRefusesAPartialLoader(t *testing.T) {
	users := Users()
	users.Loaders = nil
	agents := Agents()
	for name, build := range map[string]func(){
		"a handler type it does not fold": func() {
			p := users
			p.Handlers = slices.Concat(users.Handlers, agents.Handlers)
			withLoader(p, newUsersLoader)
		},
		"other tables": func() {
			p := users
			p.Tables = []string{"users", "agents"}
			withLoader(p, newUsersLoader)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: withLoader accepted it", name)
				}
			}()
			build()
		}()
	}
	withLoader(users, newUsersLoader) // and the real one is accepted
}
