package projections

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/personal"
	"lectern/pgtest"
)

// memoryKeys is a personal.KeySource in memory. An erased subject's key is
// refused, but kept: stale reads it as a replica's cache would, for a while.
type memoryKeys struct {
	mu     sync.Mutex
	keys   map[string]cipher.AEAD
	erased map[string]bool
	stale  bool
}

func newMemoryKeys() *memoryKeys {
	return &memoryKeys{keys: map[string]cipher.AEAD{}, erased: map[string]bool{}}
}

func (m *memoryKeys) Key(_ context.Context, subject string, create bool) (cipher.AEAD, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.erased[subject] && !m.stale {
		return nil, personal.ErrErased
	}
	if k, ok := m.keys[subject]; ok {
		return k, nil
	}
	if !create {
		return nil, personal.ErrErased
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	k, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	m.keys[subject] = k
	return k, nil
}

func (m *memoryKeys) erase(subject string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.erased[subject] = true
}

// staleCopy is a key source that still reads the subjects m erased.
func (m *memoryKeys) staleCopy() *memoryKeys {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &memoryKeys{keys: maps.Clone(m.keys), erased: maps.Clone(m.erased), stale: true}
}

// mergedGroups joins projections of one consumer group into one, as the
// service does (service.mergeByName).
func mergedGroups(ps ...Projection) []Projection {
	var out []Projection
	at := map[string]int{}
	for _, p := range ps {
		if i, ok := at[p.Name]; ok {
			out[i].Handlers = append(out[i].Handlers, p.Handlers...)
			out[i].Tables = append(out[i].Tables, p.Tables...)
			out[i].Loaders = append(out[i].Loaders, p.Loaders...)
			continue
		}
		at[p.Name] = len(out)
		out = append(out, Projection{Name: p.Name, Handlers: append([]GroupHandler(nil), p.Handlers...),
			Tables: append([]string(nil), p.Tables...), Loaders: append([]func() Loader(nil), p.Loaders...)})
	}
	return out
}

// readModels are every read model, in their consumer groups.
func readModels() []Projection {
	ps := []Projection{Users(), Agents()}
	ps = append(ps, OrganisationProjections()...)
	ps = append(ps, ClassroomProjections()...)
	ps = append(ps, PracticeProjections()...)
	ps = append(ps, SessionProjections()...)
	return mergedGroups(append(ps, KnowledgeProjections()...)...)
}

// Markers: every personal field of user 7's events holds erased7, of user
// 8's kept8, of a partner without a user (a subject of its own) kept9.
const (
	erased7 = "Zq7x"
	kept8   = "Zq8x"
	kept9   = "Zq9x"
)

// appended is an event to append to a stream, and who acts.
type appended struct {
	stream string
	actor  int64
	e      events.Event
}

// personalHistory is a history of user 7 and user 8 (and an admin, 1, and a
// partner without an account) with each personal field of every type that
// has some set to the user's marker: as the service appends them, with the
// acting user in the metadata (the subject of some of them).
func personalHistory(mark func(user int64) string) []appended {
	p := func(s string) *string { return &s }
	var out []appended
	add := func(stream string, actor int64, e events.Event) { out = append(out, appended{stream, actor, e}) }
	add("user-1", 1, events.UserSignedUp{UserID: 1, Email: "admin@example.com", Name: "Admin", Roles: []string{"admin"}})
	add("org-1", 1, events.OrganisationCreated{OrgID: 1, Name: "Riverside", CreatedBy: 1})
	add("partner-9", 1, events.PartnerCreated{PartnerID: 9, OrgID: 1, FullName: kept9, Email: kept9 + "@example.com",
		Phone: p(kept9), Role: "partner", IsActive: true})
	for _, u := range []int64{7, 8} {
		m := mark(u)
		id := func(n int64) int64 { return u*100 + n }
		stream := func(category string, n int64) string { return eventstore.StreamName(category, id(n)) }
		snapshot := &events.AgentSnapshot{AgentID: id(1), Name: m + " agent", SystemPrompt: m + " prompt", RoleDescription: p(m + " role")}
		settings := events.SessionSettings{SettingID: id(1), StylePreset: "accurate", StyleParams: json.RawMessage(`{"tone":"` + m + ` warm"}`),
			AgentSnapshot: snapshot, FewShotLinks: []events.FewShotLink{{LinkID: id(1), ExampleID: id(1), SortOrder: 0}}}
		add(eventstore.StreamName("user", u), u, events.UserSignedUp{UserID: u, Email: m + "@example.com", Name: m + " Name", Roles: []string{"user"}})
		add(stream("agent", 1), u, events.AgentCreated{AgentID: id(1), OwnerID: u, Name: m + " agent", SystemPrompt: m + " prompt",
			RoleDescription: p(m + " role"), TemplateSource: p(m + " template"), IsActive: true})
		add(stream("agent", 1), u, events.AgentUpdated{AgentID: id(1), Name: m + " agent 2", SystemPrompt: m + " prompt 2",
			RoleDescription: p(m + " role 2"), TemplateSource: p(m + " template 2"), IsActive: true, Changed: []string{"name"}})
		add(stream("agent", 2), u, events.AgentCreated{AgentID: id(2), OwnerID: u, Name: m + " bare", SystemPrompt: m + " bare prompt"})
		add(stream("fewshot", 1), u, events.FewShotCreated{ExampleID: id(1), UserID: u, Title: p(m + " title"), InputText: m + " in",
			OutputText: m + " out", Meta: json.RawMessage(`{"note":"` + m + `"}`), IsActive: true})
		add(stream("fewshot", 1), u, events.FewShotUpdated{ExampleID: id(1), Title: p(m + " title 2"), InputText: m + " in 2",
			OutputText: m + " out 2", Meta: json.RawMessage(`{"note":"` + m + ` 2"}`), IsActive: true, Changed: []string{"title"}})
		add(stream("fewshot", 2), u, events.FewShotCreated{ExampleID: id(2), UserID: u, InputText: m + " in", OutputText: m + " out"})
		add(stream("partner", 1), 1, events.PartnerCreated{PartnerID: id(1), OrgID: 1, UserID: &u, FullName: m + " Name",
			Email: m + "@example.com", Phone: p(m + " phone"), Role: "partner", IsActive: true})
		add(stream("promotion", 1), u, events.PromotionRequested{RequestID: id(1), UserID: u, Name: m + " Name", Email: m + "@example.com",
			OrgName: m + " School", TargetRole: "partner", EduCategory: p(m + " category")})
		add(stream("promotion", 1), 1, events.PromotionRejected{RequestID: id(1), UserID: u, ReviewedBy: 1, Reason: p(m + " reason")})
		add(stream("promotion", 2), u, events.PromotionRequested{RequestID: id(2), UserID: u, Name: m + " Name", Email: m + "@example.com",
			OrgName: m + " School", TargetRole: "partner"})
		add(stream("promotion", 2), 1, events.PromotionApproved{RequestID: id(2), UserID: u, ReviewedBy: 1, OrgID: 1, PartnerID: id(1)})
		add(stream("session", 1), u, events.SessionStarted{SessionID: id(1), UserID: u, AgentID: &snapshot.AgentID,
			KnowledgeIDs: []int64{id(1)}, Title: p(m + " title"), Settings: settings})
		for turn := range 3 {
			add(stream("session", 1), u, events.SessionTurnRecorded{SessionID: id(1), Turn: turn + 1, PromptText: fmt.Sprintf("%s question %d", m, turn),
				Messages: []events.ChatMessage{{Role: "system", Content: m + " prompt"}, {Role: "user", Content: m + " question"}},
				Results: []events.TurnResult{
					{SessionModelID: id(1), ModelID: 1, ModelName: "echo", ResponseID: id(int64(10 + 2*turn)), ResponseText: m + " answer",
						IsPrimary: true},
					{SessionModelID: id(2), ModelID: 2, ModelName: "echo-reverse", ResponseID: id(int64(11 + 2*turn)),
						Error: &events.ModelError{Kind: "timeout", Message: m + " was too slow"}},
				}})
		}
		settings.AgentSnapshot = &events.AgentSnapshot{AgentID: id(1), Name: m + " agent 2", SystemPrompt: m + " prompt 2"}
		settings.StylePreset, settings.StyleParams = "creative", json.RawMessage(`{"tone":"`+m+` bright"}`)
		add(stream("session", 1), u, events.SessionSettingsUpdated{SessionID: id(1), Settings: settings, Changed: []string{"style_preset"}})
		add(stream("session", 2), u, events.SessionStarted{SessionID: id(2), UserID: u,
			Settings: events.SessionSettings{SettingID: id(2), StylePreset: "balanced"}})
		add(stream("knowledge", 1), u, events.KnowledgeDocumentUploaded{KnowledgeID: id(1), UserID: u, Title: m + " notes.pdf",
			ContentType: "application/pdf", Size: 10, ContentHash: "ab", ContentSize: 5,
			Settings: events.KnowledgeSearchSettings{TopK: 5, MinScore: "0", ScoreType: "cosine", RerankerTopN: 3}})
	}
	return out
}

// appendAll appends each event to its stream through store, as the service
// does, and returns the position of the last.
func appendAll(t *testing.T, store eventstore.Store, evs []appended) eventstore.Position {
	t.Helper()
	var last eventstore.Position
	for _, ev := range evs {
		data, err := json.Marshal(ev.e)
		if err != nil {
			t.Fatal(err)
		}
		res, err := store.Append(context.Background(), ev.stream, eventstore.Any, []eventstore.EventData{{ID: uuid.New(),
			Type: ev.e.EventType(), SchemaVersion: ev.e.SchemaVersion(), Data: data, Metadata: eventstore.Metadata{UserID: ev.actor},
			RecordedAt: time.Now()}})
		if err != nil {
			t.Fatalf("append %s to %s: %v", ev.e.EventType(), ev.stream, err)
		}
		last = res.Position
	}
	return last
}

// holding is the rows of tables that hold s, by table.
func holding(tables map[string][]string, s string, want bool) map[string][]string {
	out := map[string][]string{}
	for table, rows := range tables {
		for _, row := range rows {
			if strings.Contains(row, s) == want {
				out[table] = append(out[table], row)
			}
		}
	}
	return out
}

// A user's erasure leaves every read model as a replay of the log (which
// reads their personal fields as placeholders) builds it, column for
// column: none of their personal data is left, nobody else's row changes.
// So does a replay that read their events in clear (a key still cached
// while the erasure happened), whether the loaders handed rows over early or
// not.
func TestErasureLeavesWhatAReplayBuilds(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	keys := newMemoryKeys()
	raw := postgres.New(pool, nil)
	store := personal.NewStore(raw, personal.NewSealer(keys))
	registry := func(keys personal.KeySource) *events.Registry {
		return personal.NewSealer(keys).Opening(events.NewRegistry())
	}
	groups := readModels()
	var tables, names []string
	for _, g := range groups {
		tables, names = append(tables, g.Tables...), append(names, g.Name)
		// Its projections' handlers of user.erased combine into one, so the
		// group is still applied in live batches.
		if !batchable(g) {
			t.Errorf("consumer group %s is not batched", g.Name)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	l := startListener(t, pool)
	r := NewRunner(pool, l, registry(keys), esdbQuiet, groups...)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = r.Run(runCtx) }()
	stopRunner := func() { cancel(); <-ran }
	t.Cleanup(stopRunner)
	wait := func(pos eventstore.Position) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := l.WaitFor(wctx, pos, names...); err != nil {
			t.Fatalf("the read models did not reach %v: %v", pos, err)
		}
	}

	wait(appendAll(t, store, personalHistory(func(u int64) string { return map[int64]string{7: erased7, 8: kept8}[u] })))
	before := tableRows(t, pool, tables)
	for _, table := range []string{"users", "agents", "few_shot_examples", "partners", "promotion_requests", "practice_sessions",
		"session_settings", "session_responses", "knowledge_documents"} {
		if len(holding(map[string][]string{table: before[table]}, erased7, true)) == 0 {
			t.Fatalf("before the erasure no row of %s holds user 7's marker: the test proves nothing of it", table)
		}
	}

	keys.erase(personal.UserSubject(7))
	wait(appendAll(t, store, []appended{{"user-7", 7, events.UserErased{UserID: 7, Actor: 7}}}))
	erased := tableRows(t, pool, tables)

	if left := holding(erased, erased7, true); len(left) > 0 {
		t.Fatalf("user 7's personal data is left after the erasure: %v", left)
	}
	// Rows without user 7's data (all of user 8's, the other partner's, the
	// counts, the models) are as they were.
	untouched, after := holding(before, erased7, false), holding(erased, erased7, false)
	for table, rows := range untouched {
		for _, row := range rows {
			if !slices.Contains(after[table], row) {
				t.Errorf("%s: row %s changed with user 7's erasure", table, row)
			}
		}
	}
	if got, want := rowCount(holding(erased, kept8, true)), rowCount(holding(before, kept8, true)); got != want {
		t.Errorf("%d rows hold user 8's data after user 7's erasure, %d before", got, want)
	}

	// Later events of others, so that a replay's loaders may hand over
	// after the erasure.
	wait(appendAll(t, store, []appended{
		{"agent-803", 8, events.AgentCreated{AgentID: 803, OwnerID: 8, Name: kept8 + " later", SystemPrompt: "p"}},
		{"fewshot-803", 8, events.FewShotCreated{ExampleID: 803, UserID: 8, InputText: kept8, OutputText: kept8}},
		{"session-803", 8, events.SessionStarted{SessionID: 803, UserID: 8, Settings: events.SessionSettings{SettingID: 803, StylePreset: "balanced"}}},
		{"session-803", 8, events.SessionTurnRecorded{SessionID: 803, Turn: 1, PromptText: kept8, Results: []events.TurnResult{
			{SessionModelID: 803, ModelID: 1, ModelName: "echo", ResponseID: 803, ResponseText: kept8, IsPrimary: true},
			{SessionModelID: 804, ModelID: 2, ModelName: "echo-reverse", ResponseID: 804, ResponseText: kept8}}}},
	}))
	live := tableRows(t, pool, tables)
	stopRunner() // the replays swap the tables of stopped consumers

	smallSessionBatches := func(ps []Projection) []Projection {
		out := make([]Projection, len(ps))
		for i, p := range ps {
			p.Loaders = append([]func() Loader(nil), p.Loaders...)
			for j, newLoader := range p.Loaders {
				if _, ok := newLoader().(*sessionLoader); ok {
					p.Loaders[j] = func() Loader {
						l := newSessionLoader().(*sessionLoader)
						l.batch = 1 // responses handed over as they come: before the erasure
						return l
					}
				}
			}
			out[i] = p
		}
		return out
	}
	for _, c := range []struct {
		name        string
		stale       bool
		pages, load int
	}{
		{"replay", false, 0, 0},
		{"replay, loaders handing over early", false, 1, 1},
		{"replay reading user 7 in clear", true, 0, 0},
		{"replay reading user 7 in clear, loaders handing over before the erasure", true, 1, 1},
		// The accounts' loaders hold 7 rows until agent-803, the practice
		// ones at most 11 until session-803's turn: they hand over after the
		// erasure.
		{"replay reading user 7 in clear, loaders handing over after the erasure (accounts)", true, 1, 7},
		{"replay reading user 7 in clear, loaders handing over after the erasure (practice)", true, 1, 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			var source personal.KeySource = keys
			if c.stale {
				source = keys.staleCopy()
			}
			rep := &Replayer{Pool: pool, Store: raw, Registry: registry(source), Checkpoints: PostgresCheckpoints{},
				PageSize: c.pages, LoadLimit: c.load}
			if _, err := rep.Replay(ctx, smallSessionBatches(groups)...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(live, tableRows(t, pool, tables)); diff != "" {
				t.Fatalf("the replay differs from the live read models (-live +replay):\n%s", diff)
			}
		})
	}
}

func rowCount(tables map[string][]string) int {
	n := 0
	for _, rows := range tables {
		n += len(rows)
	}
	return n
}
