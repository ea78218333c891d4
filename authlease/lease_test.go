package authlease

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/pgtest"
	"lectern/poll"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// running starts a lease on a database of the test's own and waits until
// it is held.
func running(t *testing.T) *Lease {
	t.Helper()
	pool := pgtest.Fresh(t)
	l := New(pool, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.Must(t, 10*time.Second, "the lease held", func() bool { _, ok := l.Current(); return ok })
	return l
}

// leaseBackend is the pid of the backend holding l's lease (0: none).
func leaseBackend(t *testing.T, l *Lease) int {
	t.Helper()
	var pid int
	err := l.pool.QueryRow(context.Background(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, applicationName).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// The lease's promise: once a change has committed, the process does not
// hold a lease under the epoch from before it. Without the barrier's lock
// the change commits while the lease still holds that epoch, for up to a
// Period: most of these tries would see it.
func TestNoLeaseOutlivesAChange(t *testing.T) {
	t.Parallel()
	l := running(t)
	ctx := context.Background()
	pid := leaseBackend(t, l)
	changes := map[string]func(t *testing.T) error{
		"the barrier": func(*testing.T) error {
			_, err := l.pool.Exec(ctx, `SELECT lectern_auth_barrier()`)
			return err
		},
		"a session revoked": func(t *testing.T) error {
			family := uuid.New()
			if _, err := l.pool.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at)
				VALUES ($1, 1, $2, now() + interval '1 hour')`, uuid.NewString(), family); err != nil {
				return err
			}
			_, err := l.pool.Exec(ctx, `UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1`, family)
			return err
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			for try := range 20 {
				var before int64
				poll.Must(t, 10*time.Second, "the lease held", func() bool {
					var ok bool
					before, ok = l.Current()
					return ok
				})
				if err := change(t); err != nil {
					t.Fatal(err)
				}
				if after, ok := l.Current(); ok && after <= before {
					t.Fatalf("try %d: the change committed while the lease held epoch %d (now %d)", try, before, after)
				}
			}
		})
	}
	// A live lease is waited for, never ended.
	if now := leaseBackend(t, l); now != pid {
		t.Errorf("the lease moved from backend %d to %d", pid, now)
	}
}

// A session made valid again, or a token only rotated, is no change the
// lease need wait for.
func TestOnlyRevocationsMoveTheEpoch(t *testing.T) {
	t.Parallel()
	l := running(t)
	ctx := context.Background()
	epoch := func() int64 { return epochOf(t, l.pool) }
	hash := uuid.NewString()
	if _, err := l.pool.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at)
		VALUES ($1, 1, $2, now() + interval '1 hour')`, hash, uuid.New()); err != nil {
		t.Fatal(err)
	}
	before := epoch()
	if _, err := l.pool.Exec(ctx, `UPDATE refresh_tokens SET rotated_at = now() WHERE token_hash = $1`, hash); err != nil {
		t.Fatal(err)
	}
	if got := epoch(); got != before {
		t.Errorf("a rotation moved the epoch from %d to %d", before, got)
	}
	if _, err := l.pool.Exec(ctx, `UPDATE refresh_tokens SET revoked_at = now() WHERE token_hash = $1`, hash); err != nil {
		t.Fatal(err)
	}
	if got := epoch(); got == before {
		t.Errorf("a revocation left the epoch at %d", got)
	}
}

// A process that stops while it holds its lease keeps its lock in
// PostgreSQL: a change waits for it, then ends its connection (its lease
// has lapsed by then) and goes on. The epoch moves only once the change
// holds the lock: a lease taken while the change waited read the old one,
// and was given up before the change committed.
func TestAStoppedHolderHoldsChangesUpOnlyBriefly(t *testing.T) {
	t.Parallel()
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	epoch := func() int64 { return epochOf(t, pool) }
	holder := stoppedHolder(t, pool)
	before := epoch()
	done := barrier(pool)
	barrierWaiting(t, pool)
	if got := epoch(); got != before {
		t.Errorf("the epoch moved from %d to %d while the change waited for the lock", before, got)
	}
	committed(t, done)
	if got := epoch(); got <= before {
		t.Errorf("the epoch is %d after the change, want past %d", got, before)
	}
	if _, err := holder.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("the stopped holder's connection still holds its lease")
	}
	// The change's own lock_timeout did not stay behind.
	var timeout string
	if err := pool.QueryRow(ctx, `SELECT current_setting('lock_timeout')`).Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "0" {
		t.Errorf("lock_timeout after the barrier is %q, want the session's 0", timeout)
	}
}

func TestALeaseIsTrustedForItsTTLAtMost(t *testing.T) {
	now := time.Now()
	l := &Lease{now: func() time.Time { return now }}
	if _, ok := l.Current(); ok {
		t.Fatal("a lease never taken is trusted")
	}
	l.state.Store(&held{generation: 7, until: now.Add(TTL)})
	if epoch, ok := l.Current(); !ok || epoch != 7 {
		t.Fatalf("Current() = %d, %v; want 7, true", epoch, ok)
	}
	now = now.Add(TTL)
	if _, ok := l.Current(); ok {
		t.Fatal("a lease is trusted past its TTL")
	}
}

// PostgreSQL ending the lease's connection loses the lease; it is taken
// again on a new connection.
func TestTheLeaseIsTakenAgainAfterItsConnectionEnds(t *testing.T) {
	t.Parallel()
	l := running(t)
	ctx := context.Background()
	backend := func() int { return leaseBackend(t, l) }
	first := backend()
	if first == 0 {
		t.Fatal("no backend holds the lease")
	}
	generation, ok := l.Current()
	if !ok {
		t.Fatal("the lease is not held")
	}
	if _, err := l.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, first); err != nil {
		t.Fatal(err)
	}
	// One fact, read whole: a lease held under a later generation, on
	// another backend. (Read apart, a Current from before the lease saw
	// the loss and a backend of its reconnection, still taking the lease,
	// passed, and the generation read next was none.)
	poll.Must(t, 20*time.Second, "the lease held again, on a new connection, under a later generation", func() bool {
		now, ok := l.Current()
		if !ok || now <= generation {
			return false
		}
		pid := backend()
		return pid != 0 && pid != first
	})
}

// An epoch read again, after the sequence went back (a database restored,
// or failed over to a standby behind it), starts a new generation: what
// was read under the epoch before never counts again.
func TestAnEpochReadAgainStartsANewGeneration(t *testing.T) {
	t.Parallel()
	l := running(t)
	ctx := context.Background()
	epoch := epochOf(t, l.pool)
	first, _ := l.Current()
	last := first
	for _, to := range []int64{epoch + 5, epoch} {
		if _, err := l.pool.Exec(ctx, `SELECT setval('auth_epoch', $1)`, to); err != nil {
			t.Fatal(err)
		}
		poll.Must(t, 10*time.Second, fmt.Sprintf("a lease read epoch %d", to), func() bool {
			g, ok := l.Current()
			if ok && g != last {
				last = g
				return true
			}
			return false
		})
	}
	if last == first {
		t.Errorf("epoch %d read again brought generation %d back", epoch, first)
	}
}

// stoppedHolder takes a lease as a process would, on a connection of its
// own, and keeps it: a process that stopped.
func stoppedHolder(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	holder, err := takeAndStop(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	return holder
}

func takeAndStop(pool *pgxpool.Pool) (pgx.Tx, error) {
	ctx := context.Background()
	holder, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := holder.Exec(ctx, `LOCK TABLE auth_lease IN ROW EXCLUSIVE MODE`); err != nil {
		_ = holder.Rollback(ctx)
		return nil, err
	}
	return holder, nil
}

// barrier runs the barrier as a change of its own, in the background; its
// result arrives on the channel.
func barrier(pool *pgxpool.Pool) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := pool.Exec(context.Background(), `SELECT lectern_auth_barrier()`)
		done <- err
	}()
	return done
}

