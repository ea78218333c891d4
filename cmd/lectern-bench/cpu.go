package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMeter reads the CPU time the bench process and a PostgreSQL server on
// this machine have used: where a phase's time goes when both share the
// machine's cores with other tenants.
type cpuMeter struct {
	postmaster int // 0: the server's processes cannot be read
}

// clockTicks is USER_HZ, the unit of /proc/*/stat times (100 on Linux).
const clockTicks = 100

// newCPUMeter finds pool's server's postmaster; a server out of reach
// (another host, another user's) is only not measured.
func newCPUMeter(ctx context.Context, pool *pgxpool.Pool) *cpuMeter {
	var dir string
	if err := pool.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return &cpuMeter{}
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return &cpuMeter{}
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return &cpuMeter{postmaster: pid}
}

// cpuTimes are CPU times used so far.
type cpuTimes struct{ client, server time.Duration }

func (m *cpuMeter) now() cpuTimes {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t := cpuTimes{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if m.postmaster == 0 {
		return t
	}
	// The postmaster's own time and that of its children gone, and each
	// living child's (a backend, a background worker).
	ticks := int64(0)
	if f, ok := procStat(m.postmaster); ok {
		ticks += f[13] + f[14] + f[15] + f[16]
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == m.postmaster {
			continue
		}
		if f, ok := procStat(pid); ok && f[3] == int64(m.postmaster) {
			ticks += f[13] + f[14]
		}
	}
	t.server = time.Duration(ticks) * time.Second / clockTicks
	return t
}

// procStat is /proc/pid/stat's fields (numbered from 0 as in proc(5) less
// one; the name and state read as 0).
func procStat(pid int) ([]int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')') // the name may hold spaces
	if i < 0 {
		return nil, false
	}
	f := []int64{0, 0, 0}
	for _, s := range strings.Fields(string(b[i+2:]))[1:] {
		n, _ := strconv.ParseInt(s, 10, 64)
		f = append(f, n)
	}
	return f, len(f) > 16
}

// since is the CPU used since t.
func (m *cpuMeter) since(t cpuTimes) cpuTimes {
	n := m.now()
	return cpuTimes{client: n.client - t.client, server: n.server - t.server}
}

func (t cpuTimes) String() string {
	return fmt.Sprintf("CPU: bench process %.1fs, PostgreSQL %.1fs", t.client.Seconds(), t.server.Seconds())
}
