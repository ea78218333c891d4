package projections

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"lectern/eventstore/postgres"
)

// wakeBackoff decides, between two polls of a projection's subscriber, when
// the next poll is worth its cost. A poll is a transaction that locks its
// group (postgres.LockOffset) and, when it applies events, takes a
// transaction id, which holds the pg_snapshot_xmin horizon back for every
// other group until it commits: polling on each wake-up would make the
// projections hold each other up. So the subscriber polls only when a cheap
// read-only probe sees an event the projection handles (see lookahead);
// events it does not handle are skipped by moving its offset, without a poll.
//
// After a poll that read events, one that handles events announced
// meanwhile polls again at once: under a steady stream of appends the probe
// would only ever say so, a round trip per poll.
type wakeBackoff struct {
	waker    *waker // a committed append (notification), or a nudge
	closing  <-chan struct{}
	fallback time.Duration // probe this often without notifications
	retry    time.Duration // after a failed poll
	logger   *slog.Logger
	probe    func() lookahead
}

// lookahead is what lies past a projection's offset.
type lookahead int

const (
	// idle: nothing committed past the offset.
	idle lookahead = iota
	// behindHorizon: committed events past the offset wait for an older
	// transaction to end before they may be read (DESIGN.md "The event
	// path"); re-probed at doubling intervals, 1 to 32 ms, then every 32 ms
	// until they can be read, since the transaction holding them back need
	// not be an append that notifies (nor in this database: the horizon is
	// the cluster's).
	behindHorizon
	// due: an event the projection handles can be read: poll.
	due
)

const lastQuickProbe = 32 * time.Millisecond

// HandleError is called after every poll; it returns how long the
// subscriber waits before the next one.
func (b *wakeBackoff) HandleError(_ watermill.LoggerAdapter, noMsg bool, err error) time.Duration {
	if errors.Is(err, errCareful) {
		b.logger.Warn("projection batch failed; polling its events again one at a time", "error", err)
		return 0
	}
	if err != nil {
		select {
		case <-b.closing: // a poll cut short by the shutdown: nothing failed
			return 0
		default:
		}
		b.logger.Error("projection query failed", "error", err)
		return b.retry
	}
	if !noMsg && b.waker.tookAppended() {
		select { // the signal that said so
		case <-b.waker.ch:
		default:
		}
		return 0
	}
	var quick time.Duration // the next re-probe while events wait behind the horizon
	for {
		switch b.probe() {
		case due:
			b.waker.appended.Store(false) // announced before this poll: it reads them
			return 0
		case behindHorizon:
			quick = min(max(2*quick, time.Millisecond), lastQuickProbe)
		case idle:
			quick = 0
		}
		wait := b.fallback
		if quick > 0 {
			wait = quick
		}
		t := time.NewTimer(wait)
		select {
		case <-b.waker.ch:
			quick = 0
		case <-t.C:
		case <-b.closing:
			t.Stop()
			return 0
		}
		t.Stop()
	}
}

// lookaheadWindow bounds the events one probe looks at.
const lookaheadWindow = 1000

// probeSQL reads the group's offset and what lies past it: how many events
// are readable below the horizon (up to the window), whether the projection
// handles any of them, the last one's position, and whether committed events
// wait behind the horizon. Scalar subqueries keep every range an index scan
// of the log's primary key, however long the log.
var probeSQL = `
	WITH o AS MATERIALIZED (
		SELECT coalesce((SELECT last_processed_transaction_id FROM projection_offsets WHERE consumer_group = $1), '0') AS t,
		       coalesce((SELECT offset_acked FROM projection_offsets WHERE consumer_group = $1), 0) AS f
	), readable AS MATERIALIZED (
		SELECT transaction_id, "offset", event_type FROM events
		WHERE (transaction_id, "offset") > ((SELECT t FROM o), (SELECT f FROM o))
		  AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY transaction_id, "offset" LIMIT ` + strconv.Itoa(lookaheadWindow) + `
	), last AS (
		SELECT transaction_id, "offset" FROM readable ORDER BY transaction_id DESC, "offset" DESC LIMIT 1
	)
	SELECT (SELECT t FROM o)::text, (SELECT f FROM o),
	       (SELECT count(*) FROM readable),
	       coalesce((SELECT bool_or(event_type = ANY($2)) FROM readable), false),
	       coalesce((SELECT transaction_id::text FROM last), ''),
	       coalesce((SELECT "offset" FROM last), 0),
	       coalesce((SELECT true FROM events
	                 WHERE (transaction_id, "offset") > ((SELECT t FROM o), (SELECT f FROM o))
	                   AND transaction_id >= pg_snapshot_xmin(pg_current_snapshot())
	                 ORDER BY transaction_id, "offset" LIMIT 1), false)`

// skipSQL moves a group's offset past events it does not handle, as a poll
// acking them would, provided nobody moved it since the probe read it; the
// advance is announced like an ack's.
const skipSQL = `
	WITH moved AS (
		UPDATE projection_offsets SET last_processed_transaction_id = $2::text::xid8, offset_acked = $3
		WHERE consumer_group = $1 AND last_processed_transaction_id = $4::text::xid8 AND coalesce(offset_acked, 0) = $5
		RETURNING 1)
	SELECT pg_notify('` + postgres.PositionsChannel + `', $6) FROM moved`

// prober returns the probe of one group, which handles the given event types.
func (r *Runner) prober(group string, types []string) func() lookahead {
	return func() lookahead {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for {
			var fromTxid, lastTxid string
			var fromOffset, count, lastOffset int64
			var handles, hidden bool
			err := r.pool.QueryRow(ctx, probeSQL, group, types).Scan(&fromTxid, &fromOffset, &count, &handles, &lastTxid, &lastOffset, &hidden)
			switch {
			case err != nil || handles:
				return due // on error, let the poll find out and report it
			case count == 0 && hidden:
				return behindHorizon
			case count == 0:
				return idle
			}
			pos := lastTxid + "-" + strconv.FormatInt(lastOffset, 10)
			tag, err := r.pool.Exec(ctx, skipSQL, group, lastTxid, lastOffset, fromTxid, fromOffset, group+" "+pos)
			if err != nil || tag.RowsAffected() != 1 {
				return due // moved by someone else, or no offsets row yet: poll
			}
			if count < lookaheadWindow {
				if hidden {
					return behindHorizon
				}
				return idle
			}
		}
	}
}
