package projections

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"lectern/pgtest"
	"lectern/poll"
	"lectern/reconnect"
	"lectern/testlog"
)

// However often its connection was dropped before, the listener waits the
// first backoff before it connects again: the wait starts over once it
// listened. (It once doubled for good, to 5 s, after a few drops in a
// process's life, and projections stalled as long after every later blip.)
func TestListenerReconnectsAfterTheFirstBackoffEveryTime(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx, cancel := context.WithCancel(context.Background())
	var logs testlog.Buffer
	l := NewListener(pool, slog.New(slog.NewJSONHandler(&logs, nil)))
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	backend := func() (pid int32) {
		if err := pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE application_name = $1 AND datname = current_database()`, ListenerApplicationName).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	var pid int32
	poll.Must(t, 10*time.Second, "the listener listening", func() bool { pid = backend(); return pid != 0 && l.Live() })
	const drops = 6
	for i := range drops {
		if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		poll.Must(t, 10*time.Second, "the listener listening again", func() bool {
			p := backend()
			if p == 0 || p == pid || !l.Live() {
				return false
			}
			pid = p
			return true
		})
		t.Logf("drop %d: back", i+1)
	}

	var waits []time.Duration
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Msg string        `json:"msg"`
			In  time.Duration `json:"in"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if strings.HasPrefix(rec.Msg, "notification listener disconnected") {
			waits = append(waits, rec.In)
		}
	}
	if len(waits) < drops {
		t.Fatalf("%d disconnections logged, want %d: %s", len(waits), drops, logs.String())
	}
	longest := time.Duration(float64(reconnect.Default.Min) * (1 + reconnect.Jitter))
	for i, w := range waits {
		if w > longest {
			t.Errorf("disconnection %d: waited %v before connecting again, want at most %v", i+1, w, longest)
		}
	}
}
