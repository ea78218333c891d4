// Command lectern-bench measures Lectern's hot paths, each beside a baseline
// measured in the same run on the same database (these machines are noisy,
// so ratios mean more than absolute figures). `make bench` runs it against a
// throwaway PostgreSQL cluster.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/personal"
	"lectern/pgtest"
)

var (
	duration   = flag.Duration("duration", 3*time.Second, "length of each throughput measurement")
	cpuProfile = flag.String("cpuprofile", "", "write the bench process's CPU profile to this file")
	only       = flag.String("only", "", "run only this part: append, http (projection lag and POST /agents), crud (POST /agents vs a plain CRUD server), practice, list (the session list and its baselines; practice includes it), stream, esdb, knowledge, privacy, sealing (POST /agents and a replay, sealed vs clear), paths (live batches and replay loaders, each on and off), replay or export")
)

func want(part string) bool { return *only == "" || *only == part }

// benchDataKey is every server's data key in a run: servers started one
// after another on one database must unwrap the subject keys the first
// made.
var benchDataKey = func() string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return hex.EncodeToString(k)
}()

func main() {
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "lectern-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "lectern-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		return errors.New("DATABASE_URL is not set (make bench starts a throwaway cluster)")
	}
	fmt.Printf("lectern-bench: %s per throughput figure; client and server share this machine\n\n", *duration)
	raw16 := 0.0
	if want("append") || want("http") {
		var err error
		if raw16, err = appendPart(ctx, base); err != nil {
			return err
		}
	}
	if want("http") {
		if err := httpPart(ctx, base, raw16); err != nil {
			return err
		}
	}
	if want("crud") {
		if err := crudPart(ctx, base); err != nil {
			return err
		}
	}
	if want("practice") || *only == "list" {
		if err := practiceBench(ctx, base); err != nil {
			return err
		}
	}
	if want("stream") {
		if err := streamBench(ctx, base); err != nil {
			return err
		}
	}
	if want("esdb") {
		if err := esdbBench(ctx, base); err != nil {
			return err
		}
	}
	if want("knowledge") {
		if err := knowledgeBench(ctx, base); err != nil {
			return err
		}
	}
	if want("privacy") {
		if err := privacyBench(ctx, base); err != nil {
			return err
		}
	}
	if want("sealing") {
		if err := sealedWholeBench(ctx, base); err != nil {
			return err
		}
	}
	if want("paths") {
		if err := pathsBench(ctx, base); err != nil {
			return err
		}
	}
	if want("replay") {
		if err := replayBench(ctx, base); err != nil {
			return err
		}
	}
	if want("export") {
		return exportBench(ctx, base)
	}
	return nil
}

