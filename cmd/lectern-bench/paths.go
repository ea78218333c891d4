package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
	"lectern/projections"
	"lectern/service"
)

// The projections apply events three ways: one at a time under a savepoint
// (a live projection's careful polls, and every event before live batches),
// live batches (a poll's events set-wise, projections/livebatch.go) and a
// replay's loaders (projections.Loader). The last two are second paths kept
// for speed: each is measured here against the path it stands in for, in
// one run, the two alternated (on, off, off, on) so that a drift of the
// machine's speed weighs on both alike.
const (
	pathsBurst  = 40_000  // events of the live burst
	pathsReplay = 200_000 // events of the replayed log
)

var pathsOrder = []bool{true, false, false, true}

func pathsBench(ctx context.Context, base string) error {
	fmt.Println("## Apply paths: each measured on and off in this run (runs alternated on, off, off, on)")
	if err := livePaths(ctx, base); err != nil {
		return err
	}
	return replayPaths(ctx, base)
}

// livePaths runs every read model's projection in this process, live
// batches on, then off (Runner.OneAtATime), each on a database of its own
// holding a backlog of pathsBurst events of mixed types (users, agents,
// few-shot examples, sessions with turns and a settings change) written
// before the projections start: the figure is the rate at which they apply
// it, until every projection's offset is past it. Then, caught up, the lag
// of sequential appends (as in the http part).
func livePaths(ctx context.Context, base string) error {
	var rates [2][]float64 // [on, off]
	var p50, p99 [2][]time.Duration
	for _, on := range pathsOrder {
		rate, lags, err := liveRun(ctx, base, on)
		if err != nil {
			return err
		}
		i := 1
		if on {
			i = 0
		}
		rates[i] = append(rates[i], rate)
		p50[i] = append(p50[i], percentile(lags, .5))
		p99[i] = append(p99[i], percentile(lags, .99))
	}
	fmt.Printf("\n### Live batches vs one event at a time under a savepoint (a backlog of %d events, every projection)\n", pathsBurst)
	fmt.Printf("%-26s %12s %12s %8s\n", "", "batches", "one at a time", "ratio")
	on, off := mean(rates[0]), mean(rates[1])
	fmt.Printf("%-26s %12.0f %12.0f %8.2f   (runs %.0f / %.0f)\n", "burst applied, events/s", on, off, on/off, rates[0], rates[1])
	lag := func(name string, xs [2][]time.Duration) {
		a, b := meanDuration(xs[0]), meanDuration(xs[1])
		fmt.Printf("%-26s %12s %12s %8.2f   (runs %s / %s)\n", name, ms(a), ms(b), float64(a)/float64(b), durations(xs[0]), durations(xs[1]))
	}
	lag("lag p50 (lower is better)", p50)
	lag("lag p99 (lower is better)", p99)
	return nil
}

// liveRun is one run of livePaths: the burst's rate and the sorted lags.
func liveRun(ctx context.Context, base string, batches bool) (float64, []time.Duration, error) {
	pool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return 0, nil, err
	}
	defer pool.Close()
	if err := fillLog(ctx, pool, pathsBurst); err != nil {
		return 0, nil, err
	}
	last, err := lastPosition(ctx, pool)
	if err != nil {
		return 0, nil, err
	}
	replayer, closeStore, err := service.NewReplayer(ctx, service.Config{Pool: pool}) // for its registry
	if err != nil {
		return 0, nil, err
	}
	closeStore()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ps := service.Projections()
	groups := make([]string, len(ps))
	for i, p := range ps {
		groups[i] = p.Name
	}
	runCtx, cancel := context.WithCancel(ctx)
	listener := projections.NewListener(pool, quiet)
	runner := projections.NewRunner(pool, listener, replayer.Registry, quiet, ps...)
	runner.OneAtATime = !batches
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); listener.Run(runCtx) }()
	defer func() { cancel(); wg.Wait() }()
	// Live before the projections start, so that no advance goes unheard.
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if listener.Live() {
			break
		}
		if time.Since(start) > 10*time.Second {
			return 0, nil, fmt.Errorf("the listener never listened")
		}
	}
	start := time.Now()
	wg.Add(1)
	go func() { defer wg.Done(); _ = runner.Run(runCtx) }()
	waitCtx, waitCancel := context.WithTimeout(ctx, 5*time.Minute)
	err = listener.WaitFor(waitCtx, last, groups...)
	waitCancel()
	if err != nil {
		return 0, nil, fmt.Errorf("the projections (batches %v) did not apply the burst: %w", batches, err)
	}
	rate := float64(pathsBurst) / time.Since(start).Seconds()
	store := postgres.New(pool, nil)
	defer store.Close()
	lags, _, err := measureLag(ctx, pool, store)
	return rate, lags, err
}

// lastPosition is the position of the log's last event.
func lastPosition(ctx context.Context, pool *pgxpool.Pool) (eventstore.Position, error) {
	var txid string
	var offset int64
	if err := pool.QueryRow(ctx, `SELECT transaction_id::text, "offset" FROM events
		ORDER BY transaction_id DESC, "offset" DESC LIMIT 1`).Scan(&txid, &offset); err != nil {
		return eventstore.Position{}, err
	}
	commit, err := strconv.ParseUint(txid, 10, 64)
	return eventstore.Position{Commit: commit, Prepare: uint64(offset)}, err
}

// replayPaths replays every read model from a log of pathsReplay events,
// with the loaders, then without them (the handlers apply every event,
// set-wise in pipelined batches, as for the read models that have no
// loader).
func replayPaths(ctx context.Context, base string) error {
	pool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := fillLog(ctx, pool, pathsReplay); err != nil {
		return err
	}
	var rates [2][]float64
	for _, on := range pathsOrder {
		r, closeStore, err := service.NewReplayer(ctx, service.Config{Pool: pool})
		if err != nil {
			return err
		}
		ps, err := service.ReplayableProjections()
		if err != nil {
			closeStore()
			return err
		}
		i := 0
		if !on {
			i = 1
			for j := range ps {
				ps[j].Loaders = nil
			}
		}
		start := time.Now()
		_, err = r.Replay(ctx, ps...)
		closeStore()
		if err != nil {
			return fmt.Errorf("replay (loaders %v): %w", on, err)
		}
		rates[i] = append(rates[i], float64(pathsReplay)/time.Since(start).Seconds())
	}
	fmt.Printf("\n### Replay loaders vs the handlers (a log of %d events, every read model)\n", pathsReplay)
	fmt.Printf("%-26s %12s %12s %8s\n", "", "loaders", "handlers", "ratio")
	on, off := mean(rates[0]), mean(rates[1])
	fmt.Printf("%-26s %12.0f %12.0f %8.2f   (runs %.0f / %.0f)\n\n", "replay, events/s", on, off, on/off, rates[0], rates[1])
	return nil
}

func meanDuration(xs []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range xs {
		sum += x
	}
	return sum / time.Duration(len(xs))
}

func durations(xs []time.Duration) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += ms(x)
	}
	return "[" + s + "]"
}