// committed waits for a barrier started by barrier to end, and fails the
// test if it failed or is still waiting after 30 s.
func committed(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the change failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the change still waits for holders that stopped")
	}
}

// epochOf reads pool's auth_epoch.
func epochOf(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT last_value FROM auth_epoch`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// barrierWaiting polls until a barrier waits for a lock.
func barrierWaiting(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	poll.Must(t, 10*time.Second, "the change waiting for a lease's lock", func() bool {
		var waiting bool
		if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%lectern_auth_barrier%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
}

// A change waiting for a stopped holder ends that holder's connection, not
// the live leases that queued behind the change meanwhile.
func TestAStoppedHolderCostsLiveLeasesNothing(t *testing.T) {
	t.Parallel()
	l := running(t)
	live := leaseBackend(t, l)
	holder := stoppedHolder(t, l.pool)
	if _, err := l.pool.Exec(context.Background(), `SELECT lectern_auth_barrier()`); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(context.Background(), `SELECT 1`); err == nil {
		t.Error("the stopped holder's connection still holds its lease")
	}
	if now := leaseBackend(t, l); now != live {
		t.Errorf("the live lease moved from backend %d to %d", live, now)
	}
}

// Holders that take their leases while the change waits for another
// (granted when the change's wait times out) and stop too are ended on
// the change's next passes, the one that connected after its first pass as
// well: each pass reads pg_stat_activity afresh.
func TestAChangeOutlastsHoldersStoppingOneAfterAnother(t *testing.T) {
	t.Parallel()
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	holders := []pgx.Tx{stoppedHolder(t, pool)}
	done := barrier(pool)
	barrierWaiting(t, pool)
	for range 2 {
		// Queued behind the change, granted when its wait times out.
		tx, err := takeAndStop(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		holders = append(holders, tx)
	}
	committed(t, done)
	for i, h := range holders {
		if _, err := h.Exec(ctx, `SELECT 1`); err == nil {
			t.Errorf("stopped holder %d still holds its lease", i+1)
		}
	}
}
