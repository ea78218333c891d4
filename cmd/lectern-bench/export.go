package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/history"
	"lectern/personal"
	"lectern/pgtest"
)

// exportSizes are the logs the export is measured on: its memory must not
// grow with the log.
var exportSizes = []int{100_000, 1_000_000}

// exportBench measures `lectern events export` beside PostgreSQL's own
// COPY ... TO of the same rows, on the replay's log (fillLog) at each of
// exportSizes, and the export's peak memory at each.
func exportBench(ctx context.Context, base string) error {
	pool, dbName, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	key, err := hex.DecodeString(benchDataKey)
	if err != nil {
		return err
	}
	fmt.Println("## Export (lectern events export) vs COPY (SELECT the same columns ORDER BY position) TO STDOUT")
	fmt.Printf("%-10s %12s %12s %8s %8s %12s %10s %12s %12s %12s\n", "events", "export/s", "COPY rows/s", "ratio", "target",
		"CLI events/s", "CLI ratio", "paged/s", "peak heap", "CLI peak RSS")
	have := 0
	for _, n := range exportSizes {
		start := time.Now()
		if err := fillLogFrom(ctx, pool, have, n, nil); err != nil {
			return err
		}
		have = n
		fill := time.Since(start)
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE events`); err != nil {
			return err
		}
		// Rounds alternate the two, so that the machine's drift weighs on both.
		const rounds = 2
		cpu := newCPUMeter(ctx, pool)
		var copyUsed, exportUsed cpuTimes
		var copyRate, exportRate, plannedRate, binaryRate float64
		var heap uint64
		for round := range rounds {
			// The baseline is the faster of the planner's plan and the
			// primary key's order.
			planned, err := copyOut(ctx, pool, n, false, false)
			if err != nil {
				return err
			}
			bin, err := copyOut(ctx, pool, n, true, true)
			if err != nil {
				return err
			}
			t := cpu.now()
			c, err := copyOut(ctx, pool, n, true, false)
			if err != nil {
				return err
			}
			copyUsed = add(copyUsed, cpu.since(t))
			plannedRate += planned / rounds
			binaryRate += bin / rounds
			c = max(c, planned, bin)
			t = cpu.now()
			var e float64
			var h uint64
			measure := func() (err error) {
				e, h, err = exportInProcess(ctx, pool, key, n)
				return err
			}
			if n == exportSizes[len(exportSizes)-1] && round == 0 {
				err = profiled("export.prof", measure)
			} else {
				err = measure()
			}
			if err != nil {
				return err
			}
			exportUsed = add(exportUsed, cpu.since(t))
			copyRate += c / rounds
			exportRate += e / rounds
			heap = max(heap, h)
		}
		cliRate, rss, err := exportCLI(ctx, base, dbName, n)
		if err != nil {
			return err
		}
		pagedRate, _, err := exportWith(ctx, pool, key, n, true)
		if err != nil {
			return err
		}
		fmt.Printf("%-10d %12.0f %12.0f %8.2f %8s %12.0f %10.2f %12.0f %8.1f MiB %8.1f MiB   (log written in %s)\n", n, exportRate, copyRate,
			exportRate/copyRate, ">= 0.80", cliRate, cliRate/copyRate, pagedRate, float64(heap)/(1<<20), rss, fill.Round(time.Millisecond))
		fmt.Printf("%-10s export %s; COPY in index order %s (both rounds)\n", "", exportUsed, copyUsed)
		fmt.Printf("%-10s COPY as planned %.0f rows/s; COPY in index order, binary %.0f rows/s\n", "", plannedRate, binaryRate)
	}
	fmt.Println("  COPY rows/s: the fastest of COPY as the planner plans it, and COPY in the primary key's order (no sort),")
	fmt.Println("  in text and in binary format, each round;")
	fmt.Println("  export/s: history.Export in this process into io.Discard, with the CLI's store (personal fields opened);")
	fmt.Println("  CLI: the lectern binary's `events export -o /dev/null`, start to exit; peak heap: the in-process")
	fmt.Println("  export's peak HeapInuse above the heap before it; CLI peak RSS: the child's VmHWM (/proc, polled);")
	fmt.Println("  paged/s: the same export through ReadAll pages and encoding/json (the way before the store scanned).")
	fmt.Println()
	return nil
}

// exportColumns are the columns the export reads, as the store reads them.
const exportColumns = `uuid, stream_id, version, transaction_id::text, "offset", event_type, schema_version, payload::text, metadata::text, recorded_at`

// copyOut copies the log's rows out in log order through COPY ... TO into
// io.Discard, and returns rows per second. With indexOrder the sort is
// turned off, so the rows come in the primary key's order (the export's
// plan) rather than the planner's choice, which may sort the whole table.
func copyOut(ctx context.Context, pool *pgxpool.Pool, n int, indexOrder, binary bool) (float64, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	sort := "on"
	if indexOrder {
		sort = "off"
	}
	if _, err := conn.Exec(ctx, "SET enable_sort = "+sort); err != nil {
		return 0, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET enable_sort") }()
	format := ""
	if binary {
		format = " (FORMAT binary)"
	}
	start := time.Now()
	tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard,
		`COPY (SELECT `+exportColumns+` FROM events ORDER BY transaction_id, "offset") TO STDOUT`+format)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() != int64(n) {
		return 0, fmt.Errorf("COPY TO: %d rows, want %d", tag.RowsAffected(), n)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// exportInProcess runs the export `lectern events export` runs, with its
// store (openOpenedEventStore's), into io.Discard; it returns events per
// second and the peak of HeapInuse above its level before the export.
func exportInProcess(ctx context.Context, pool *pgxpool.Pool, key []byte, n int) (float64, uint64, error) {
	return exportWith(ctx, pool, key, n, false)
}

// exportWith is exportInProcess, through the store's pages (ReadAll) and
// encoding/json when paged, as before the store scanned its log.
func exportWith(ctx context.Context, pool *pgxpool.Pool, key []byte, n int, paged bool) (float64, uint64, error) {
	keys, err := personal.NewKeys(pool, key)
	if err != nil {
		return 0, 0, err
	}
	pg := postgres.New(pool, nil)
	defer pg.Close()
	var store eventstore.Store = personal.NewStore(pg, personal.NewSealer(keys))
	if paged {
		store = pagedStore{store.(*personal.Store)}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	peak := before
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	})
	start := time.Now()
	got, err := history.Export(ctx, store, io.Discard, history.Filter{})
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return 0, 0, err
	}
	if got != n {
		return 0, 0, fmt.Errorf("export: %d events, want %d", got, n)
	}
	return float64(n) / elapsed.Seconds(), peak - before, nil
}

// exportCLI runs `lectern events export -o /dev/null` on the bench's
// database; it returns events per second (the process's start to its exit)
// and its peak RSS in MiB.
func exportCLI(ctx context.Context, base, dbName string, n int) (float64, float64, error) {
	bin, err := build()
	if err != nil {
		return 0, 0, err
	}
	dsn, err := dbURL(base, dbName)
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.CommandContext(ctx, bin, "events", "export", "-o", os.DevNull)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "LECTERN_DATA_KEY="+benchDataKey, "LECTERN_LOG_LEVEL=warn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	// The child's high-water mark, read until it exits (its /proc entry
	// goes with it).
	var rss float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := peakRSS(cmd.Process.Pid)
			if err != nil {
				return
			}
			rss = max(rss, r)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err = cmd.Wait()
	elapsed := time.Since(start)
	<-done
	if err != nil {
		return 0, 0, fmt.Errorf("lectern events export: %w\n%s", err, stderr.String())
	}
	if want := fmt.Sprintf("exported %d events", n); !strings.Contains(stderr.String(), want) {
		return 0, 0, fmt.Errorf("lectern events export: want %q in\n%s", want, stderr.String())
	}
	return float64(n) / elapsed.Seconds(), rss, nil
}

// profiled runs f, under a CPU profile written to name in profileDir if set.
func profiled(name string, f func() error) error {
	if *profileDir == "" {
		return f()
	}
	file, err := os.Create(filepath.Join(*profileDir, name))
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	if err := pprof.StartCPUProfile(file); err != nil {
		return fmt.Errorf("-profile: %w (not with -cpuprofile)", err)
	}
	defer pprof.StopCPUProfile()
	return f()
}

// pagedStore hides the personal store's ScanAll.
type pagedStore struct{ *personal.Store }

func (p pagedStore) LogEnd(ctx context.Context) (eventstore.Position, error) {
	return p.Store.LogEnd(ctx)
}

// ScanAll hides the store's.
func (pagedStore) ScanAll(context.Context, eventstore.Position, eventstore.Position, int, func(*eventstore.RawEvent) error) (int, error) {
	return 0, eventstore.ErrScanUnsupported
}

func add(a, b cpuTimes) cpuTimes {
	return cpuTimes{client: a.client + b.client, server: a.server + b.server}
}
