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
	fmt.Printf("%-34s %14s %14s %8s %8s\n", "", "sealed/s", "clear/s", "ratio", "target")
	// An even number of rounds: each kind goes first in as many (inTurns).
	const rounds = 4
	for _, writers := range []int{1, 8} {
		rates, err := inTurns(rounds, func(round int) (float64, error) {
			return agentAppends(ctx, plain, "clear", writers, round, *duration/rounds)
		}, func(round int) (float64, error) {
			return agentAppends(ctx, sealed, "sealed", writers, round, *duration/rounds)
		})
		if err != nil {
			return err
		}
		clearRate, sealedRate := rates[0], rates[1]
		fmt.Printf("%-34s %14.0f %14.0f %8.2f %8s\n", fmt.Sprintf("appends, %d writers", writers), sealedRate, clearRate,
			sealedRate/clearRate, ">= 0.90")
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
		_, err := store.Append(ctx, fmt.Sprintf("%s-%d", tag, w), eventstore.Exact(int64(i)), []eventstore.EventData{{
			ID: uuid.New(), Type: "agent.created", SchemaVersion: 1,
			Data:     []byte(fmt.Sprintf(`{"agent_id":%d,"owner_id":%d,"name":"Tutor","system_prompt":"Be kind and precise, and explain each step.","is_active":true}`, i+1, w+1)),
			Metadata: eventstore.Metadata{UserID: int64(w + 1), RequestID: "bench"},
		}})
		return err
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