// appendPart compares appends with raw inserts; it returns the raw rate at
// 16 writers, the HTTP figure's baseline.
func appendPart(ctx context.Context, base string) (float64, error) {
	pool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	// The same row as an event's: what the append is given, into a plain
	// table with only the (stream, version) key; not the store's own columns
	// (position, transaction id), its index or its sequence.
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_raw (uuid UUID NOT NULL, stream_id TEXT NOT NULL, version BIGINT NOT NULL,
		event_type TEXT NOT NULL, schema_version INT NOT NULL, payload JSON, metadata JSON, recorded_at TIMESTAMPTZ NOT NULL,
		UNIQUE (stream_id, version))`); err != nil {
		return 0, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keys, err := personal.NewKeys(pool, key)
	if err != nil {
		return 0, err
	}
	sealer := personal.NewSealer(keys)
	fmt.Println("## Append throughput (distinct streams) vs raw single-row INSERT of the same row")
	fmt.Println("(events ins: the same single-row INSERT into the events table, none of the store's code: \"table\"")
	fmt.Println(" is what the table's own position index and sequence leave of the raw rate, one row a statement;")
	fmt.Println(" statement: the statement a lone append sends, with its RETURNING, by itself: \"stmt\" is what")
	fmt.Println(" is left of the raw rate before any of the store's own work)")
	fmt.Printf("%-8s %12s %12s %12s %12s %12s %7s %7s %7s %7s %8s\n", "writers", "append/s", "sealed/s", "raw insert/s", "events ins/s", "statement/s",
		"ratio", "sealed", "table", "stmt", "target")
	raw16, err := rawInserts(ctx, pool, 16, 0, *duration) // the baseline of the HTTP figure
	if err != nil {
		return 0, err
	}
	// Each of the five takes each place in a round twice (inTurns), for
	// four times -duration each: with one round each, of a quarter of it,
	// the one-writer ratio ranged from 0.64 to 0.82 from one run to the
	// next, the raw INSERT's rate alone from 8 175 to 11 304/s, as the
	// machine's speed moved within a round.
	const rounds = 10 // an odd number of kinds is balanced over twice as many rounds
	round := 4 * *duration / rounds
	_, _ = pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`) // for statementTimes, if preloaded
	for _, writers := range []int{1, 8, 32} {
		store := postgres.New(pool, nil)
		sealed := personal.NewStore(store, sealer)
		var stmtsBefore map[int64]stmtStat
		if writers == 1 {
			stmtsBefore = readStatements(ctx, pool)
		}
		each, err := inTurns(rounds, func(r int) (float64, error) {
			return rawInserts(ctx, pool, writers, r, round)
		}, func(r int) (float64, error) {
			return appends(ctx, store, "bench.appended", writers, r, round)
		}, func(r int) (float64, error) {
			return appends(ctx, sealed, "agent.created", writers, r, round)
		}, func(r int) (float64, error) {
			return eventsInserts(ctx, pool, writers, r, round)
		}, func(r int) (float64, error) {
			return appendStatements(ctx, pool, writers, r, round)
		})
		if err != nil {
			return 0, err
		}
		store.Close()
		rates := each.means()
		fmt.Printf("%-8d %12.0f %12.0f %12.0f %12.0f %12.0f %7.2f %7.2f %7.2f %7.2f %8s\n", writers, rates[1], rates[2], rates[0], rates[3], rates[4],
			rates[1]/rates[0], rates[2]/rates[0], rates[3]/rates[0], rates[4]/rates[0], ">= 0.80")
		fmt.Printf("         ratio %s; sealed %s; table %s; stmt %s\n", each.spread(1, 0), each.spread(2, 0), each.spread(3, 0), each.spread(4, 0))
		if writers == 1 {
			statementTimes(statementShares(stmtsBefore, readStatements(ctx, pool), 1))
		}
	}
	return raw16, nil
}

// httpPart measures projection lag and POST /agents on a database of its
// own: the server's projections must not first wade through other runs' events.
func httpPart(ctx context.Context, base string, raw16 float64) error {
	pool, dbName, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Println("\n## Projection lag: append -> row visible to a query (sequential appends)")
	if err := projectionLag(ctx, pool, base, dbName); err != nil {
		return err
	}
	fmt.Println("\n## POST /agents over HTTP, 16 concurrent clients, separate server process")
	return httpRun(ctx, base, dbName, raw16)
}

// measure runs op on workers goroutines for the configured duration and
// returns operations per second.
func measure(workers int, op func(worker, i int) error) (float64, error) {
	return measureFor(*duration, workers, op)
}

