package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/pgtest"
	"lectern/queries"
)

// profileDir, if set, is where parts write profiles of what they measure:
// the crud part the Lectern server's CPU and allocations under POST /agents
// load (with their top lines printed), the replay and export parts the CPU
// profile of the measured phase (replay.prof, export.prof; -cpuprofile
// covers the log's filling too).
var profileDir = flag.String("profile", "", "save profiles of the measured phases in this directory: crud (the server's cpu.pprof, allocs.pprof), replay.prof, export.prof")

// The CRUD baseline (cmd/lectern-bench/crudbase): the same bearer check
// and JSON as Lectern, one INSERT … RETURNING per POST /agents, the session
// list's page SQL for GET /user/practice/sessions.

var crudBinary string

func buildCRUD() (string, error) {
	if crudBinary != "" {
		return crudBinary, nil
	}
	dir, err := os.MkdirTemp("", "lectern-bench-crud")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "crudbase")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/lectern-bench/crudbase").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build crudbase: %w\n%s", err, out)
	}
	crudBinary = bin
	return bin, nil
}

// startCRUD starts the baseline on Lectern's database with Lectern's
// signing key; tokenOnly: without the session and roles query.
func startCRUD(base, dbName, jwtKey string, tokenOnly bool) (*server, error) {
	bin, err := buildCRUD()
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
	env := append(os.Environ(), "DATABASE_URL="+dsn, "PORT="+port, "LECTERN_JWT_KEY="+jwtKey)
	if tokenOnly {
		env = append(env, "CRUD_TOKEN_ONLY=1")
	}
	return launch(exec.Command(bin), env, port)
}

