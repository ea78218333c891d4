package main

import (
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
	if m.postmaster != 0 {
		t.server, _ = clusterCPU(m.postmaster)
	}
	return t
}

// since is the CPU used since t.
func (m *cpuMeter) since(t cpuTimes) cpuTimes {
	n := m.now()
	return cpuTimes{client: n.client - t.client, server: n.server - t.server}
}

func (t cpuTimes) String() string {
	return fmt.Sprintf("CPU: bench process %.1fs, PostgreSQL %.1fs", t.client.Seconds(), t.server.Seconds())
}
