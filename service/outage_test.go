package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/projections"
	"lectern/service"
)

// outage is how long EventStoreDB stays down: well past the second after
// which the official client gives up for good.
const outage = 5 * time.Second

// write is one POST /agents as the writers saw it.
type write struct {
	name       string
	status     int
	took       time.Duration
	retryAfter string
	pending    string
	at         time.Time
}

// An EventStoreDB outage under write load: writes fail fast with 503 and
// Retry-After while the server is down, /readyz says so, and once it is back
// writes succeed again, the projections' subscriptions resume, and every
// acknowledged write is readable, none applied twice.
func TestEventStoreDBOutage(t *testing.T) {
	fake, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	pool := pgtest.Fresh(t)
	svc, base, _ := serve(t, service.Config{Pool: pool, EventStoreURL: fake.URL(), Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if _, _, err := svc.Identity.CreateUser(context.Background(), "ada@example.com", "correct horse", "Ada", false); err != nil {
		t.Fatal(err)
	}
	r := &running{t: t, url: base}
	token := r.login()
	ready := func() int {
		status, _, _, err := send("GET", base+"/readyz", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return status
	}

	var (
		mu     sync.Mutex
		writes []write
	)
	count := func(status int, after time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, w := range writes {
			if w.status == status && w.at.After(after) {
				n++
			}
		}
		return n
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for writer := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("agent %d-%d", writer, i)
				start := time.Now()
				status, header, _, err := send("POST", base+"/agents", token, []byte(fmt.Sprintf(`{"name":%q,"system_prompt":"p"}`, name)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				writes = append(writes, write{name: name, status: status, took: time.Since(start), retryAfter: header.Get("Retry-After"),
					pending: header.Get("X-Projection-Pending"), at: time.Now()})
				mu.Unlock()
			}
		}()
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters()

	poll.Must(t, 30*time.Second, "writes succeeding before the outage", func() bool { return count(http.StatusCreated, time.Time{}) >= 10 })
	fake.Stop()
	down := time.Now()
	poll.Must(t, 10*time.Second, "/readyz 503 during the outage", func() bool { return ready() == http.StatusServiceUnavailable })
	poll.Must(t, 10*time.Second, "writes answered 503 during the outage", func() bool { return count(http.StatusServiceUnavailable, down) >= 4 })
	// The outage lasts its length: it is the fault under test.
	time.Sleep(time.Until(down.Add(outage)))
	if err := fake.Restart(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	defer func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range writes[max(0, len(writes)-10):] {
				t.Logf("last writes: %s %d after %v at +%v", w.name, w.status, w.took, w.at.Sub(down))
			}
		}
	}()
	poll.Must(t, 15*time.Second, "/readyz 200 after the outage", func() bool { return ready() == http.StatusOK })
	poll.Must(t, 15*time.Second, "writes succeeding after the outage", func() bool { return count(http.StatusCreated, up) >= 10 })
	stopWriters()

	// The subscription resumes: the first write after the restart answered
	// with its read model applied shows it (how soon depends on the
	// machine's load: a write that began while it was resuming may be
	// answered pending), and every write begun after that one is answered
	// with its read model applied too.
	var resumed time.Time
	for _, w := range writes {
		if w.status == http.StatusCreated && w.pending == "" && w.at.Add(-w.took).After(up) && (resumed.IsZero() || w.at.Before(resumed)) {
			resumed = w.at
		}
	}
	if resumed.IsZero() {
		t.Errorf("no write after the outage was answered with its read model applied: the subscription did not resume")
	}
	// Writes failed fast and said when to come back; none failed otherwise.
	acknowledged := map[string]bool{}
	for _, w := range writes {
		switch w.status {
		case http.StatusCreated:
			acknowledged[w.name] = true
			if !resumed.IsZero() && w.at.Add(-w.took).After(resumed) && w.pending != "" {
				t.Errorf("%s after the subscription resumed: its read model was not applied in time (X-Projection-Pending %s)", w.name, w.pending)
			}
		case http.StatusServiceUnavailable:
			if w.retryAfter == "" {
				t.Errorf("%s: 503 without Retry-After", w.name)
			}
			if limit := esdb.DefaultAppendRetryFor + 2*time.Second; w.took > limit {
				t.Errorf("%s: 503 after %v, more than %v", w.name, w.took, limit)
			}
		default:
			t.Errorf("%s: status %d", w.name, w.status)
		}
	}

	// Every acknowledged write is in the read model, once; the read model
	// holds exactly the agents the log holds.
	names := map[string]int{}
	for page := 1; ; page++ {
		status, _, body, err := send("GET", fmt.Sprintf("%s/agents?page=%d&size=200", base, page), token, nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET /agents: %d %v", status, err)
		}
		var list struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			names[it.Name]++
		}
		if len(list.Items) < 200 {
			break
		}
	}
	for name := range acknowledged {
		if names[name] != 1 {
			t.Errorf("acknowledged %s: %d times in GET /agents", name, names[name])
		}
	}
	store, err := esdb.Open(context.Background(), fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	logged := map[string]int{}
	for after := (eventstore.Position{}); ; {
		page, err := store.ReadAll(context.Background(), after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page {
			if ev.Type == "agent.created" {
				var data struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal(ev.Data, &data)
				logged[data.Name]++
			}
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Position
	}
	for name, n := range logged {
		if n != 1 || names[name] != 1 {
			t.Errorf("%s: %d events, %d agents", name, n, names[name])
		}
	}
	if len(names) != len(logged) {
		t.Errorf("%d agents read, %d created in the log", len(names), len(logged))
	}
	t.Logf("%d writes acknowledged (%d of them after the outage), %d answered 503", len(acknowledged), count(http.StatusCreated, up),
		count(http.StatusServiceUnavailable, time.Time{}))
}

// A checkpoint EventStoreDB cannot read from (a PostgreSQL position left in
// esdb_checkpoints, inside one of its records) stops that projection for
// good, reported on /readyz, instead of a subscription that the server
// confirms and drops again and again.
func TestForeignCheckpointStopsItsProjection(t *testing.T) {
	url := esdbfake.Start(t)
	store, err := esdb.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	// Two records (system events: no projection sees them); the checkpoint
	// is inside the first.
	var first eventstore.Position
	for i := range 2 {
		res, err := store.Append(context.Background(), "$test-seed", eventstore.Any, []eventstore.EventData{{
			ID: uuid.New(), Type: "$test-seed", SchemaVersion: 1, Data: []byte(`{}`), RecordedAt: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res.Position
		}
	}
	pool := pgtest.Fresh(t)
	if _, err := pool.Exec(context.Background(), `INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position)
		VALUES ($1, $2, 6)`, projections.AgentsProjection, int64(first.Commit+1)); err != nil {
		t.Fatal(err)
	}
	svc, base, _ := serve(t, service.Config{Pool: pool, EventStoreURL: url})
	poll.Must(t, 15*time.Second, "/readyz 503 naming the projection and its checkpoint", func() bool {
		status, _, body, err := send("GET", base+"/readyz", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return status == http.StatusServiceUnavailable &&
			strings.Contains(string(body), projections.AgentsProjection+" (the stored checkpoint is not a position of this EventStoreDB log")
	})
	// The metrics say so too, and the other projections' lag is still
	// counted: the lag that cannot be counted from that checkpoint is left
	// out, not every projection's.
	rec := httptest.NewRecorder()
	svc.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if body := rec.Body.String(); rec.Code != http.StatusOK ||
		!strings.Contains(body, `lectern_projection_stalled{projection="`+projections.AgentsProjection+`"} 1`) ||
		strings.Contains(body, `lectern_projection_lag_events{projection="`+projections.AgentsProjection+`"}`) ||
		!strings.Contains(body, `lectern_projection_lag_events{projection="`+projections.PracticeProjection+`"} 0`) {
		t.Errorf("GET /metrics: %d, want 200 with the projection stalled, no lag of it, and the others':\n%s", rec.Code, body)
	}
}