// scrapeAcquires reads Lectern's pool acquire counters from its metrics
// address, by pool.
func scrapeAcquires(addr string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	const prefix = `lectern_db_pool_acquires_total{pool="`
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		name, rest, ok := strings.Cut(line[len(prefix):], `"} `)
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// jsonKeys is the sorted key set of a JSON object.
func jsonKeys(raw []byte) ([]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, nil
}

// sameShape fails unless Lectern's and the baseline's answers to one
// request have the same status and the same top-level keys (and, with item,
// the same keys in their first "items" element).
func sameShape(client *http.Client, method, lecternURL, crudURL, token, body string, item bool) error {
	get := func(url string) (int, []byte, error) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	ls, lb, err := get(lecternURL)
	if err != nil {
		return err
	}
	cs, cb, err := get(crudURL)
	if err != nil {
		return err
	}
	lk, err1 := jsonKeys(lb)
	ck, err2 := jsonKeys(cb)
	if ls != cs || err1 != nil || err2 != nil || !slices.Equal(lk, ck) {
		return fmt.Errorf("CRUD baseline answers %d %s, Lectern %d %s", cs, cb, ls, lb)
	}
	if item {
		var l, c struct{ Items []json.RawMessage }
		_ = json.Unmarshal(lb, &l)
		_ = json.Unmarshal(cb, &c)
		if len(l.Items) == 0 || len(c.Items) == 0 {
			return fmt.Errorf("empty page: Lectern %d items, CRUD %d", len(l.Items), len(c.Items))
		}
		lk, err1 = jsonKeys(l.Items[0])
		ck, err2 = jsonKeys(c.Items[0])
		if err1 != nil || err2 != nil || !slices.Equal(lk, ck) || len(l.Items) != len(c.Items) {
			return fmt.Errorf("CRUD baseline's items differ: %s vs Lectern's %s", c.Items[0], l.Items[0])
		}
	}
	return nil
}

// crudPart compares POST /agents with the CRUD baseline on one database,
// the servers loaded in turn by one client.
func crudPart(ctx context.Context, base string) error {
	pool, dbName, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	pprofPort, err := freePort()
	if err != nil {
		return err
	}
	metricsAddr, pprofAddr := "127.0.0.1:"+metricsPort, "127.0.0.1:"+pprofPort
	lec, err := startServer(ctx, base, dbName, "LECTERN_METRICS_ADDR="+metricsAddr, "LECTERN_PPROF_ADDR="+pprofAddr)
	if err != nil {
		return err
	}
	defer lec.stop()
	const workers = 16
	client := loadClient(workers)
	token, err := lec.login(client)
	if err != nil {
		return err
	}
	crud, err := startCRUD(base, dbName, lec.jwtKey, false)
	if err != nil {
		return err
	}
	defer crud.stop()
	crudTok, err := startCRUD(base, dbName, lec.jwtKey, true)
	if err != nil {
		return err
	}
	defer crudTok.stop()

	const body = `{"name":"Tutor","system_prompt":"Be kind and precise."}`
	if err := sameShape(client, http.MethodPost, lec.url+"/agents", crud.url+"/agents", token, body, false); err != nil {
		return err
	}
	postTo := func(url string, lectern bool) func() error {
		return func() error {
			h, err := hit(client, http.MethodPost, url+"/agents", token, body, http.StatusCreated)
			if err == nil && lectern && (h.Get("X-Projection-Pending") != "" || h.Get("X-Event-Position") == "") {
				err = fmt.Errorf("POST /agents: read model not applied before the response (pending=%q)", h.Get("X-Projection-Pending"))
			}
			return err
		}
	}
	mLec := newMeter(ctx, pool, lec.cmd.Process.Pid)
	mLec.scrape = func() map[string]float64 { return scrapeAcquires(metricsAddr) }
	mCRUD := newMeter(ctx, pool, crud.cmd.Process.Pid)
	mTok := newMeter(ctx, pool, crudTok.cmd.Process.Pid)

	fmt.Printf("\n## POST /agents vs a plain CRUD server (net/http + pgx, one INSERT … RETURNING), %d connections\n", workers)
	fmt.Println("(both separate processes on one database, the same bearer check and JSON, loaded in turn by one Go client)")
	printRunsHeader()
	var lecRuns, crudRuns, tokRuns []loadRun
	for round := range 2 {
		r, err := mLec.run(ctx, fmt.Sprintf("lectern #%d", round+1), workers, 200, *duration, postTo(lec.url, true))
		if err != nil {
			return err
		}
		printRun(r)
		lecRuns = append(lecRuns, r)
		if r, err = mCRUD.run(ctx, fmt.Sprintf("crud #%d", round+1), workers, 200, *duration, postTo(crud.url, false)); err != nil {
			return err
		}
		printRun(r)
		crudRuns = append(crudRuns, r)
		if r, err = mTok.run(ctx, fmt.Sprintf("crud token-only #%d", round+1), workers, 200, *duration, postTo(crudTok.url, false)); err != nil {
			return err
		}
		printRun(r)
		tokRuns = append(tokRuns, r)
	}
	l, c, t := pooled("lectern (all runs)", lecRuns), pooled("crud (all runs)", crudRuns), pooled("crud token-only (all)", tokRuns)
	printRun(l)
	printRun(c)
	printRun(t)
	printRunsLegend()
	fmt.Printf("%-40s %8.2f   (target >= 0.80)\n", "throughput lectern / crud", l.rate/c.rate)
	fmt.Printf("%-40s %8.2f   (target <= 1.50)\n", "p99 lectern / crud", ratioDur(percentile(l.lat, .99), percentile(c.lat, .99)))
	fmt.Printf("%-40s %8.2f   (secondary: the baseline without the session query)\n", "throughput lectern / crud token-only", l.rate/t.rate)
	fmt.Printf("%-40s %8.2f\n", "p99 lectern / crud token-only", ratioDur(percentile(l.lat, .99), percentile(t.lat, .99)))
	for _, pool := range []string{"main", "projections", "downstream"} {
		if v, ok := l.extra[pool]; ok {
			fmt.Printf("%-40s %8.2f\n", "lectern pool acquires/request ("+pool+")", v)
		}
	}
	if rss, err := lec.peakRSS(); err == nil {
		crss, _ := crud.peakRSS()
		fmt.Printf("%-40s %8.1f   (target < 150 MiB; crud %.1f MiB)\n", "lectern server peak RSS MiB", rss, crss)
	}
	if len(lecRuns[len(lecRuns)-1].topStmts) > 0 {
		fmt.Println("\nLectern's statements per POST /agents (pg_stat_statements, last lectern run):")
		fmt.Printf("%8s %10s  %s\n", "calls/req", "mean µs", "statement")
		for _, s := range lecRuns[len(lecRuns)-1].topStmts {
			fmt.Printf("%8.2f %10.0f  %s\n", s.perReq, s.meanUs, s.query)
		}
	}
	if *profileDir != "" {
		return profilePOST(lec, pprofAddr, workers, postTo(lec.url, true))
	}
	return nil
}

func ratioDur(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// profilePOST loads Lectern's server with POST /agents while its CPU and
// allocation profiles are taken (a run of its own: profiling slows it), saves
// them under -profile and prints their top lines.
func profilePOST(lec *server, pprofAddr string, workers int, op func() error) error {
	if err := os.MkdirAll(*profileDir, 0o755); err != nil {
		return err
	}
	secs := max(1, int(math.Ceil(duration.Seconds())))
	for range 200 {
		if err := op(); err != nil {
			return err
		}
	}
	kinds := []struct{ file, path string }{
		{"cpu.pprof", fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs)},
		{"allocs.pprof", fmt.Sprintf("/debug/pprof/allocs?seconds=%d", secs)},
	}
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get("http://" + pprofAddr + k.path)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %d %s", k.path, resp.StatusCode, b)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(*profileDir, k.file), b, 0o644)
			}
			errs[i] = err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	rate, err := measureFor(time.Duration(secs)*time.Second+500*time.Millisecond, workers, func(int, int) error { return op() })
	wg.Wait()
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	fmt.Printf("\n## Lectern server profiles under POST /agents (%d clients, %.0f req/s while profiled), saved in %s\n", workers, rate, *profileDir)
	bin, err := build()
	if err != nil {
		return err
	}
	for _, p := range []struct{ file, title string }{{"cpu.pprof", "CPU"}, {"allocs.pprof", "allocated bytes"}} {
		args := []string{"tool", "pprof", "-top", "-nodecount=15"}
		if p.file == "allocs.pprof" {
			args = append(args, "-sample_index=alloc_space")
		}
		out, err := exec.Command("go", append(args, bin, filepath.Join(*profileDir, p.file))...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof: %w\n%s", err, out)
		}
		fmt.Printf("### %s (go tool pprof -top)\n%s", p.title, out)
	}
	return nil
}

