package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/google/uuid"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/personal"
	"lectern/pgtest"
)

// privacyBench measures what sealing personal fields costs (docs/privacy.md):
// appends of agent.created (name and system prompt are personal) through
// the sealing store against the same appends in clear, and reading and
// decoding those events (a replay's work) opened against in clear: each a
// ratio in one run, rounds alternated.
func privacyBench(ctx context.Context, base string) error {
	pool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keys, err := personal.NewKeys(pool, key)
	if err != nil {
		return err
	}
	sealer := personal.NewSealer(keys)
	plain := postgres.New(pool, nil)
	defer plain.Close()
	sealed := personal.NewStore(plain, sealer)

	fmt.Println("\n## Sealing personal fields (crypto-shredding) vs the same work in clear")
	fmt.Println("(sealed bytes: the same sealed events, sealed beforehand and appended in clear: what the longer")
	fmt.Println(" row costs, apart from sealing it)")
	fmt.Printf("%-34s %14s %14s %8s %8s %14s %8s\n", "", "sealed/s", "clear/s", "ratio", "target", "sealed bytes/s", "ratio")
	// Twelve rounds of a second or so: with three kinds, each goes first,
	// and follows each other, in as many (inTurns); with six, the 8-writer
	// ratio ranged from 0.84 to 0.92 from one run to the next.
	const rounds = 12
	for _, writers := range []int{1, 8} {
		presealed, err := sealBeforehand(ctx, sealer, writers)
		if err != nil {
			return err
		}
		rates, err := inTurns(rounds, func(round int) (float64, error) {
			return agentAppends(ctx, plain, "clear", writers, round, 4**duration/rounds)
		}, func(round int) (float64, error) {
			return agentAppends(ctx, sealed, "sealed", writers, round, 4**duration/rounds)
		}, func(round int) (float64, error) {
			return sealedBytesAppends(ctx, plain, presealed, writers, round, 4**duration/rounds)
		})
		if err != nil {
			return err
		}
		clearRate, sealedRate, bytesRate := rates[0], rates[1], rates[2]
		fmt.Printf("%-34s %14.0f %14.0f %8.2f %8s %14.0f %8.2f\n", fmt.Sprintf("appends, %d writers", writers), sealedRate, clearRate,
			sealedRate/clearRate, ">= 0.90", bytesRate, bytesRate/clearRate)
	}

	// Reading back: the events of each kind, read in pages and decoded as a
	// replay does, opened through the registry (sealed) or not (clear).
	opened := sealer.Opening(events.NewRegistry())
	rates, err := inTurns(rounds, func(int) (float64, error) {
		return decodeAll(ctx, plain, "clear", events.NewRegistry())
	}, func(int) (float64, error) {
		return decodeAll(ctx, plain, "sealed", opened)
	})
	if err != nil {
		return err
	}
	clearRate, sealedRate := rates[0], rates[1]
	// Not a target: the whole replay (-only sealing) is; this shows what
	// opening adds to the reading and decoding alone.
	fmt.Printf("%-34s %14.0f %14.0f %8.2f %8s\n", "read and decode only", sealedRate, clearRate, sealedRate/clearRate, "-")
	return nil
}

func agentAppends(ctx context.Context, store eventstore.Store, kind string, writers, round int, d time.Duration) (float64, error) {
	tag := fmt.Sprintf("%s%d-%d-%s", kind, writers, round, runID)
	return measureFor(d, writers, func(w, i int) error {
		return appendAgent(ctx, store, fmt.Sprintf("%s-%d", tag, w), i, w, agentData(w, i))
	})
}

// agentData is the i-th agent.created event of writer w.
func agentData(w, i int) []byte {
	return []byte(fmt.Sprintf(`{"agent_id":%d,"owner_id":%d,"name":"Tutor","system_prompt":"Be kind and precise, and explain each step.","is_active":true}`, i+1, w+1))
}

// appendAgent appends an agent.created event of data, the i-th of writer
// w, to stream.
func appendAgent(ctx context.Context, store eventstore.Store, stream string, i, w int, data []byte) error {
	_, err := store.Append(ctx, stream, eventstore.Exact(int64(i)), []eventstore.EventData{{
		ID: uuid.New(), Type: "agent.created", SchemaVersion: 1, Data: data,
		Metadata: eventstore.Metadata{UserID: int64(w + 1), RequestID: "bench"},
	}})
	return err
}

// presealedEvents is how many sealed events each writer cycles through.
const presealedEvents = 256

// sealBeforehand seals, for each writer, the agent events agentAppends
// appends first.
func sealBeforehand(ctx context.Context, sealer *personal.Sealer, writers int) ([][][]byte, error) {
	out := make([][][]byte, writers)
	for w := range out {
		for i := range presealedEvents {
			data, err := sealer.Seal(ctx, "agent.created", agentData(w, i), int64(w+1))
			if err != nil {
				return nil, err
			}
			out[w] = append(out[w], data)
		}
	}
	return out, nil
}

// sealedBytesAppends is agentAppends of events sealed beforehand, in clear:
// the sealed store's rows without its sealing.
func sealedBytesAppends(ctx context.Context, store eventstore.Store, presealed [][][]byte, writers, round int, d time.Duration) (float64, error) {
	tag := fmt.Sprintf("bytes%d-%d-%s", writers, round, runID)
	return measureFor(d, writers, func(w, i int) error {
		_ = agentData(w, i) // built as the clear appends build theirs: the kinds differ only in the row
		return appendAgent(ctx, store, fmt.Sprintf("%s-%d", tag, w), i, w, presealed[w][i%presealedEvents])
	})
}

// decodeAll reads the whole log, decoding the agent events whose stream
// is of kind, and returns those decoded per second.
func decodeAll(ctx context.Context, store eventstore.Store, kind string, registry *events.Registry) (float64, error) {
	start := time.Now()
	n := 0
	var after eventstore.Position
	for {
		evs, err := store.ReadAll(ctx, after, 2000)
		if err != nil {
			return 0, err
		}
		for _, ev := range evs {
			if len(ev.StreamID) < len(kind) || ev.StreamID[:len(kind)] != kind {
				continue
			}
			var e events.AgentCreated
			if err := registry.DecodeInto(ev.Type, ev.SchemaVersion, ev.Data, &e); err != nil {
				return 0, err
			}
			n++
		}
		if len(evs) < 2000 {
			break
		}
		after = evs[len(evs)-1].Position
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
