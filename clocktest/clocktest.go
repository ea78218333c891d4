// Package clocktest is a clock tests set and move, for code that takes its
// clock as a func() time.Time.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a clock that stands still until it is set or moved; it is safe
// for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock showing start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now is the time the clock shows.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set makes the clock show t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
