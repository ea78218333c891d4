package admit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lectern/admit"
	"lectern/poll"
)

var errBusy = errors.New("busy")

// However much work is asked for at once, at most the slots' size runs; the
// rest waits for a slot and runs once one is given back.
func TestAtMostTheSizeRunsAtOnce(t *testing.T) {
	s := admit.New(2, 10*time.Second, errBusy)
	var inside, most atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	var ran atomic.Int32
	for range s.Size() + 3 {
		wg.Go(func() {
			err := s.Do(context.Background(), func() {
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				inside.Add(-1)
				ran.Add(1)
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	// Every slot is taken, and the other three wait for one.
	poll.Must(t, 10*time.Second, "every slot taken", func() bool { return inside.Load() == int32(s.Size()) })
	close(release)
	wg.Wait()
	if most.Load() != int32(s.Size()) || ran.Load() != int32(s.Size()+3) {
		t.Errorf("at most %d ran at once, %d in all; want %d, and %d", most.Load(), ran.Load(), s.Size(), s.Size()+3)
	}
}

// Work that finds every slot taken for longer than its wait is refused with
// the slots' error, having run nothing; work whose context ends first gets
// the context's error. Once the slots are given back, work runs again.
func TestWorkThatFindsNoSlotGivesUp(t *testing.T) {
	s := admit.New(1, 10*time.Second, errBusy)
	t.Run("held", func(t *testing.T) {
		s.HoldAllInTests(t, 20*time.Millisecond)
		ran := false
		if err := s.Do(context.Background(), func() { ran = true }); !errors.Is(err, errBusy) || ran {
			t.Errorf("with every slot taken: %v (ran: %v), want the slots' error", err, ran)
		}
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Take(gone); !errors.Is(err, context.Canceled) {
			t.Errorf("a caller gone while it waits: %v, want context.Canceled", err)
		}
	})
	if err := s.Do(context.Background(), func() {}); err != nil {
		t.Errorf("with the slots given back: %v", err)
	}
}
