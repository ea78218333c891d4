//go:build unix

package pgtest

import (
	"os"
	"strconv"
	"syscall"
)

// closeInheritedOnExec marks every descriptor above stderr close-on-exec,
// so that the cluster this process starts inherits none of them. Go opens
// its own descriptors so, but not those it inherited: a fuzz worker (go
// test -fuzz) talks to its coordinator over inherited pipes, and a cluster
// started from the worker kept the pipe's write end open after the worker
// was gone; the coordinator, reading the pipe to its end, waited forever.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/dev/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
