package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/testlog"
)

// mergedByName joins projections that share a consumer group, as the
// service runs them.
func mergedByName(ps ...Projection) []Projection {
	var out []Projection
	at := map[string]int{}
	for _, p := range ps {
		if i, ok := at[p.Name]; ok {
			out[i].Handlers = append(out[i].Handlers, p.Handlers...)
			out[i].Tables = append(out[i].Tables, p.Tables...)
			continue
		}
		at[p.Name] = len(out)
		out = append(out, Projection{Name: p.Name, Handlers: p.Handlers, Tables: p.Tables})
	}
	return out
}

// conformanceLog is a log of users, agents, few-shot examples and practice
// sessions, their streams interleaved, with an erasure part-way.
func conformanceLog() []logged {
	temp := 0.4
	settings := func(session int64, preset string, links ...events.FewShotLink) events.SessionSettings {
		return events.SessionSettings{SettingID: session * 10, StylePreset: preset, StyleParams: json.RawMessage(`{"tone": "warm"}`),
			GenerationParams: events.GenerationParams{Temperature: &temp}, FewShotLinks: links,
			AgentSnapshot: &events.AgentSnapshot{AgentID: session, Name: "Tutor", SystemPrompt: "Be kind"}}
	}
	turn := func(session int64, n int) events.SessionTurnRecorded {
		t := events.SessionTurnRecorded{SessionID: session, Turn: n, PromptText: fmt.Sprintf("Question %d?", n),
			Messages: []events.ChatMessage{{Role: "user", Content: "Question?"}}}
		for m, name := range []string{"echo", "echo-reverse"} {
			t.Results = append(t.Results, events.TurnResult{SessionModelID: session*100 + int64(m), ModelID: int64(m + 1),
				ModelName: name, ResponseID: session*1000 + int64(n*10+m), ResponseText: "answer", LatencyMS: 12, IsPrimary: m == 0,
				TokenUsage: events.TokenUsage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}})
		}
		return t
	}
	role, title := "Explains", "Sums"
	var log []logged
	versions := map[string]int64{}
	add := func(stream string, e events.Event) {
		versions[stream]++
		log = append(log, logged{at(stream, versions[stream]), e})
	}
	for u := int64(1); u <= 3; u++ {
		add(fmt.Sprintf("user-%d", u), events.UserSignedUp{UserID: u, Email: fmt.Sprintf("u%d@example.com", u), Name: "User",
			Roles: []string{"user"}})
		add(fmt.Sprintf("agent-%d", u), events.AgentCreated{AgentID: u, OwnerID: u, Name: "Tutor", SystemPrompt: "Be kind",
			RoleDescription: &role, IsActive: true})
		add(fmt.Sprintf("fewshot-%d", u), events.FewShotCreated{ExampleID: u, UserID: u, Title: &title, InputText: "2+2?",
			OutputText: "4", Meta: json.RawMessage(`{"level": 1}`), IsActive: true})
		add(fmt.Sprintf("session-%d", u), events.SessionStarted{SessionID: u, UserID: u, KnowledgeIDs: []int64{},
			Settings: settings(u, "accurate", events.FewShotLink{LinkID: u * 10, ExampleID: u})})
	}
	for u := int64(1); u <= 3; u++ {
		add(fmt.Sprintf("session-%d", u), turn(u, 1))
		add(fmt.Sprintf("user-%d", u), events.UserRoleGranted{UserID: u, Role: "partner"})
		add(fmt.Sprintf("agent-%d", u), events.AgentUpdated{AgentID: u, Name: "Patient tutor", SystemPrompt: "Be kind",
			IsActive: u != 2, Changed: []string{"name", "is_active"}})
		add(fmt.Sprintf("session-%d", u), events.SessionSettingsUpdated{SessionID: u, Settings: settings(u, "creative", events.FewShotLink{LinkID: u*10 + 1, ExampleID: u}),
			Changed: []string{"style_preset", "few_shot_example_ids"}})
		add(fmt.Sprintf("fewshot-%d", u), events.FewShotUpdated{ExampleID: u, InputText: "2+2?", OutputText: "Four",
			Meta: json.RawMessage(`{}`), IsActive: true, Changed: []string{"output_text", "meta"}})
	}
	add("user-2", events.UserErased{UserID: 2, Actor: 1})
	for _, u := range []int64{1, 3} {
		add(fmt.Sprintf("session-%d", u), turn(u, 2))
		add(fmt.Sprintf("agent-%d", u), events.AgentUpdated{AgentID: u, Name: "Brief tutor", SystemPrompt: "Be brief",
			IsActive: true, Changed: []string{"name", "system_prompt"}})
	}
	return log
}

