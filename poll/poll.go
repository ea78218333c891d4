// Package poll is how tests wait: for a fact, checked every few
// milliseconds until a deadline, never for a length of time.
package poll

import (
	"testing"
	"time"
)

// Interval is how often a condition is checked.
const Interval = 5 * time.Millisecond

// Until checks cond until it holds or within has passed, and reports
// whether it held.
func Until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// Must is Until that fails t, saying what was awaited, when cond never held.
func Must(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, cond) {
		t.Fatalf("%s: not so after %s", what, within)
	}
}