// measureFor is measure for d.
func measureFor(d time.Duration, workers int, op func(worker, i int) error) (float64, error) {
	var count atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				if err := op(w, i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(count.Load()) / time.Since(start).Seconds(), firstErr
}

var runID = uuid.NewString()[:8]

func payload() []byte {
	return []byte(`{"agent_id":1,"owner_id":1,"name":"Tutor","system_prompt":"Be kind","is_active":true}`)
}

// rawInserts and appends write streams of their own in each round.
func rawInserts(ctx context.Context, pool *pgxpool.Pool, writers, round int, d time.Duration) (float64, error) {
	return rowInserts(ctx, pool, "bench_raw", writers, round, d)
}

// eventsInserts is rawInserts into the events table: the same row, by the
// same single-row INSERT through pgx, with the table's own columns filled
// by their defaults (the position's sequence and transaction id) and its
// position index. No RETURNING, no check, no queue, no NOTIFY: none of
// the store's work.
func eventsInserts(ctx context.Context, pool *pgxpool.Pool, writers, round int, d time.Duration) (float64, error) {
	return rowInserts(ctx, pool, "events", writers, round, d)
}

// statementTimes prints what PostgreSQL's executor spent on each of the
// statements run most (pg_stat_statements, when preloaded): of a row's round
// trip, what the table and the statement cost the database.
func statementTimes(shares []stmtShare) {
	if len(shares) == 0 {
		return
	}
	fmt.Println("         PostgreSQL's execution alone, mean µs a call (pg_stat_statements; not the parse, bind, commit or round trip):")
	for _, s := range shares[:min(len(shares), 4)] {
		name := s.query
		for prefix, kind := range statementKinds {
			if strings.HasPrefix(s.query, prefix) {
				name = kind
			}
		}
		fmt.Printf("         %8.0f calls %6.1f µs  %s\n", s.perReq, s.meanUs, name)
	}
}

// statementKinds names the append part's statements by how their text
// begins (statementShares cuts it at 90 characters). The store's checked
// and batch statements begin as its lone append's does, but at one writer
// a stream's first append is the only one checked and none is batched: too
// few calls to be among the first four.
var statementKinds = map[string]string{
	"INSERT INTO bench_raw":               "raw insert",
	"INSERT INTO events (uuid, stream_id": "events ins",
	"INSERT INTO events (uuid, payload":   "the lone append's statement (append, sealed and statement)",
	"SELECT pg_notify":                    "a NOTIFY carried by an append (every 2 ms at most)",
}

// appendStatements sends the statement of a lone append at a version known
// to follow its stream's head (postgres.LoneAppendSQL), one a round trip,
// and reads what it returns: the store's append without the store (no
// encoding, queue, version bookkeeping or NOTIFY).
func appendStatements(ctx context.Context, pool *pgxpool.Pool, writers, round int, d time.Duration) (float64, error) {
	tag := fmt.Sprintf("stmt%d-%d-%s", writers, round, runID)
	return measureFor(d, writers, func(w, i int) error {
		var stream string
		var version int64
		var txid, offset uint64
		return pool.QueryRow(ctx, postgres.LoneAppendSQL, fmt.Sprintf("%s-%d", tag, w), int64(i), uuid.New(), payload(), []byte(benchMetadata),
			"bench.appended", int32(1), time.Now()).Scan(&stream, &version, &txid, &offset)
	})
}

// rowInserts inserts an event's row into table, one a statement.
func rowInserts(ctx context.Context, pool *pgxpool.Pool, table string, writers, round int, d time.Duration) (float64, error) {
	tag := fmt.Sprintf("%s%d-%d-%s", table, writers, round, runID)
	sql := `INSERT INTO ` + table + ` (uuid, stream_id, version, event_type, schema_version, payload, metadata, recorded_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	return measureFor(d, writers, func(w, i int) error {
		_, err := pool.Exec(ctx, sql, uuid.New(), fmt.Sprintf("%s-%d", tag, w), i+1, "bench.appended", 1, string(payload()), benchMetadata, time.Now())
		return err
	})
}

// benchMetadata is the appends' metadata as the store writes it.
const benchMetadata = `{"user_id":1,"request_id":"bench"}`

// appends appends payload() as events of eventType: as "agent.created", a
// sealing store seals its name and system prompt.
func appends(ctx context.Context, store eventstore.Store, eventType string, writers, round int, d time.Duration) (float64, error) {
	tag := fmt.Sprintf("bench%d-%d-%s-%s", writers, round, eventType, runID)
	return measureFor(d, writers, func(w, i int) error {
		_, err := store.Append(ctx, fmt.Sprintf("%s-%d", tag, w), eventstore.Exact(int64(i)), []eventstore.EventData{{
			ID: uuid.New(), Type: eventType, SchemaVersion: 1, Data: payload(),
			Metadata: eventstore.Metadata{UserID: 1, RequestID: "bench"},
		}})
		return err
	})
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64) + " ms"
}

// projectionLag runs a server process's projections and measures how long an
// agent event takes to become visible in the agents table.
func projectionLag(ctx context.Context, pool *pgxpool.Pool, base, dbName string) error {
	srv, err := startServer(ctx, base, dbName)
	if err != nil {
		return err
	}
	defer srv.stop()
	store := postgres.New(pool, nil)
	lags, baseline, err := measureLag(ctx, pool, store)
	if err != nil {
		return err
	}
	fmt.Printf("%-22s %10s %10s\n", "", "p50", "p99")
	fmt.Printf("%-22s %10s %10s   (target p50 < 5 ms, p99 < 25 ms)\n", "projection lag", ms(percentile(lags, .5)), ms(percentile(lags, .99)))
	fmt.Printf("%-22s %10s %10s   (baseline: the append's own latency)\n", "append latency", ms(percentile(baseline, .5)), ms(percentile(baseline, .99)))
	return nil
}

// measureLag appends agent events to store, one at a time, and times each
// until a running server's projection has it in pool's agents table; it
// returns the lags and the appends' own latencies, sorted.
func measureLag(ctx context.Context, pool *pgxpool.Pool, store eventstore.Store) (lags, appends []time.Duration, err error) {
	const samples = 400
	for i := range samples {
		id := int64(1_000_000 + i)
		data, _ := json.Marshal(map[string]any{"agent_id": id, "owner_id": 1, "name": "lag", "system_prompt": "p", "is_active": true})
		start := time.Now()
		if _, err := store.Append(ctx, eventstore.StreamName("agent", id), eventstore.NoStream, []eventstore.EventData{{
			ID: uuid.New(), Type: "agent.created", SchemaVersion: 1, Data: data,
		}}); err != nil {
			return nil, nil, err
		}
		appended := time.Now()
		for {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM agents WHERE id = $1`, id).Scan(&n); err != nil {
				return nil, nil, err
			}
			if n == 1 {
				break
			}
			if time.Since(appended) > 10*time.Second {
				return nil, nil, fmt.Errorf("agent %d never projected", id)
			}
		}
		lags = append(lags, time.Since(appended))
		appends = append(appends, appended.Sub(start))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	sort.Slice(appends, func(i, j int) bool { return appends[i] < appends[j] })
	return lags, appends, nil
}