// appendLog appends evs to pool's log, in their order, each with an id and
// a time of its own that do not depend on the database, and returns the
// last position once a poll can read it.
func appendLog(t *testing.T, pool *pgxpool.Pool, evs []logged) eventstore.Position {
	t.Helper()
	ctx := context.Background()
	store := postgres.New(pool, nil)
	defer store.Close()
	var last eventstore.Position
	for i, ev := range evs {
		data, err := json.Marshal(ev.e)
		if err != nil {
			t.Fatal(err)
		}
		res, err := store.Append(ctx, ev.m.StreamID, eventstore.Exact(ev.m.Version-1), []eventstore.EventData{{
			ID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(i))), Type: ev.e.EventType(), SchemaVersion: ev.e.SchemaVersion(),
			Data: data, RecordedAt: ev.m.RecordedAt, Metadata: eventstore.Metadata{UserID: 1},
		}})
		if err != nil {
			t.Fatalf("append %s: %v", ev.e.EventType(), err)
		}
		last = res.Position
	}
	awaitPollable(t, pool, last)
	return last
}

// awaitPollable waits until a poll can read the event at pos: no
// transaction that may still commit below it is running.
func awaitPollable(t *testing.T, pool *pgxpool.Pool, pos eventstore.Position) {
	t.Helper()
	poll.Must(t, 10*time.Second, "the appends visible to a poll", func() bool {
		var visible bool
		err := pool.QueryRow(context.Background(), `SELECT $1::text::xid8 < pg_snapshot_xmin(pg_current_snapshot())`,
			strconv.FormatUint(pos.Commit, 10)).Scan(&visible)
		return err == nil && visible
	})
}

// The live batches leave the read models as the same log applied one event
// at a time (Runner.OneAtATime) does: users, agents, few-shot examples and
// practice sessions, their streams interleaved, an erasure part-way.
func TestLiveBatchesMatchOneAtATime(t *testing.T) {
	checkLiveBatches(t, mergedByName(Users(), Agents(), FewShotExamples(), SessionProjections()[0]), conformanceLog())
}

// checkLiveBatches applies evs with ps's projections twice, each time on a
// fresh database: one event at a time (Runner.OneAtATime), then in live
// batches. It fails unless every projection is batched live, no batch fell
// back to careful polls, and every one of ps's tables ends the same both
// ways and not empty; it returns the tables' rows (see tableRows). The log
// is written before the projections start, so that their first poll reads
// it all as one batch (it must hold at most pollBatch events).
func checkLiveBatches(t *testing.T, ps []Projection, evs []logged) map[string][]string {
	t.Helper()
	if len(evs) > pollBatch {
		t.Fatalf("a log of %d events is read in more than one poll of %d", len(evs), pollBatch)
	}
	var tables []string
	for _, p := range ps {
		if !batchable(p) {
			t.Fatalf("projection %s is not batched live: the comparison proves nothing", p.Name)
		}
		tables = append(tables, p.Tables...)
	}
	apply := func(oneAtATime bool) (map[string][]string, string) {
		pool := pgtest.Fresh(t)
		last := appendLog(t, pool, evs)
		logs := &testlog.Buffer{}
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ctx, cancel := context.WithCancel(context.Background())
		l := NewListener(pool, logger)
		r := NewRunner(pool, l, events.NewRegistry(), logger, ps...)
		r.OneAtATime = oneAtATime
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); l.Run(ctx) }()
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
		defer func() { cancel(); wg.Wait() }()
		for _, p := range ps {
			wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
			err := l.WaitFor(wctx, last, p.Name)
			wcancel()
			if err != nil {
				t.Fatalf("projection %s (one at a time: %v) did not reach %v: %v\n%s", p.Name, oneAtATime, last, err, logs)
			}
		}
		return tableRows(t, pool, tables), logs.String()
	}
	one, _ := apply(true)
	batched, logs := apply(false)
	if strings.Contains(logs, "projection batch failed") {
		t.Fatalf("a live batch failed, and its events were applied one at a time: the comparison proves nothing\n%s", logs)
	}
	if diff := cmp.Diff(one, batched); diff != "" {
		t.Fatalf("live batches differ from one event at a time (-one +batched):\n%s", diff)
	}
	for table, rows := range one {
		if len(rows) == 0 {
			t.Fatalf("the log left %s empty: the comparison proves nothing", table)
		}
	}
	return one
}
