package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/personal"
	"lectern/pgtest"
	"lectern/service"
)

// sealedWholeBench measures sealing where users meet it: POST /agents on a
// server that seals against one that stores in clear (the bench build's
// LECTERN_BENCH_CLEAR_EVENTS), and a replay of every read model from a log
// sealed against the same log in clear. Rounds alternate.
func sealedWholeBench(ctx context.Context, base string) error {
	fmt.Println("\n## Sealing, end to end: POST /agents (16 clients) and a whole replay, sealed vs in clear")
	fmt.Printf("%-34s %14s %14s %8s %8s\n", "", "sealed/s", "clear/s", "ratio", "target")
	pool, dbName, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	pool.Close()
	postRate := func(extra ...string) func(int) (float64, error) {
		return func(int) (float64, error) {
			srv, err := startServer(ctx, base, dbName, extra...)
			if err != nil {
				return 0, err
			}
			defer srv.stop()
			rate, _, err := postAgents(srv)
			return rate, err
		}
	}
	// Each goes first in as many rounds as the other (inTurns). Four
	// rounds: with two, the ratio ranged from 0.84 to 1.20 from one run of
	// the bench to the next, the machine's speed moving between rounds.
	posts, err := inTurns(4, postRate(), postRate("LECTERN_BENCH_CLEAR_EVENTS=1"))
	if err != nil {
		return err
	}
	sealed, clear := posts.mean(0), posts.mean(1)
	fmt.Printf("%-34s %14.0f %14.0f %8.2f %8s\n", "POST /agents req/s", sealed, clear, sealed/clear, ">= 0.90")
	fmt.Printf("  sealed/clear %s\n", posts.spread(0, 1))

	const n = 200_000
	key, err := hex.DecodeString(benchDataKey)
	if err != nil {
		return err
	}
	clearPool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer clearPool.Close()
	sealedPool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer sealedPool.Close()
	if err := fillLog(ctx, clearPool, n); err != nil {
		return err
	}
	if err := fillSealedLog(ctx, sealedPool, key, n); err != nil {
		return err
	}
	// Eight rounds: a replay takes two seconds, and the machine's speed
	// moves its rate by a tenth from one to the next.
	// The CPU each kind used, the bench process's and the server's: on
	// shared cores, where a gap between the two comes from.
	meter := newCPUMeter(ctx, clearPool)
	var used [2]cpuTimes
	measured := func(kind int, pool *pgxpool.Pool, key []byte) func(int) (float64, error) {
		return func(int) (rate float64, err error) {
			before := meter.now()
			// Labelled, so that -cpuprofile tells the two apart (-tagfocus).
			pprof.Do(ctx, pprof.Labels("replay", []string{"sealed", "clear"}[kind]), func(ctx context.Context) {
				rate, err = replayRate(ctx, pool, key, n)
			})
			used[kind] = add(used[kind], meter.since(before))
			return rate, err
		}
	}
	const rounds = 8
	replays, err := inTurns(rounds, measured(0, sealedPool, key), measured(1, clearPool, nil))
	if err != nil {
		return err
	}
	sealed, clear = replays.mean(0), replays.mean(1)
	fmt.Printf("%-34s %14.0f %14.0f %8.2f %8s\n", fmt.Sprintf("replay of %d events, events/s", n), sealed, clear,
		sealed/clear, ">= 0.90")
	fmt.Printf("  sealed/clear %s\n", replays.spread(0, 1))
	perEvent := func(d time.Duration) string {
		return fmt.Sprintf("%.2f", float64(d.Nanoseconds())/1000/float64(rounds*n))
	}
	for i, kind := range []string{"sealed", "clear"} {
		fmt.Printf("  %-6s replay, CPU µs/event: bench process %s, PostgreSQL %s\n", kind, perEvent(used[i].client), perEvent(used[i].server))
	}
	return nil
}

// fillSealedLog is fillLog with each event's personal fields sealed, as the
// service appends them.
func fillSealedLog(ctx context.Context, pool *pgxpool.Pool, key []byte, n int) error {
	keys, err := personal.NewKeys(pool, key)
	if err != nil {
		return err
	}
	sealer := personal.NewSealer(keys)
	return fillLogFrom(ctx, pool, 0, n, func(row []any, user int64) error {
		data, err := sealer.Seal(ctx, row[5].(string), json.RawMessage(row[1].(string)), user)
		row[1] = string(data)
		return err
	})
}

// replayRate rebuilds every read model of pool's log and returns events/s.
func replayRate(ctx context.Context, pool *pgxpool.Pool, key []byte, n int) (float64, error) {
	r, closeStore, err := service.NewReplayer(ctx, service.Config{Pool: pool, DataKey: key})
	if err != nil {
		return 0, err
	}
	defer closeStore()
	ps, err := service.ReplayableProjections()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := r.Replay(ctx, ps...); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
