package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/esdbfake"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/projections"
	"lectern/service"
)

// client talks to one running service and remembers the furthest event
// position its writes reported.
type client struct {
	t    *testing.T
	url  string
	mu   sync.Mutex
	last eventstore.Position
}

func (c *client) call(method, path, token string, body any, want int) map[string]any {
	c.t.Helper()
	out, err := c.try(method, path, token, body, want)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// try is call for goroutines other than the test's.
func (c *client) try(method, path, token string, body any, want int) (map[string]any, error) {
	raw, _ := json.Marshal(body)
	status, header, data, err := send(method, c.url+path, token, raw)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, fmt.Errorf("%s %s: %d %s, want %d", method, path, status, data, want)
	}
	if p, err := eventstore.ParsePosition(header.Get("X-Event-Position")); err == nil {
		c.mu.Lock()
		if p.Compare(c.last) > 0 {
			c.last = p
		}
		c.mu.Unlock()
	}
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out, nil
}

// id is a response's id field: "id" unless the resource names it otherwise.
func id(v map[string]any, key ...string) int64 {
	k := "id"
	if len(key) > 0 {
		k = key[0]
	}
	n, _ := v[k].(float64)
	return int64(n)
}

type replayEnv struct {
	pool *pgxpool.Pool
	svc  *service.Service
	cfg  service.Config
	c    *client
}

func startReplayEnv(t *testing.T, store string) *replayEnv {
	t.Helper()
	return startReplayEnvWith(t, store, nil)
}

// startReplayEnvWith is startReplayEnv with a data key (nil: events in clear).
func startReplayEnvWith(t *testing.T, store string, dataKey []byte) *replayEnv {
	t.Helper()
	cfg := service.Config{Pool: pgtest.Fresh(t),
		AdminEmails: []string{"admin@example.com"}, AddressLimit: 100000,
		ConsistencyWait: pgtest.ConsistencyWait, DataKey: dataKey}
	if store == "esdbfake" {
		cfg.EventStoreURL = esdbfake.Start(t)
	}
	svc, url, _ := serve(t, cfg)
	return &replayEnv{pool: cfg.Pool, svc: svc, cfg: cfg, c: &client{t: t, url: url}}
}

func (e *replayEnv) user(email string, admin bool) (int64, string) {
	e.c.t.Helper()
	u, _, err := e.svc.Identity.CreateUser(context.Background(), email, "correct horse", "User "+email, admin)
	if err != nil {
		e.c.t.Fatal(err)
	}
	tokens := e.c.call("POST", "/user/login", "", map[string]any{"email": email, "password": "correct horse"}, 200)
	return u.ID, tokens["access_token"].(string)
}

