package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// fakeProvider is an OpenAI-compatible chat completions server answering
// after delay.
func fakeProvider(delay time.Duration) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"An answer."}}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`)
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String() + "/v1", func() { _ = srv.Close() }, nil
}

// call sends one authenticated JSON request and decodes the answer.
func call(client *http.Client, method, url, token, body string, out any) (int, error) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, err
		}
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, nil
}

// practiceBench measures a two-model turn against fake providers that each
// answer in 50 ms, and the session list with 10 000 sessions.
func practiceBench(ctx context.Context, base string) error {
	pool, dbName, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	providerURL, stopProvider, err := fakeProvider(50 * time.Millisecond)
	if err != nil {
		return err
	}
	defer stopProvider()
	env, err := newPracticeEnv(ctx, base, dbName, providerURL, "fake", 64)
	if err != nil {
		return err
	}
	defer env.close()
	srv, client, token, class := env.srv, env.client, env.token, env.class
	if *only == "list" {
		return listBench(ctx, pool, srv, client, token, class.ID)
	}

	// Baseline: one call straight to the fake provider.
	var direct []time.Duration
	for range 20 {
		start := time.Now()
		resp, err := client.Post(providerURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		direct = append(direct, time.Since(start))
	}
	var turns []time.Duration
	runURL := fmt.Sprintf("%s/user/practice/sessions/run?class_id=%d", srv.url, class.ID)
	// 105 turns, 100 measured: the p99 is then not just the slowest turn.
	for i := range 105 {
		start := time.Now()
		status, err := call(client, "POST", runURL, token, fmt.Sprintf(`{"prompt_text":"Question %d","model_names":["fake-a","fake-b"]}`, i), nil)
		if err != nil || status != http.StatusCreated {
			return fmt.Errorf("run: %d %w", status, err)
		}
		if i >= 5 { // warm-up
			turns = append(turns, time.Since(start))
		}
	}
	sortDurations(direct)
	sortDurations(turns)
	fmt.Println("\n## Two-model practice turn (fake providers answering in 50 ms each), sequential turns")
	fmt.Printf("%-34s %10s %10s\n", "", "p50", "p99")
	fmt.Printf("%-34s %10s %10s   (target < 60 ms: the models run in parallel)\n", "POST /user/practice/sessions/run", ms(percentile(turns, .5)), ms(percentile(turns, .99)))
	fmt.Printf("%-34s %10s %10s   (baseline: one direct provider call)\n", "one provider call", ms(percentile(direct, .5)), ms(percentile(direct, .99)))

	return listBench(ctx, pool, srv, client, token, class.ID)
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// listBench seeds 10 000 sessions of the bench user through the event store
// and the projection, then lists them at 32 concurrent clients.
func listBench(ctx context.Context, pool *pgxpool.Pool, srv *server, client *http.Client, token string, classID int64) error {
	var userID int64
	if err := pool.QueryRow(ctx, `SELECT id FROM users WHERE email = 'bench@example.com'`).Scan(&userID); err != nil {
		return err
	}
	store := postgres.New(pool, nil)
	defer store.Close()
	const sessions = 10_000
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < sessions; i += 8 {
				var id int64
				if err := pool.QueryRow(ctx, `SELECT nextval('session_ids')`).Scan(&id); err != nil {
					errs <- err
					return
				}
				title := fmt.Sprintf("Session %d", i)
				data, _ := json.Marshal(events.SessionStarted{
					SessionID: id, UserID: userID, ClassID: &classID, KnowledgeIDs: []int64{}, Title: &title,
					Settings: events.SessionSettings{SettingID: id, StylePreset: "balanced", StyleParams: json.RawMessage(`{}`),
						FewShotLinks: []events.FewShotLink{}},
				})
				if _, err := store.Append(ctx, eventstore.StreamName(events.CategorySession, id), eventstore.NoStream, []eventstore.EventData{{
					ID: uuid.New(), Type: events.SessionStarted{}.EventType(), SchemaVersion: 1, Data: data,
				}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM practice_sessions WHERE user_id = $1`, userID).Scan(&n); err != nil {
			return err
		}
		if n >= sessions {
			break
		}
		if time.Since(start) > 3*time.Minute {
			return fmt.Errorf("only %d of %d sessions projected", n, sessions)
		}
		time.Sleep(50 * time.Millisecond)
	}
	projected := time.Since(start)
	// The steady state of a table after a burst of inserts, which autovacuum
	// reaches on its own a little later: planner statistics and a visibility
	// map. Both figures below are measured on it, each after a warm-up.
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE practice_sessions, practice_session_counts`); err != nil {
		return err
	}

	lat := func(op func() error) ([]time.Duration, error) {
		for range 100 {
			if err := op(); err != nil {
				return nil, err
			}
		}
		var mu sync.Mutex
		var out []time.Duration
		_, err := measure(32, func(int, int) error {
			t := time.Now()
			if err := op(); err != nil {
				return err
			}
			d := time.Since(t)
			mu.Lock()
			out = append(out, d)
			mu.Unlock()
			return nil
		})
		sortDurations(out)
		return out, err
	}
	api, err := lat(func() error {
		status, err := call(client, "GET", srv.url+"/user/practice/sessions", token, "", nil)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("list: %d", status)
		}
		return err
	})
	if err != nil {
		return err
	}
	raw, err := lat(func() error {
		rows, err := pool.Query(ctx, `SELECT id, title, created_at FROM practice_sessions WHERE user_id = $1 ORDER BY id DESC LIMIT 50`, userID)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	})
	if err != nil {
		return err
	}
	fmt.Printf("\n## GET /user/practice/sessions with %d sessions of one user, 32 concurrent clients\n", sessions)
	fmt.Printf("(seeded through the event store and projected in %s)\n", projected.Round(time.Millisecond))
	fmt.Printf("%-34s %10s %10s\n", "", "p50", "p99")
	fmt.Printf("%-34s %10s %10s   (no absolute target: the ratios below are)\n", "GET /user/practice/sessions", ms(percentile(api, .5)), ms(percentile(api, .99)))
	fmt.Printf("%-34s %10s %10s   (baseline: the page's SQL, same concurrency)\n", "raw page query", ms(percentile(raw, .5)), ms(percentile(raw, .99)))
	return listBaselines(ctx, pool, srv, token, userID)
}

// practiceEnv is a server whose catalogue has two models, <prefix>-a and
// <prefix>-b, at one fake provider, logged in as the bench's admin, with a
// class to practise in.
type practiceEnv struct {
	srv    *server
	client *http.Client
	token  string
	class  struct {
		ID int64 `json:"id"`
	}
	close func()
}

func newPracticeEnv(ctx context.Context, base, dbName, providerURL, prefix string, idleConns int) (*practiceEnv, error) {
	dir, err := os.MkdirTemp("", "lectern-bench-models")
	if err != nil {
		return nil, err
	}
	catalogue := fmt.Sprintf(`models:
  - {id: 1, name: echo, provider: echo, default: true}
  - {id: 11, name: %[1]s-a, provider: openai, base_url: %[2]q, model: m, timeout: 5s, retries: 0}
  - {id: 12, name: %[1]s-b, provider: openai, base_url: %[2]q, model: m, timeout: 5s, retries: 0}
`, prefix, providerURL)
	modelsFile := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(modelsFile, []byte(catalogue), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	srv, err := startServer(ctx, base, dbName, "LECTERN_MODELS_FILE="+modelsFile)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e := &practiceEnv{srv: srv, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: idleConns}},
		close: func() { srv.stop(); _ = os.RemoveAll(dir) }}
	if e.token, err = srv.login(e.client); err != nil {
		e.close()
		return nil, err
	}
	var org, partner struct {
		ID int64 `json:"id"`
	}
	if _, err = call(e.client, "POST", srv.url+"/admin/organizations", e.token, `{"name":"Bench school"}`, &org); err == nil {
		_, err = call(e.client, "POST", fmt.Sprintf("%s/partner/partners?org_id=%d", srv.url, org.ID), e.token,
			fmt.Sprintf(`{"org_id":%d,"full_name":"T","email":"t@example.com"}`, org.ID), &partner)
	}
	if err == nil {
		_, err = call(e.client, "POST", fmt.Sprintf("%s/partner/%d/classes", srv.url, partner.ID), e.token, `{"name":"Bench class"}`, &e.class)
	}
	if err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}
