package service_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/history"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/service"
)

// running is a service under test with its HTTP server.
type running struct {
	t    *testing.T
	url  string
	stop func()
}

func startService(t *testing.T, pool *pgxpool.Pool, key []byte, eventStoreURL string) *running {
	t.Helper()
	svc, url, stop := serve(t, service.Config{Pool: pool, JWTKey: key, EventStoreURL: eventStoreURL})
	r := &running{t: t, url: url, stop: stop}
	if _, _, err := svc.Identity.CreateUser(context.Background(), "ada@example.com", "correct horse", "Ada", false); err != nil &&
		!strings.Contains(err.Error(), "already") {
		t.Fatal(err)
	}
	return r
}

// do sends a request and returns the status, headers and body.
func (r *running) do(method, path, token, body string) (int, http.Header, string) {
	r.t.Helper()
	status, header, b, err := send(method, r.url+path, token, []byte(body))
	if err != nil {
		r.t.Fatal(err)
	}
	return status, header, string(b)
}

func (r *running) login() string {
	r.t.Helper()
	status, _, body := r.do("POST", "/user/login", "", `{"email":"ada@example.com","password":"correct horse"}`)
	var tokens struct {
		Access string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(body), &tokens); status != http.StatusOK || err != nil {
		r.t.Fatalf("login: %d %s", status, body)
	}
	return tokens.Access
}

// The README's way from PostgreSQL to EventStoreDB: stop Lectern, `lectern
// events copy` (the events, then the projections' checkpoints), start it on
// EventStoreDB. The read models built on PostgreSQL serve on, untouched: the
// projections go on after the copied history instead of applying it again,
// and new writes project and read as before.
func TestCopyToEventStoreDBThenServeFromIt(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)

	pg := startService(t, pool, key, "")
	token := pg.login()
	var agents []int64
	for _, name := range []string{"Tutor", "Critic"} {
		status, _, body := pg.do("POST", "/agents", token, fmt.Sprintf(`{"name":%q,"system_prompt":"Be kind"}`, name))
		var a struct {
			ID int64 `json:"agent_id"`
		}
		if err := json.Unmarshal([]byte(body), &a); status != http.StatusCreated || err != nil {
			t.Fatalf("create agent: %d %s", status, body)
		}
		agents = append(agents, a.ID)
	}
	if status, _, body := pg.do("PATCH", fmt.Sprintf("/agents/%d", agents[0]), token, `{"name":"Patient tutor"}`); status != http.StatusOK {
		t.Fatalf("patch: %d %s", status, body)
	}
	// Under load a write may answer before its projection (X-Projection-
	// Pending): wait until the read models hold every write.
	var before string
	var list string
	caughtUp := poll.Until(30*time.Second, func() bool {
		_, _, list = pg.do("GET", "/agents", token, "")
		var status int
		status, _, before = pg.do("GET", fmt.Sprintf("/agents/%d", agents[0]), token, "")
		return status == http.StatusOK && strings.Contains(before, `"Patient tutor"`) && strings.Contains(list, `"total":2`)
	})
	if !caughtUp {
		t.Fatalf("the read models did not catch up: %s %s", before, list)
	}
	pg.stop()

	// lectern events copy --to the fake.
	url := esdbfake.Start(t)
	dst, err := esdb.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dst.Close() })
	src := postgres.New(pool, nil)
	t.Cleanup(src.Close)
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if n, err := history.Copy(ctx, src, dst, nil); err != nil || n != stored {
		t.Fatalf("copy: %d of %d events, %v", n, stored, err)
	}
	if n, err := history.CopyCheckpoints(ctx, pool, dst); err != nil || n == 0 {
		t.Fatalf("CopyCheckpoints: %d, %v", n, err)
	}
	// A probe: were the history applied again, agent.created would bring
	// the second agent's row back.
	if _, err := pool.Exec(ctx, `DELETE FROM agents WHERE id = $1`, agents[1]); err != nil {
		t.Fatal(err)
	}

	es := startService(t, pool, key, url)
	token = es.login() // the user's stream is read from EventStoreDB
	// A new write projects and is readable at once.
	status, hdr, body := es.do("PATCH", fmt.Sprintf("/agents/%d", agents[0]), token, `{"name":"Coach"}`)
	if status != http.StatusOK || hdr.Get("X-Projection-Pending") != "" || !strings.Contains(body, `"name":"Coach"`) {
		t.Fatalf("patch on EventStoreDB: %d pending=%q %s", status, hdr.Get("X-Projection-Pending"), body)
	}
	_, _, after := es.do("GET", fmt.Sprintf("/agents/%d", agents[0]), token, "")
	if want := strings.Replace(before, `"name":"Patient tutor"`, `"name":"Coach"`, 1); !sameExceptTimes(after, want) {
		t.Errorf("the agent after the write on EventStoreDB:\n%s\nwant (times aside)\n%s", after, want)
	}
	if status, _, body := es.do("GET", fmt.Sprintf("/agents/%d", agents[1]), token, ""); status != http.StatusNotFound {
		t.Errorf("the probe row came back (%d %s): the projections applied the copied history again", status, body)
	}
}

// sameExceptTimes compares two JSON objects, updated_at aside.
func sameExceptTimes(a, b string) bool {
	var x, y map[string]any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	delete(x, "updated_at")
	delete(y, "updated_at")
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}