// workload touches every replayable read model: accounts, agents,
// organisations, partners, promotion requests, courses, classes, invite
// codes, enrollments, few-shot examples, sessions and their turns and
// settings, knowledge documents and their settings.
func (e *replayEnv) workload(round int) {
	c := e.c
	_, admin := e.user(fmt.Sprintf("admin-%d@example.com", round), true)
	teacherID, teacher := e.user(fmt.Sprintf("teacher-%d@example.com", round), false)
	studentID, student := e.user(fmt.Sprintf("student-%d@example.com", round), false)
	_, other := e.user(fmt.Sprintf("other-%d@example.com", round), false)

	for i := range 3 {
		a := c.call("POST", "/agents", student, map[string]any{"name": fmt.Sprintf("Tutor %d", i), "system_prompt": "Be kind"}, 201)
		c.call("PATCH", fmt.Sprintf("/agents/%d", id(a, "agent_id")), student, map[string]any{"name": "Patient tutor", "is_active": i%2 == 0}, 200)
	}
	org := c.call("POST", "/admin/organizations", admin, map[string]any{"name": fmt.Sprintf("School %d", round)}, 201)
	partner := c.call("POST", fmt.Sprintf("/partner/partners?org_id=%d", id(org)), admin,
		map[string]any{"org_id": id(org), "full_name": "Teacher", "email": fmt.Sprintf("teacher-%d@example.com", round), "user_id": teacherID}, 201)
	p := fmt.Sprintf("/partner/%d", id(partner))
	course := c.call("POST", p+"/course", teacher, map[string]any{"title": "Algebra", "course_key": fmt.Sprintf("ALG-%d", round)}, 201)
	c.call("PATCH", fmt.Sprintf("%s/course/%d", p, id(course)), teacher, map[string]any{"title": "Algebra I"}, 200)
	class := c.call("POST", fmt.Sprintf("%s/classes?course_id=%d", p, id(course)), teacher, map[string]any{"name": "Algebra A", "capacity": 30}, 201)
	c.call("PATCH", fmt.Sprintf("%s/classes/%d", p, id(class)), teacher, map[string]any{"name": "Algebra A (mornings)"}, 200)
	c.call("POST", fmt.Sprintf("%s/student/%d/enrollments", p, studentID), teacher, map[string]any{"class_id": id(class), "student_id": studentID}, 201)
	for _, code := range class["invite_codes"].([]any) {
		if code := code.(map[string]any); code["target_role"] == "student" {
			joined := c.call("POST", "/user/class/join", other, map[string]any{"code": code["code"]}, 201)
			c.call("DELETE", fmt.Sprintf("/user/class/enrollments/%d", id(joined)), other, nil, 204)
		}
	}
	promo := c.call("POST", "/user/partner-promotion-requests", other,
		map[string]any{"name": "Other", "email": fmt.Sprintf("other-%d@example.com", round), "org_name": fmt.Sprintf("Other school %d", round)}, 201)
	c.call("POST", fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", id(promo, "request_id")), admin, map[string]any{"organization": "new"}, 200)

	shot := c.call("POST", "/user/practice/few-shot-examples", student, map[string]any{"input_text": "2+2?", "output_text": "4"}, 201)
	c.call("PATCH", fmt.Sprintf("/user/practice/few-shot-examples/%d", id(shot, "example_id")), student, map[string]any{"output_text": "Four"}, 200)
	doc := c.call("POST", "/user/document", student, map[string]any{"title": "Cells", "content": "Mitochondria make ATP. Ribosomes make proteins."}, 201)
	c.call("PATCH", fmt.Sprintf("/user/document/%d/settings/search", id(doc, "knowledge_id")), student, map[string]any{"top_k": 3, "min_score": 0.1}, 200)
	run := c.call("POST", fmt.Sprintf("/user/practice/sessions/run?class_id=%d", id(class)), student,
		map[string]any{"prompt_text": "What is a prime?", "model_names": []string{"echo", "echo-reverse"}, "style_preset": "accurate"}, 201)
	session := int64(run["session_id"].(float64))
	c.call("POST", fmt.Sprintf("/user/practice/sessions/%d/chat", session), student, map[string]any{"prompt_text": "And 7?"}, 200)
	c.call("PATCH", fmt.Sprintf("/user/practice/sessions/%d/settings", session), student,
		map[string]any{"style_preset": "creative", "few_shot_example_ids": []int64{id(shot, "example_id")}}, 200)
	c.call("POST", fmt.Sprintf("/user/practice/sessions/%d/chat", session), student, map[string]any{"prompt_text": "And 9?"}, 200)
}

// settle waits until every projection has applied the client's last write.
func (e *replayEnv) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var groups []string
	for _, p := range service.Projections() {
		groups = append(groups, p.Name)
	}
	if err := e.svc.Listener.WaitFor(ctx, e.c.last, groups...); err != nil {
		t.Fatalf("projections did not reach %s: %v", e.c.last, err)
	}
}

// snapshot is every replayable table's rows (as JSON, sorted) and indexes.
func snapshot(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	ps, err := service.ReplayableProjections()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range ps {
		for _, table := range p.Tables {
			rows, err := pool.Query(context.Background(), fmt.Sprintf(
				`SELECT to_jsonb(t)::text FROM %s t ORDER BY 1`, pgx.Identifier{table}.Sanitize()))
			if err != nil {
				t.Fatal(err)
			}
			if out[table], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			rows, err = pool.Query(context.Background(),
				`SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 ORDER BY 1`, table)
			if err != nil {
				t.Fatal(err)
			}
			if out[table+" indexes"], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			rows, err = pool.Query(context.Background(),
				`SELECT conname || ': ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass ORDER BY 1`, table)
			if err != nil {
				t.Fatal(err)
			}
			if out[table+" constraints"], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			var persistence string // p: permanent (a replay loads unlogged tables first)
			if err := pool.QueryRow(context.Background(), `SELECT relpersistence::text FROM pg_class WHERE oid = $1::regclass`,
				table).Scan(&persistence); err != nil {
				t.Fatal(err)
			}
			out[table+" persistence"] = []string{persistence}
		}
	}
	return out
}

