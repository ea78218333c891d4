// Package reconnect keeps a long-lived connection going: a LISTEN, a
// subscription, a lease. Each ends sooner or later; Loop starts it again
// after a wait that doubles while attempts fail and starts over once one
// got through, so that a blip late in a process's life is retried as soon
// as the first one was.
package reconnect

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff bounds Loop's waits: Min after an attempt that got through, twice
// the last wait after one that did not, Max at most. Each is jittered by a
// fifth either way, so that replicas that lost the same server do not all
// come back in the same instant.
type Backoff struct{ Min, Max time.Duration }

// Default waits 100 ms, doubling to 5 s.
var Default = Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// Jitter is the share of a wait by which it may be shorter or longer.
const Jitter = 0.2

// errEnded stands for an attempt that ended without an error.
var errEnded = errors.New("reconnect: the connection ended")

// Loop runs attempt until ctx ends (it then returns nil) or attempt returns
// an error marked backoff.Permanent (it returns its cause). attempt reports
// whether it got through (connected, subscribed, took its lease) before it
// ended. notify, if set, hears each attempt's error and the wait before the
// next one.
func Loop(ctx context.Context, b Backoff, attempt func() (gotThrough bool, err error), notify func(err error, wait time.Duration)) error {
	exp := &backoff.ExponentialBackOff{InitialInterval: b.Min, RandomizationFactor: Jitter, Multiplier: 2, MaxInterval: b.Max}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		through, err := attempt()
		if through {
			exp.Reset()
		}
		if err == nil {
			err = errEnded
		}
		return struct{}{}, err
	}, backoff.WithBackOff(exp), backoff.WithMaxElapsedTime(0), backoff.WithNotify(notify))
	if ctx.Err() != nil {
		return nil
	}
	return err
}
