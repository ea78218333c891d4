package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A load run's figures: each request's latency, and what the run cost the
// client (this process), the server process and the PostgreSQL cluster,
// per request, read from the kernel and the database around it.
type loadRun struct {
	label     string
	rate      float64
	lat       []time.Duration    // sorted
	clientCPU time.Duration      // per request: this process's user+system time
	serverCPU time.Duration      // per request; 0 when unknown
	dbCPU     time.Duration      // per request: the cluster's processes; 0 when unknown
	commits   float64            // per request: pg_stat_database.xact_commit
	xids      float64            // per request: transactions that wrote (xids assigned)
	stmts     float64            // per request: pg_stat_statements calls; -1 when not loaded
	walBytes  float64            // per request
	extra     map[string]float64 // per request: the meter's scraped counters
	topStmts  []stmtShare        // the statements run most per request; nil without pg_stat_statements
}

// stmtShare is one statement's share of a run, from pg_stat_statements.
type stmtShare struct {
	query  string
	perReq float64
	meanUs float64
}

type stmtStat struct {
	query   string
	calls   int64
	totalMs float64
}

// loadClient is the bench's load generator: net/http with keep-alive and
// enough idle connections for every worker.
func loadClient(workers int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * workers, MaxIdleConns: 4 * workers,
		DisableCompression: true}}
}

// hit sends one request with a bearer token and reads the body to its end
// (the connection goes back to the pool); it fails unless the status is
// want.
func hit(client *http.Client, method, url, token, body string, want int) (http.Header, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: status %d, want %d", method, url, resp.StatusCode, want)
	}
	return resp.Header, nil
}

// meter reads the counters a loadRun is the difference of.
type meter struct {
	db        *pgxpool.Pool // the bench's own connection to the database under load
	serverPID int           // 0: no server process (the SQL baseline)
	postmastr int           // 0: the cluster's processes cannot be read
	pgss      bool          // pg_stat_statements is loaded
	// scrape, if set, reads counters of the server (per pool acquires).
	scrape func() map[string]float64
}

type reading struct {
	at                   time.Time
	client, server, pg   time.Duration
	commits, xid, wal    int64
	stmts                int64
	serverOK, pgOK, dbOK bool
	extra                map[string]float64
	perQuery             map[int64]stmtStat
}

