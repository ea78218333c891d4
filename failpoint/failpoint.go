// Package failpoint kills the process at a named point of its work, for the
// crash tests: LECTERN_FAILPOINT=name (or name:n, the n-th time the point is
// reached) makes Reach(name) send the process SIGKILL, as a crash or an
// operator's kill -9 would. Unset, Reach costs an atomic load.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Points of Lectern's work where a crash test kills it.
const (
	// AppendCommitted: a command's events are stored, the answer not sent.
	AppendCommitted = "append-committed"
	// ProjectionApplied: a projection applied an event in its transaction,
	// which has not committed.
	ProjectionApplied = "projection-applied"
	// ReplaySwapping: a replay is swapping its rebuilt tables in, its
	// transaction not committed.
	ReplaySwapping = "replay-swapping"
)

var (
	armed string           // the point named in LECTERN_FAILPOINT; "" when unset
	after int64        = 1 // the hit that kills
	hits  atomic.Int64     // times the armed point was reached
)

func init() {
	v := os.Getenv("LECTERN_FAILPOINT")
	if v == "" {
		return
	}
	name, n, ok := strings.Cut(v, ":")
	armed = name
	if ok {
		if k, err := strconv.ParseInt(n, 10, 64); err == nil && k > 0 {
			after = k
		}
	}
}

// Reach kills the process if name is the armed point and this is the hit
// it waits for.
func Reach(name string) {
	if armed == "" || name != armed {
		return
	}
	if hits.Add(1) == after {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
