package reconnect

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
)

var errDropped = errors.New("dropped")

// within reports whether wait is want, give or take the jitter.
func within(wait, want time.Duration) bool {
	return float64(wait) >= float64(want)*(1-Jitter)-1 && float64(wait) <= float64(want)*(1+Jitter)+1
}

// The wait doubles while attempts fail, up to Max, and starts over from Min
// after an attempt that got through.
func TestWaitsGrowUntilAnAttemptGetsThrough(t *testing.T) {
	b := Backoff{Min: time.Millisecond, Max: 8 * time.Millisecond}
	// Attempts 1-6 fail at once; the 7th gets through, then drops; the 8th
	// fails; the 9th is told to stop.
	want := []time.Duration{1, 2, 4, 8, 8, 8, 1, 2}
	var waits []time.Duration
	n := 0
	err := Loop(context.Background(), b, func() (bool, error) {
		n++
		switch n {
		case 7:
			return true, errDropped
		case 9:
			return false, backoff.Permanent(errDropped)
		}
		return false, errDropped
	}, func(err error, wait time.Duration) {
		if !errors.Is(err, errDropped) {
			t.Errorf("notified of %v, want the attempt's error", err)
		}
		waits = append(waits, wait)
	})
	if !errors.Is(err, errDropped) || n != 9 {
		t.Fatalf("Loop = %v after %d attempts, want the permanent error's cause after 9", err, n)
	}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %d of them", waits, len(want))
	}
	for i, w := range want {
		if !within(waits[i], w*time.Millisecond) {
			t.Errorf("wait %d = %v, want %v ± %.0f%%", i+1, waits[i], w*time.Millisecond, Jitter*100)
		}
	}
}

// An attempt that ends without an error is tried again too, and Loop
// returns nil, promptly, once ctx ends, even in the middle of a long wait.
func TestLoopEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	done := make(chan error, 1)
	go func() {
		done <- Loop(ctx, Backoff{Min: time.Hour, Max: time.Hour}, func() (bool, error) {
			n++
			if n == 2 {
				t.Error("attempted again before the hour's wait")
			}
			return true, nil
		}, func(err error, _ time.Duration) {
			if !errors.Is(err, errEnded) {
				t.Errorf("notified of %v, want errEnded", err)
			}
			cancel()
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Loop = %v once its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Loop went on waiting after its context ended")
	}
}
