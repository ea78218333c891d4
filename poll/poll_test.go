package poll

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("a condition that holds at the third check: checked %d times", n)
	}
	start := time.Now()
	if Until(20*time.Millisecond, func() bool { return false }) {
		t.Error("a condition that never holds was reported to hold")
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Error("gave up before the deadline")
	}
}