// replay replays every read model; loadLimit, if not 0, is the replay's
// LoadLimit.
func replay(t *testing.T, e *replayEnv, loadLimit int) []projections.ReplayResult {
	t.Helper()
	ctx := context.Background()
	r, closeStore, err := service.NewReplayer(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	ps, err := service.ReplayableProjections()
	if err != nil {
		t.Fatal(err)
	}
	r.PageSize, r.TxEvents = 7, 20 // many pages and transactions, even on this small log
	r.LoadLimit = loadLimit
	res, err := r.Replay(ctx, ps...)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return res
}

// A replay rebuilds every read model from the log, row for row the same as
// the live ones, with the same indexes; the service then goes on projecting
// onto the new tables.
func TestReplayRebuildsReadModelsIdentically(t *testing.T) {
	for _, store := range []string{"postgres", "esdbfake"} {
		t.Run(store, func(t *testing.T) {
			e := startReplayEnv(t, store)
			e.workload(1)
			e.workload(2)
			e.settle(t)
			before := snapshot(t, e.pool)
			for table, rows := range before {
				if len(rows) == 0 {
					t.Fatalf("the workload left %s empty: the comparison would prove nothing", table)
				}
			}
			triggers := triggersOf(t, e.pool)
			if len(triggers["users"]) == 0 {
				t.Fatal("users has no triggers: the comparison would prove nothing")
			}
			results := replay(t, e, 0)
			// A table built LIKE the live one has none of its triggers: the
			// swap puts them back (the users table's make role changes wait
			// for session leases).
			if diff := cmp.Diff(triggers, triggersOf(t, e.pool)); diff != "" {
				t.Errorf("the replayed tables' triggers differ (-live +replayed):\n%s", diff)
			}
			var applied int64
			for _, r := range results {
				applied += r.Applied
				if r.Position.Compare(e.c.last) < 0 {
					t.Errorf("%s: the live consumer goes on from %s, before the last write %s", r.Projection, r.Position, e.c.last)
				}
			}
			if applied == 0 {
				t.Fatal("the replay applied no events")
			}
			if diff := cmp.Diff(before, snapshot(t, e.pool)); diff != "" {
				t.Fatalf("replayed read models differ from the live ones (-live +replayed):\n%s", diff)
			}
			var leftovers int
			if err := e.pool.QueryRow(context.Background(),
				`SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'replay\_%' OR nspname LIKE 'replaced\_%'`).Scan(&leftovers); err != nil || leftovers != 0 {
				t.Errorf("replay schemas left behind: %d (%v)", leftovers, err)
			}

			// The live projections go on from the replay's position, on the new tables.
			e.workload(3)
			e.settle(t)
			after := snapshot(t, e.pool)
			replay(t, e, 0)
			if diff := cmp.Diff(after, snapshot(t, e.pool)); diff != "" {
				t.Fatalf("after more writes, a second replay differs (-live +replayed):\n%s", diff)
			}
			// Loaders that may hold only a few rows hand the rest of the log
			// over to the handlers: the same rows again.
			replay(t, e, 3)
			if diff := cmp.Diff(after, snapshot(t, e.pool)); diff != "" {
				t.Fatalf("a replay whose loaders handed over differs (-live +replayed):\n%s", diff)
			}
		})
	}
}

// triggersOf lists each table's triggers in the current schema.
func triggersOf(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname, array_agg(g.tgname::text ORDER BY g.tgname)
		FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
		WHERE NOT g.tgisinternal AND c.relnamespace = current_schema()::regnamespace
		GROUP BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var table string
		var names []string
		if err := rows.Scan(&table, &names); err != nil {
			t.Fatal(err)
		}
		out[table] = names
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Writes that go on during a replay are neither lost nor applied twice: the
// live projection applies them to the old tables, the replay to the new ones,
// and whatever the replay has not seen the live projection applies after the
// swap.
func TestReplayWhileWriting(t *testing.T) {
	e := startReplayEnv(t, "postgres")
	e.workload(1)
	_, token := e.user("writer@example.com", false)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var written []int64
	var writeErr error
	var writes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			a, err := e.c.try("POST", "/agents", token, map[string]any{"name": fmt.Sprintf("Agent %d", i), "system_prompt": "p"}, 201)
			if err != nil {
				writeErr = err
				return
			}
			written = append(written, id(a, "agent_id"))
			writes.Add(1)
		}
	}()
	poll.Must(t, 10*time.Second, "writes under way", func() bool { return writes.Load() > 0 })
	for i := range 3 {
		replay(t, e, i) // the second, and third, hand over to the handlers
	}
	cancel()
	wg.Wait()
	if writeErr != nil {
		t.Fatalf("a write during the replays: %v", writeErr)
	}
	e.settle(t)
	if len(written) < 10 {
		t.Fatalf("only %d writes during the replays: the test proves little", len(written))
	}
	var n int
	var distinct int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT id) FROM agents WHERE name LIKE 'Agent %'`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != len(written) || distinct != len(written) {
		t.Fatalf("agents rows %d (%d distinct), want the %d written", n, distinct, len(written))
	}
	before := snapshot(t, e.pool)
	replay(t, e, 0)
	if diff := cmp.Diff(before, snapshot(t, e.pool)); diff != "" {
		t.Fatalf("a quiet replay differs from the live read models (-live +replayed):\n%s", diff)
	}
}