// newMeter finds the cluster's postmaster (the parent of a backend) and
// whether pg_stat_statements can be read.
func newMeter(ctx context.Context, db *pgxpool.Pool, serverPID int) *meter {
	m := &meter{db: db, serverPID: serverPID}
	var backend int
	if err := db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err == nil {
		if ppid, ok := parentPID(backend); ok {
			m.postmastr = ppid
		}
	}
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err == nil {
		var n int64
		m.pgss = db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_statements`).Scan(&n) == nil
	}
	return m
}

func (m *meter) read(ctx context.Context) reading {
	r := reading{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		r.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if m.serverPID != 0 {
		r.server, r.serverOK = procCPU(m.serverPID)
	}
	if m.postmastr != 0 {
		r.pg, r.pgOK = clusterCPU(m.postmastr)
	}
	err := m.db.QueryRow(ctx, `SELECT xact_commit, pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
			(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&r.commits, &r.xid, &r.wal)
	r.dbOK = err == nil
	if m.pgss {
		if err := m.db.QueryRow(ctx, `SELECT COALESCE(sum(calls), 0)::bigint FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&r.stmts); err != nil {
			r.stmts = -1
		}
		r.perQuery = readStatements(ctx, m.db)
	}
	if m.scrape != nil {
		r.extra = m.scrape()
	}
	return r
}

// statsSettle is how long the bench waits around a run before reading
// pg_stat_database: backends publish their counts when idle, at most once a
// second (PostgreSQL 15's PGSTAT_MIN_INTERVAL).
const statsSettle = 1200 * time.Millisecond

// run drives op from workers goroutines for d after a warm-up of warm
// requests, and returns the figures.
func (m *meter) run(ctx context.Context, label string, workers, warm int, d time.Duration, op func() error) (loadRun, error) {
	for range warm {
		if err := op(); err != nil {
			return loadRun{}, err
		}
	}
	time.Sleep(statsSettle)
	before := m.read(ctx)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, 1<<14)
	rate, err := measureFor(d, workers, func(int, int) error {
		t := time.Now()
		if err := op(); err != nil {
			return err
		}
		el := time.Since(t)
		mu.Lock()
		lat = append(lat, el)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return loadRun{}, err
	}
	loadEnd := m.read(ctx) // CPU: the load alone
	time.Sleep(statsSettle)
	after := m.read(ctx) // the database's counters, published
	n := len(lat)
	if n == 0 {
		return loadRun{}, errors.New("no request completed")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := loadRun{label: label, rate: rate, lat: lat, stmts: -1,
		clientCPU: (loadEnd.client - before.client) / time.Duration(n)}
	if before.serverOK && loadEnd.serverOK {
		r.serverCPU = (loadEnd.server - before.server) / time.Duration(n)
	}
	if before.pgOK && loadEnd.pgOK {
		r.dbCPU = (loadEnd.pg - before.pg) / time.Duration(n)
	}
	if before.dbOK && after.dbOK {
		r.commits = float64(after.commits-before.commits) / float64(n)
		r.xids = float64(after.xid-before.xid) / float64(n)
		r.walBytes = float64(after.wal-before.wal) / float64(n)
	}
	if m.pgss && before.stmts >= 0 && after.stmts >= 0 {
		r.stmts = float64(after.stmts-before.stmts) / float64(n)
		r.topStmts = statementShares(before.perQuery, after.perQuery, n)
	}
	if before.extra != nil && after.extra != nil {
		r.extra = map[string]float64{}
		for k, v := range after.extra {
			r.extra[k] = (v - before.extra[k]) / float64(n)
		}
	}
	return r, nil
}

// readStatements reads pg_stat_statements for the current database.
func readStatements(ctx context.Context, db *pgxpool.Pool) map[int64]stmtStat {
	rows, err := db.Query(ctx, `SELECT queryid, query, calls, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := map[int64]stmtStat{}
	for rows.Next() {
		var id int64
		var s stmtStat
		if rows.Scan(&id, &s.query, &s.calls, &s.totalMs) == nil {
			out[id] = s
		}
	}
	return out
}

// statementShares is the fifteen statements with the most calls between two
// readings, per request.
func statementShares(before, after map[int64]stmtStat, n int) []stmtShare {
	var out []stmtShare
	for id, a := range after {
		b := before[id]
		calls := a.calls - b.calls
		if calls <= 0 {
			continue
		}
		q := strings.Join(strings.Fields(a.query), " ")
		if len(q) > 90 {
			q = q[:90] + "…"
		}
		out = append(out, stmtShare{query: q, perReq: float64(calls) / float64(n), meanUs: (a.totalMs - b.totalMs) * 1000 / float64(calls)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].perReq > out[j].perReq })
	return out[:min(len(out), 15)]
}

func us(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(d.Nanoseconds())/1000, 'f', 0, 64)
}

func perReq(x float64) string {
	if x < 0 {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// printRunsHeader and printRun write one line per run.
func printRunsHeader() {
	fmt.Printf("%-22s %8s %9s %9s %8s %8s %8s %8s %8s %8s %8s\n", "run", "req/s", "p50", "p99",
		"cli µs", "srv µs", "pg µs", "~commits", "xids", "stmts", "WAL B")
}

func printRun(r loadRun) {
	fmt.Printf("%-22s %8.0f %9s %9s %8s %8s %8s %8s %8s %8s %8.0f\n", r.label, r.rate, ms(percentile(r.lat, .5)),
		ms(percentile(r.lat, .99)), us(r.clientCPU), us(r.serverCPU), us(r.dbCPU), perReq(r.commits), perReq(r.xids),
		perReq(r.stmts), r.walBytes)
}

func printRunsLegend() {
	fmt.Println("(per request: cli/srv/pg µs = CPU time of this load generator / the server process / the PostgreSQL")
	fmt.Println(" cluster's processes during the load; ~commits = pg_stat_database.xact_commit, read and write, rough:")
	fmt.Println(" an idle backend may publish its counts up to 10 s late; xids = transactions that wrote, exact: each")
	fmt.Println(" is a commit that waits for its WAL; stmts = pg_stat_statements calls incl. BEGIN/COMMIT, '-' when the")
	fmt.Println(" cluster does not preload it (LECTERN_PG_PRELOAD=pg_stat_statements); WAL B = WAL bytes)")
}

// pooled merges runs of one kind: mean rate, latencies together.
func pooled(label string, runs []loadRun) loadRun {
	out := loadRun{label: label, extra: map[string]float64{}}
	var cli, srv, pg time.Duration
	for _, r := range runs {
		for k, v := range r.extra {
			out.extra[k] += v / float64(len(runs))
		}
		out.rate += r.rate / float64(len(runs))
		out.lat = append(out.lat, r.lat...)
		out.commits += r.commits / float64(len(runs))
		out.xids += r.xids / float64(len(runs))
		out.stmts += r.stmts / float64(len(runs))
		out.walBytes += r.walBytes / float64(len(runs))
		cli += r.clientCPU / time.Duration(len(runs))
		srv += r.serverCPU / time.Duration(len(runs))
		pg += r.dbCPU / time.Duration(len(runs))
	}
	out.clientCPU, out.serverCPU, out.dbCPU = cli, srv, pg
	sortDurations(out.lat)
	return out
}

// statFields are /proc/PID/stat's fields after the command name (which may
// hold spaces): [0] state, [1] ppid, [11] utime, [12] stime, [13] cutime,
// [14] cstime, in clock ticks.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(b[i+1:]))
	return f, len(f) > 14
}

// ticks sums the clock-tick fields of f at is.
func ticks(f []string, is ...int) (time.Duration, bool) {
	var sum int64
	for _, i := range is {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += n
	}
	return time.Duration(sum) * time.Second / clockTicks, true
}

// procCPU is a process's user+system time.
func procCPU(pid int) (time.Duration, bool) {
	f, ok := statFields(pid)
	if !ok {
		return 0, false
	}
	return ticks(f, 11, 12)
}

func parentPID(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// clusterCPU sums the CPU time of a postmaster, of its children gone (a
// backend that exited), and of each living child (backends, WAL writer,
// checkpointer, …).
func clusterCPU(postmaster int) (time.Duration, bool) {
	f, ok := statFields(postmaster)
	if !ok {
		return 0, false
	}
	total, ok := ticks(f, 11, 12, 13, 14)
	if !ok {
		return 0, false
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, false
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == postmaster {
			continue
		}
		if ppid, ok := parentPID(pid); ok && ppid == postmaster {
			if t, ok := procCPU(pid); ok {
				total += t
			}
		}
	}
	return total, true
}
