// Package admit bounds how many of one kind of costly work run at once
// across every request (argon2id checks, PDF extractions). The limits per
// client bound how often one client asks, not how many clients ask at
// once: work beyond the slots waits for one up to a bound, and is then
// refused, so that a flood queues briefly and is told to come back
// instead of piling up memory and cores.
package admit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// Slots admit at most their size of work at once.
type Slots struct {
	sem  *semaphore.Weighted
	size int64
	busy error
	wait atomic.Int64 // how long Take waits, in nanoseconds
}

// New returns n slots (at least one); Take waits up to wait for one, then
// fails with busy.
func New(n int, wait time.Duration, busy error) *Slots {
	n = max(n, 1)
	s := &Slots{sem: semaphore.NewWeighted(int64(n)), size: int64(n), busy: busy}
	s.wait.Store(int64(wait))
	return s
}

// Size is how many run at once.
func (s *Slots) Size() int { return int(s.size) }

// Take waits for a slot: busy once the wait is over, ctx's error once ctx
// ends first. A slot taken is given back with Release.
func (s *Slots) Take(ctx context.Context) error {
	waiting, cancel := context.WithTimeout(ctx, time.Duration(s.wait.Load()))
	defer cancel()
	if err := s.sem.Acquire(waiting, 1); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.busy
	}
	return nil
}

// Release gives a slot back.
func (s *Slots) Release() { s.sem.Release(1) }

// Do runs f in a slot.
func (s *Slots) Do(ctx context.Context, f func()) error {
	if err := s.Take(ctx); err != nil {
		return err
	}
	defer s.Release()
	f()
	return nil
}

// HoldAllInTests takes every slot until t ends and shortens Take's wait to
// wait: Take then fails with busy after it. It is for tests of what a
// client sees under a flood; no other test of the binary may take a slot
// meanwhile. Outside a test binary it panics.
func (s *Slots) HoldAllInTests(t testing.TB, wait time.Duration) {
	if !testing.Testing() {
		panic("admit: HoldAllInTests outside a test binary")
	}
	if err := s.sem.Acquire(context.Background(), s.size); err != nil {
		t.Fatal(err)
	}
	before := s.wait.Swap(int64(wait))
	t.Cleanup(func() {
		s.wait.Store(before)
		s.sem.Release(s.size)
	})
}
