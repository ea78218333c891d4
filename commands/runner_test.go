package commands

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/metrics"
	"lectern/pgtest"
)

// racingStore loses the first races appends: as if another request had
// appended to the stream just before.
type racingStore struct {
	eventstore.Store
	races atomic.Int32
}

func (s *racingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if s.races.Add(-1) >= 0 {
		return eventstore.AppendResult{}, eventstore.ErrWrongExpectedVersion
	}
	return s.Store.Append(ctx, stream, expected, events)
}

// A command that loses a version race decides again, counted as retried;
// one that loses every attempt answers a conflict, counted as gave_up.
func TestVersionConflictsAreCounted(t *testing.T) {
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	store := &racingStore{Store: pg}
	m := metrics.New()
	d := process(t, pool, store)
	d.Observer = m
	h, err := NewAgents(d)
	if err != nil {
		t.Fatal(err)
	}
	value := func(outcome string) float64 {
		t.Helper()
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "lectern_commands_version_conflicts_total" {
				continue
			}
			for _, c := range f.GetMetric() {
				for _, l := range c.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == outcome {
						return c.GetCounter().GetValue()
					}
				}
			}
		}
		t.Fatalf("no lectern_commands_version_conflicts_total{outcome=%q}", outcome)
		return 0
	}

	store.races.Store(2)
	if _, res, err := h.Create(context.Background(), aggregates.CreateAgent{OwnerID: 1, Name: "raced twice", SystemPrompt: "p"}); err != nil || !res.Appended {
		t.Fatalf("after two lost races: %+v, %v; want the agent created", res, err)
	}
	if got, gave := value(metrics.ConflictRetried), value(metrics.ConflictGaveUp); got != 2 || gave != 0 {
		t.Errorf("retried %v, gave_up %v; want 2 and 0", got, gave)
	}

	store.races.Store(maxAttempts)
	_, _, err = h.Create(context.Background(), aggregates.CreateAgent{OwnerID: 1, Name: "always raced", SystemPrompt: "p"})
	if !errors.Is(err, derrors.ErrConflict) {
		t.Fatalf("every attempt lost: %v, want a conflict", err)
	}
	if got, gave := value(metrics.ConflictRetried), value(metrics.ConflictGaveUp); got != 2+maxAttempts-1 || gave != 1 {
		t.Errorf("retried %v, gave_up %v; want %d and 1", got, gave, 2+maxAttempts-1)
	}
	if !strings.Contains(err.Error(), "changed by another request") {
		t.Errorf("conflict message %q", err)
	}
}
