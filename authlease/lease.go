// Package authlease tells a process when it may answer a session check
// (is the session revoked, which roles has the user) from memory: while it
// holds a lease that no change of those facts can commit under.
//
// The lease is a ROW EXCLUSIVE lock on the table auth_lease, held in a
// transaction on a connection of its own and taken afresh every Period. A
// change (a session revoked, a role granted) runs lectern_auth_barrier
// before it commits (migration 00024): it takes a SHARE lock on
// auth_lease, which waits until every lease taken before it is given up
// and lets none be taken until the change commits, then moves the
// sequence auth_epoch on. So:
//   - while a process holds a lease, no change commits;
//   - a lease taken after a change committed reads an epoch past the one
//     every lease before the change read.
//
// What a process read while holding a lease under epoch e is therefore true
// for as long as it holds leases under e. A lease is trusted for at most
// TTL after it was asked for. A process that stops or starves keeps its
// lock in PostgreSQL: a change waits a second for it, then ends the
// connections of leases idle in their transaction for over 500 ms (asked
// for before that, so trusted no more), and tries again. A lease is also
// lost, unknown to the process, when PostgreSQL ends its connection
// otherwise (an operator's pg_terminate_backend, a failover): the process
// finds out at its next renewal, within Period, or stops trusting the lease
// after TTL if the renewal is held up.
package authlease

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/reconnect"
)

// Period is how long a lease is held before it is given up and taken again:
// the longest a change waits for a live process.
const Period = 25 * time.Millisecond

// TTL is the longest a lease is trusted after it was asked for. The
// barrier ends a lease's connection only once it has been idle in its
// transaction 500 ms: TTL must stay well under that.
const TTL = 250 * time.Millisecond

// Lease holds the process's lease; Run keeps it.
type Lease struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	state  atomic.Pointer[held]
	now    func() time.Time
	// generation numbers the run of leases under one epoch read on one
	// connection (Run's goroutine alone writes it).
	generation int64
}

// held is a lease: its generation, trusted until until.
type held struct {
	generation int64
	until      time.Time
}

// New returns a lease over pool's database; Run takes it.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Lease {
	return &Lease{pool: pool, logger: logger, now: time.Now}
}

// Current returns the generation of the lease the process holds, and false
// when it holds none it may trust: then nothing may be answered from
// memory. What was read under a generation holds while Current returns it.
// Generations only grow, in a process: a new one starts whenever a lease
// reads another epoch than the last, or is taken on a new connection, so
// that an epoch read again (a database restored, or failed over to a
// standby behind it) never vouches for what was read before.
func (l *Lease) Current() (generation int64, ok bool) {
	h := l.state.Load()
	if h == nil || !l.now().Before(h.until) {
		return 0, false
	}
	return h.generation, true
}

// Run holds the lease until ctx ends, taking it again on a new connection
// when its connection fails.
func (l *Lease) Run(ctx context.Context) {
	_ = reconnect.Loop(ctx, reconnect.Default, func() (bool, error) {
		took, err := l.hold(ctx)
		l.state.Store(nil)
		return took, err
	}, func(err error, wait time.Duration) {
		l.logger.Warn("session-check lease lost; checks go to the database until it is taken again", "error", err, "in", wait)
	})
}

// applicationName names the lease's connection in pg_stat_activity.
const applicationName = "lectern auth lease"

// takeSQL gives up the lease held on conn, if any, and takes it again, in one
// round trip, reading the epoch under it.
const takeSQL = `COMMIT; BEGIN; LOCK TABLE auth_lease IN ROW EXCLUSIVE MODE; SELECT last_value FROM auth_epoch`

// hold takes the lease every Period on a connection of its own, until ctx
// ends or the connection fails; took reports whether it took it at all.
func (l *Lease) hold(ctx context.Context) (took bool, err error) {
	cfg := l.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = applicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	// The lease waits for changes' locks, and sits idle in its transaction
	// between renewals: no timeout an operator set for the others applies.
	if _, err := conn.Exec(ctx, `SET lock_timeout = 0; SET statement_timeout = 0; SET idle_in_transaction_session_timeout = 0`); err != nil {
		return false, err
	}
	last := int64(-1) // no epoch read on this connection yet
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return took, nil
		case <-timer.C:
		}
		// Forget first: from the COMMIT on, changes may commit.
		l.state.Store(nil)
		// Trusted from before the request: the lock is granted after it.
		asked := l.now()
		epoch, err := l.take(ctx, conn)
		if err != nil {
			return took, err
		}
		if epoch != last {
			l.generation++
			last = epoch
		}
		took = true
		l.state.Store(&held{generation: l.generation, until: asked.Add(TTL)})
		timer.Reset(Period)
	}
}

var errNoEpoch = errors.New("authlease: the lease query returned no epoch")

// take runs takeSQL on conn and returns the epoch it read.
func (l *Lease) take(ctx context.Context, conn *pgx.Conn) (int64, error) {
	results, err := conn.PgConn().Exec(ctx, takeSQL).ReadAll()
	if err != nil {
		return 0, err
	}
	if len(results) == 0 {
		return 0, errNoEpoch
	}
	last := results[len(results)-1]
	if len(last.Rows) != 1 || len(last.Rows[0]) != 1 {
		return 0, errNoEpoch
	}
	return strconv.ParseInt(string(last.Rows[0][0]), 10, 64)
}