type server struct {
	cmd  *exec.Cmd
	url  string
	dir  string
	logs *bytes.Buffer
	// jwtKey is the server's signing key (hex): the CRUD baseline, started
	// beside it, checks the same tokens.
	jwtKey string
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
	}
	_ = os.RemoveAll(s.dir)
}

// peakRSS is the server's peak resident set (VmHWM), in MiB.
func (s *server) peakRSS() (float64, error) { return peakRSS(s.cmd.Process.Pid) }

// peakRSS is process pid's VmHWM in MiB. Not wait4's ru_maxrss: Go starts a
// child with vfork, so that counts the bench's own memory at the start.
func peakRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, err := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmHWM")
}

var binary string

func build() (string, error) {
	if binary != "" {
		return binary, nil
	}
	dir, err := os.MkdirTemp("", "lectern-bench-bin")
	if err != nil {
		return "", err
	}
	binary = filepath.Join(dir, "lectern")
	// The bench's build: only it obeys LECTERN_BENCH_SKIP_SESSION_CHECK,
	// which the session check's measurement turns on and off.
	out, err := exec.Command("go", "build", "-tags", "lectern_bench", "-o", binary, "./cmd/lectern").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build: %w\n%s", err, out)
	}
	return binary, nil
}

// dbURL points DATABASE_URL at the bench's database.
func dbURL(base, dbName string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL: %w", err)
	}
	u.Path = "/" + dbName
	return u.String(), nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}

func startServer(ctx context.Context, base, dbName string, extraEnv ...string) (*server, error) {
	bin, err := build()
	if err != nil {
		return nil, err
	}
	dsn, err := dbURL(base, dbName)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dir, _ := os.MkdirTemp("", "lectern-bench")
	env := append(os.Environ(), "LECTERN_PPROF_ADDR="+os.Getenv("BENCH_PPROF_ADDR"), "DATABASE_URL="+dsn, "PORT="+port, "LECTERN_JWT_KEY="+hex.EncodeToString(key), "LECTERN_DATA_KEY="+benchDataKey, "LECTERN_LOG_LEVEL=warn",
		// The bench's users take turns and write as fast as the machine goes
		// (a budget this large still sells its leases of 64 KiB: the
		// budget's statements are measured).
		"LECTERN_TURNS_PER_MINUTE=1000000000", "LECTERN_WRITE_BYTES_PER_DAY=1000000000000")
	env = append(env, extraEnv...)
	// An operator account to log in with.
	create := exec.CommandContext(ctx, bin, "users", "create", "--email", "bench@example.com", "--name", "Bench", "--password", "bench-password", "--admin")
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil && !bytes.Contains(out, []byte("already")) {
		return nil, fmt.Errorf("users create: %w\n%s", err, out)
	}
	s, err := launch(exec.Command(bin, "serve"), env, port)
	if err != nil {
		return nil, err
	}
	s.dir, s.jwtKey = dir, hex.EncodeToString(key)
	return s, nil
}

