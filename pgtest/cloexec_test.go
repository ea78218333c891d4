//go:build unix

package pgtest

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that the test binary starts (a cluster) inherits none of the
// binary's descriptors, not even those the binary itself inherited without
// close-on-exec (a fuzz worker's pipes to its coordinator): when the binary
// closes its end of a pipe, the reader sees the pipe end, whatever the
// children that outlive it.
func TestChildrenHoldNoInheritedPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	// As inherited: not close-on-exec.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), syscall.F_SETFD, 0); errno != 0 {
		t.Fatal(errno)
	}
	closeInheritedOnExec()
	// A child that outlives the use of the pipe, as a cluster's server does.
	out, err := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 </dev/null & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(r)
		ended <- err
	}()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pipe did not end: the child holds its write end")
	}
}
