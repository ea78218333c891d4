// Package crashtest kills `lectern serve` child processes with SIGKILL at
// chosen points of their work (the failpoint package) and checks what
// survives: every acknowledged write, read models equal to a fresh replay of
// the log, nothing applied twice. On both event stores.
package crashtest

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/failpoint"
	"lectern/personal"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/service"
)

// lecternBinary builds cmd/lectern once for the package.
var lecternBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "lectern-crashtest-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lectern")
	cmd := exec.Command("go", "build", "-o", bin, "lectern/cmd/lectern")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := lecternBinary(); err == nil {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// system is one database (and EventStoreDB, where used) that lectern
// processes come and go on.
type system struct {
	t     *testing.T
	bin   string
	env   []string
	pool  *pgxpool.Pool
	store eventstore.Store // the log, read directly
	port  string
	serve *exec.Cmd
	exit  chan error // serve's Wait
	logs  *bytes.Buffer
	token string
}

func newSystem(t *testing.T, storeKind string) *system {
	bin, err := lecternBinary()
	if err != nil {
		t.Fatal(err)
	}
	pool, dbURL := pgtest.FreshURL(t)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*7 + 1)
	}
	s := &system{t: t, bin: bin, pool: pool, logs: &bytes.Buffer{},
		env: []string{"DATABASE_URL=" + dbURL, "LECTERN_JWT_KEY=" + hex.EncodeToString(key),
			"LECTERN_DATA_KEY=" + hex.EncodeToString(key[:32]), "LECTERN_LOG_LEVEL=WARN"}}
	switch storeKind {
	case "esdbfake":
		fake, err := esdbfake.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fake.Close)
		s.env = append(s.env, "EVENTSTORE_URL="+fake.URL())
		es, err := esdb.Open(context.Background(), fake.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = es.Close() })
		s.store = es
	default:
		s.store = postgres.New(pool, nil)
	}
	// Read as the service reads it: personal fields (agents' names) opened.
	keys, err := personal.NewKeys(pool, key[:32])
	if err != nil {
		t.Fatal(err)
	}
	s.store = personal.NewStore(s.store, personal.NewSealer(keys))
	s.run(nil, "users", "create", "--email", "ada@example.com", "--name", "Ada", "--password", "correct horse")
	// An operator's command records who acted.
	evs, err := s.store.ReadStream(context.Background(), "user-1", eventstore.Forwards, 1, 1)
	if err != nil || len(evs) != 1 || !strings.HasPrefix(evs[0].Metadata.Actor, "cli:users create by ") || evs[0].Metadata.CorrelationID == "" {
		t.Fatalf("the account's event: %+v, %v; want its actor recorded", evs, err)
	}
	return s
}