// listBaselines compares GET /user/practice/sessions on srv with its page
// SQL issued straight with pgx and with the CRUD baseline serving the same
// page, all at 32 concurrent clients, in turn.
func listBaselines(ctx context.Context, pool *pgxpool.Pool, srv *server, token string, userID int64) error {
	dbName := pool.Config().ConnConfig.Database
	crud, err := startCRUD(os.Getenv("DATABASE_URL"), dbName, srv.jwtKey, false)
	if err != nil {
		return err
	}
	defer crud.stop()
	const workers = 32
	client := loadClient(workers)
	if err := sameShape(client, http.MethodGet, srv.url+"/user/practice/sessions", crud.url+"/user/practice/sessions", token, "", true); err != nil {
		return err
	}
	// The servers' pool size (cmd/lectern connect), so that the SQL meets
	// the database as the servers' does.
	cfg := pool.Config().Copy()
	cfg.MaxConns = int32(max(4, 2*runtime.NumCPU()))
	sqlPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer sqlPool.Close()
	pageSQL := func() error {
		rows, err := sqlPool.Query(ctx, queries.SessionsPageSQL, userID, 50, 0)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			var (
				total, id, user       int64
				class, project, agent *int64
				knowledge             []int64
				title, notes          *string
				createdAt, updatedAt  time.Time
			)
			if err := rows.Scan(&total, &id, &user, &class, &project, &agent, &knowledge, &title, &notes, &createdAt, &updatedAt); err != nil {
				rows.Close()
				return err
			}
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if n != 50 {
			return fmt.Errorf("page SQL: %d rows", n)
		}
		return nil
	}
	get := func(url string) func() error {
		return func() error {
			_, err := hit(client, http.MethodGet, url+"/user/practice/sessions", token, "", http.StatusOK)
			return err
		}
	}
	mLec := newMeter(ctx, pool, srv.cmd.Process.Pid)
	mSQL := newMeter(ctx, pool, 0)
	mCRUD := newMeter(ctx, pool, crud.cmd.Process.Pid)
	fmt.Printf("\n## GET /user/practice/sessions vs its page SQL (pgx, pool of %d like the servers') and a CRUD handler, %d clients\n",
		cfg.MaxConns, workers)
	printRunsHeader()
	var lecRuns, sqlRuns, crudRuns []loadRun
	for round := range 2 {
		r, err := mLec.run(ctx, fmt.Sprintf("lectern #%d", round+1), workers, 100, *duration, get(srv.url))
		if err != nil {
			return err
		}
		printRun(r)
		lecRuns = append(lecRuns, r)
		if r, err = mSQL.run(ctx, fmt.Sprintf("page SQL #%d", round+1), workers, 100, *duration, pageSQL); err != nil {
			return err
		}
		printRun(r)
		sqlRuns = append(sqlRuns, r)
		if r, err = mCRUD.run(ctx, fmt.Sprintf("crud #%d", round+1), workers, 100, *duration, get(crud.url)); err != nil {
			return err
		}
		printRun(r)
		crudRuns = append(crudRuns, r)
	}
	l, s, c := pooled("lectern (all runs)", lecRuns), pooled("page SQL (all runs)", sqlRuns), pooled("crud (all runs)", crudRuns)
	printRun(l)
	printRun(s)
	printRun(c)
	printRunsLegend()
	fmt.Printf("%-40s %8.2f   (target <= 1.50)\n", "p99 lectern / page SQL", ratioDur(percentile(l.lat, .99), percentile(s.lat, .99)))
	fmt.Printf("%-40s %8.2f   (target >= 0.80)\n", "throughput lectern / crud", l.rate/c.rate)
	fmt.Printf("%-40s %8.2f\n", "p99 lectern / crud", ratioDur(percentile(l.lat, .99), percentile(c.lat, .99)))
	return nil
}