// launch starts cmd with env, serving on port, and waits for its /healthz.
func launch(cmd *exec.Cmd, env []string, port string) (*server, error) {
	logs := &bytes.Buffer{}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, url: "http://127.0.0.1:" + port, logs: logs}
	for start := time.Now(); ; {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		if time.Since(start) > 20*time.Second {
			s.stop()
			return nil, fmt.Errorf("%s did not start:\n%s", cmd.Path, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func httpRun(ctx context.Context, base, dbName string, rawRate float64) error {
	srv, err := startServer(ctx, base, dbName)
	if err != nil {
		return err
	}
	rate, lat, err := postAgents(srv)
	if err != nil {
		srv.stop()
		return err
	}
	rss, err := srv.peakRSS()
	srv.stop()
	if err != nil {
		return err
	}
	fmt.Printf("%-26s %10s   %s\n", "requests", strconv.Itoa(len(lat)), "(each: auth, decide, append, projection applied before the response)")
	fmt.Printf("%-26s %10s   %s\n", "p50", ms(percentile(lat, .5)), "")
	fmt.Printf("%-26s %10s   %s\n", "p99", ms(percentile(lat, .99)), "(no target: crud's p99 ratio is)")
	fmt.Printf("%-26s %10.0f   %s\n", "throughput req/s", rate, "")
	fmt.Printf("%-26s %10.0f   %s\n", "raw INSERT/s (16 writers)", rawRate, "(baseline, same run)")
	fmt.Printf("%-26s %10.2f   %s\n", "ratio", rate/rawRate, "(withdrawn target, issue 21: no HTTP service reaches an in-process INSERT)")
	fmt.Printf("%-26s %10.1f   %s\n", "server peak RSS MiB", rss, "(target < 150 MiB)")

	// The per-request session check (revoked sessions, current roles): the
	// same load on a server without it, then with it again, so that the
	// machine's drift counts on both sides.
	fmt.Println("\n## POST /agents: cost of the per-request session and roles check (16 clients)")
	var with, without []float64
	for round := range 2 {
		for _, skip := range []bool{true, false} {
			if round == 0 && !skip {
				with = append(with, rate) // the run above
				continue
			}
			var extra []string
			if skip {
				extra = append(extra, "LECTERN_BENCH_SKIP_SESSION_CHECK=1")
			}
			srv, err := startServer(ctx, base, dbName, extra...)
			if err != nil {
				return err
			}
			r, _, err := postAgents(srv)
			srv.stop()
			if err != nil {
				return err
			}
			if skip {
				without = append(without, r)
			} else {
				with = append(with, r)
			}
		}
	}
	on, off := mean(with), mean(without)
	fmt.Printf("%-26s %10.0f   %s\n", "with the check req/s", on, fmt.Sprintf("(runs %.0f)", with))
	fmt.Printf("%-26s %10.0f   %s\n", "without it req/s", off, fmt.Sprintf("(runs %.0f)", without))
	fmt.Printf("%-26s %10.3f   %s\n", "ratio", on/off, "(target >= 0.95)")
	return nil
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// postAgents drives POST /agents from 16 clients and returns the rate and
// every request's latency, sorted.
func postAgents(srv *server) (float64, []time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	token, err := srv.login(client)
	if err != nil {
		return 0, nil, err
	}
	post := func() (time.Duration, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.url+"/agents", strings.NewReader(`{"name":"Tutor","system_prompt":"Be kind and precise."}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Projection-Pending") != "" {
			return 0, fmt.Errorf("POST /agents: %d pending=%q", resp.StatusCode, resp.Header.Get("X-Projection-Pending"))
		}
		return time.Since(start), nil
	}
	for range 200 { // warm-up
		if _, err := post(); err != nil {
			return 0, nil, err
		}
	}
	var mu sync.Mutex
	var lat []time.Duration
	rate, err := measure(16, func(int, int) error {
		d, err := post()
		if err != nil {
			return err
		}
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return rate, lat, nil
}

// login logs the bench's administrator in.
func (s *server) login(client *http.Client) (string, error) {
	resp, err := client.Post(s.url+"/user/login", "application/json", strings.NewReader(`{"email":"bench@example.com","password":"bench-password"}`))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tokens struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tokens); err != nil || tokens.AccessToken == "" {
		return "", fmt.Errorf("login: %w (status %d)", err, resp.StatusCode)
	}
	return tokens.AccessToken, nil
}