// run runs a lectern command to its end (with extra environment).
func (s *system) run(extra []string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(append(os.Environ(), s.env...), extra...)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("lectern %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// start runs `lectern serve` (with extra environment) and waits until it is
// ready; the process is killed when the test ends.
func (s *system) start(extra ...string) {
	s.t.Helper()
	// The port is free when chosen but may be taken before the child binds
	// it (other tests run alongside): a bind failure picks another.
	for attempt := 1; ; attempt++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.t.Fatal(err)
		}
		s.port = strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
		_ = lis.Close()
		s.logs.Reset()
		cmd := exec.Command(s.bin, "serve")
		cmd.Env = append(append(os.Environ(), s.env...), append([]string{"PORT=" + s.port}, extra...)...)
		cmd.Stdout, cmd.Stderr = io.Discard, s.logs
		if err := cmd.Start(); err != nil {
			s.t.Fatal(err)
		}
		s.serve, s.exit = cmd, make(chan error, 1)
		go func() { s.exit <- cmd.Wait() }()
		s.t.Cleanup(func() { _ = cmd.Process.Kill() })
		var exited error
		died := false
		ready := poll.Until(60*time.Second, func() bool {
			select {
			case exited = <-s.exit:
				died = true
				return true
			default:
			}
			res, err := http.Get(s.url("/readyz"))
			if err != nil {
				return false
			}
			_ = res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
		switch {
		case died && strings.Contains(s.logs.String(), "address already in use") && attempt < 5:
			continue
		case died:
			s.t.Fatalf("lectern serve exited: %v\n%s", exited, s.logs)
		case !ready:
			s.t.Fatalf("lectern serve not ready within 60 s")
		}
		break
	}
	if s.token == "" {
		var out struct {
			Access string `json:"access_token"`
		}
		status, body := s.do("POST", "/user/login", `{"email":"ada@example.com","password":"correct horse"}`)
		if err := json.Unmarshal(body, &out); status != http.StatusOK || err != nil {
			s.t.Fatalf("login: %d %s", status, body)
		}
		s.token = out.Access
	}
}

// killed waits until serve has died of SIGKILL (a failpoint's), or kills it.
func (s *system) killed(within time.Duration, kill bool) {
	s.t.Helper()
	if kill {
		_ = s.serve.Process.Signal(syscall.SIGKILL)
	}
	select {
	case err := <-s.exit:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			s.t.Fatalf("lectern serve ended with %v, not SIGKILL\n%s", err, s.logs)
		}
	case <-time.After(within):
		s.t.Fatalf("lectern serve did not reach its failpoint within %v\n%s", within, s.logs)
	}
}

func (s *system) url(path string) string { return "http://127.0.0.1:" + s.port + path }

func (s *system) do(method, path, body string) (int, []byte) {
	req, err := http.NewRequest(method, s.url(path), strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil // the process died under the request
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, data
}

// writeUntilDeath creates agents from several writers until serve dies (or
// stop closes), and returns the ids of those acknowledged (201).
func (s *system) writeUntilDeath(label string, stop <-chan struct{}) map[string]int64 {
	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("%s %d-%d", label, w, i)
				status, body := s.do("POST", "/agents", fmt.Sprintf(`{"name":%q,"system_prompt":"p"}`, name))
				if status == 0 {
					return // dead
				}
				if status != http.StatusCreated {
					s.t.Errorf("POST /agents: %d %s", status, body)
					return
				}
				var out struct {
					ID int64 `json:"agent_id"`
				}
				_ = json.Unmarshal(body, &out)
				mu.Lock()
				acked[name] = out.ID
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// eachAgentCreated calls f with every agent.created event of the log, in
// order.
func (s *system) eachAgentCreated(f func(eventstore.RecordedEvent)) {
	s.t.Helper()
	for after := (eventstore.Position{}); ; {
		page, err := s.store.ReadAll(context.Background(), after, 1000)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, ev := range page {
			if ev.Type == "agent.created" {
				f(ev)
			}
		}
		if len(page) < 1000 {
			return
		}
		after = page[len(page)-1].Position
	}
}

// agentsInLog counts each agent name's agent.created events in the log.
func (s *system) agentsInLog() map[string]int {
	s.t.Helper()
	out := map[string]int{}
	s.eachAgentCreated(func(ev eventstore.RecordedEvent) {
		var data struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(ev.Data, &data)
		out[data.Name]++
	})
	return out
}

// agentsRead is each agent name's count in GET /agents.
func (s *system) agentsRead() map[string]int {
	s.t.Helper()
	out := map[string]int{}
	for page := 1; ; page++ {
		status, body := s.do("GET", fmt.Sprintf("/agents?page=%d&size=200", page), "")
		var list struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
			s.t.Fatalf("GET /agents: %d %s", status, body)
		}
		for _, it := range list.Items {
			out[it.Name]++
		}
		if len(list.Items) < 200 {
			return out
		}
	}
}

// settled waits until the read model holds every agent of the log once, and
// checks every acknowledged agent is among them.
func (s *system) settled(acked map[string]int64) {
	s.t.Helper()
	var logged, read map[string]int
	if !poll.Until(60*time.Second, func() bool {
		logged, read = s.agentsInLog(), s.agentsRead()
		return fmt.Sprint(logged) == fmt.Sprint(read)
	}) {
		s.t.Fatalf("the read model never matched the log: %d agents logged, %d read", len(logged), len(read))
	}
	for name, n := range logged {
		if n != 1 {
			s.t.Errorf("%s: %d agent.created events", name, n)
		}
	}
	for name, id := range acked {
		if read[name] != 1 {
			s.t.Errorf("acknowledged %s: %d in GET /agents", name, read[name])
		}
		if status, body := s.do("GET", fmt.Sprintf("/agents/%d", id), ""); status != http.StatusOK {
			s.t.Errorf("acknowledged agent %d: %d %s", id, status, body)
		}
	}
}

// readModels is every replayable table's rows, sorted.
func (s *system) readModels() map[string][]string {
	s.t.Helper()
	ps, err := service.ReplayableProjections()
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range ps {
		for _, table := range p.Tables {
			rows, err := s.pool.Query(context.Background(), fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t ORDER BY 1`, pgx.Identifier{table}.Sanitize()))
			if err != nil {
				s.t.Fatal(err)
			}
			if out[table], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	return out
}

func TestCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills lectern processes")
	}
	for _, store := range []string{"postgres", "esdbfake"} {
		t.Run(store, func(t *testing.T) {
			s := newSystem(t, store)
			acked := map[string]int64{}
			merge := func(m map[string]int64) {
				for k, v := range m {
					acked[k] = v
				}
			}

			// 1. Killed with appends in flight: the 25th append is stored
			// and never answered.
			s.start("LECTERN_FAILPOINT=" + failpoint.AppendCommitted + ":25")
			merge(s.writeUntilDeath("appends", nil))
			s.killed(30*time.Second, false)
			s.start()
			s.settled(acked)

			// 2. Killed with a projection's batch applied and not committed.
			s.killed(10*time.Second, true)
			s.start("LECTERN_FAILPOINT=" + failpoint.ProjectionApplied + ":40")
			merge(s.writeUntilDeath("batch", nil))
			s.killed(30*time.Second, false)
			s.start()
			s.settled(acked)

			// 3. Killed, with the service, while a replay swaps its tables in.
			stop := make(chan struct{})
			done := make(chan map[string]int64)
			go func() { done <- s.writeUntilDeath("replay", stop) }()
			replay := exec.Command(s.bin, "replay")
			replay.Env = append(append(os.Environ(), s.env...), "LECTERN_FAILPOINT="+failpoint.ReplaySwapping)
			out, err := replay.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("lectern replay ended with %v, not at its failpoint:\n%s", err, out)
			}
			s.killed(10*time.Second, true)
			close(stop)
			merge(<-done)
			s.start()
			s.settled(acked)

			// The read models equal a fresh replay of the log, row for row.
			before := s.readModels()
			s.run(nil, "replay")
			after := s.readModels()
			for _, table := range sortedKeys(before) {
				if strings.Join(before[table], "\n") != strings.Join(after[table], "\n") {
					t.Errorf("%s: the live read model (%d rows) differs from a fresh replay (%d rows)", table, len(before[table]), len(after[table]))
				}
			}
			t.Logf("%d acknowledged writes survived three kills", len(acked))
		})
	}
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
