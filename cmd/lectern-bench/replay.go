package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/benchlog"
	"lectern/eventstore"
	"lectern/pgtest"
	"lectern/projections"
	"lectern/service"
)

// replayEvents is the size of the replayed log.
const replayEvents = 1_000_000

// replayBench rebuilds every read model from a log of a million events, beside
// reading the same log without projecting it.
func replayBench(ctx context.Context, base string) error {
	pool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	start := time.Now()
	if err := fillLog(ctx, pool, replayEvents); err != nil {
		return err
	}
	fmt.Printf("replay: a log of %d events (users, agents, few-shot examples, sessions with turns) written in %s\n",
		replayEvents, time.Since(start).Round(time.Millisecond))

	r, closeStore, err := service.NewReplayer(ctx, service.Config{Pool: pool})
	if err != nil {
		return err
	}
	defer closeStore()
	const page = 2000 // the replay's default, for both figures
	r.PageSize = page

	// Baseline: the same pages of the log, read and not projected.
	cpu := newCPUMeter(ctx, pool)
	readCPU := cpu.now()
	start = time.Now()
	var read int
	var after eventstore.Position
	for {
		got, err := r.Store.ReadAll(ctx, after, page)
		if err != nil {
			return err
		}
		read += len(got)
		if len(got) < page {
			break
		}
		after = got[len(got)-1].Position
	}
	readRate := float64(read) / time.Since(start).Seconds()
	readUsed := cpu.since(readCPU)

	ps, err := service.ReplayableProjections()
	if err != nil {
		return err
	}
	replayCPU := cpu.now()
	start = time.Now()
	var results []projections.ReplayResult
	if err := profiled("replay.prof", func() (err error) {
		results, err = r.Replay(ctx, ps...)
		return err
	}); err != nil {
		return err
	}
	elapsed := time.Since(start)
	replayUsed := cpu.since(replayCPU)
	rate := float64(replayEvents) / elapsed.Seconds()
	var applied int64
	for _, res := range results {
		applied += res.Applied
		fmt.Printf("    %-10s %7d events applied, caught up in %s\n", res.Projection, res.Applied, res.CaughtUp.Round(time.Millisecond))
	}
	fmt.Printf("  replay of every read model: %.0f events/s (%s; %d applied by %d projections)\n",
		rate, elapsed.Round(time.Millisecond), applied, len(results))
	fmt.Printf("  baseline, reading the log only: %.0f events/s -> replay at %.2fx of reading (target >= 0.50)\n", readRate, rate/readRate)
	fmt.Printf("  replay  %s\n  reading %s\n\n", replayUsed, readUsed)
	return nil
}

// fillLog writes n events straight into the log with COPY, in transactions
// of 10 000: ten events per user (sign-up, an agent created and edited, a
// few-shot example, a session started with four turns and a settings change).
func fillLog(ctx context.Context, pool *pgxpool.Pool, n int) error {
	return fillLogFrom(ctx, pool, 0, n, nil)
}

// fillLogFrom is fillLog for a log that holds the first have events
// fillLog writes (a multiple of ten): it writes the next up to n. seal, if
// set, rewrites each row (the user's) before it is written.
func fillLogFrom(ctx context.Context, pool *pgxpool.Pool, have, n int, seal func(row []any, user int64) error) error {
	const perUser, perTx = 10, 10_000
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for first := have / perUser; first < n/perUser; first += perTx / perUser {
		var rows [][]any
		for u := first; u < first+perTx/perUser && u < n/perUser; u++ {
			evs, err := userEvents(int64(u+1), at.Add(time.Duration(u)*time.Second))
			if err != nil {
				return err
			}
			for _, row := range evs {
				if seal == nil {
					break
				}
				if err := seal(row, int64(u+1)); err != nil {
					return err
				}
			}
			rows = append(rows, evs...)
		}
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"events"},
			[]string{"uuid", "payload", "metadata", "stream_id", "version", "event_type", "schema_version", "recorded_at"},
			pgx.CopyFromRows(rows)); err != nil {
			return err
		}
	}
	return nil
}

func userEvents(id int64, at time.Time) ([][]any, error) {
	evs := benchlog.UserEvents(id)
	rows := make([][]any, len(evs))
	for i, e := range evs {
		data, err := json.Marshal(e.Event)
		if err != nil {
			return nil, err
		}
		rows[i] = []any{uuid.New(), string(data), `{"user_id":` + fmt.Sprint(id) + `}`, e.Stream, e.Version, e.Event.EventType(),
			e.Event.SchemaVersion(), at.Add(time.Duration(i) * time.Millisecond)}
	}
	return rows, nil
}
