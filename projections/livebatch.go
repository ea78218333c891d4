package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/failpoint"
	"lectern/pgtext"
)

// Live batches: a poll's events applied set-wise.
//
// watermill-sql hands a poll's events to the handlers one at a time, and a
// handler that wrote at once would cost a round trip (and a savepoint) per
// event. A projection whose handlers all follow the replay's rule (Handler:
// each touches only its stream's rows) instead has its poll transaction
// collect the decoded events while Watermill delivers them, and apply them
// when the subscriber goes on to acknowledge the batch: set-wise, as a replay
// does (groupSets), in one pipelined round trip together with the offset's
// update. The rows and the offset still commit together.
//
// A batch that fails (a handler's error, a statement the database refuses)
// is rolled back whole, and the projection polls its events again in
// careful mode: one event a poll, under a savepoint, with the retries and the
// poison stop of Runner.attempts, so that every event before a poison one is
// committed. Once as many careful polls as the failed poll delivered messages
// have committed, the projection is back to batches.

// errCareful ends a live batch that failed: its transaction is rolled back
// and the same events are polled again, one at a time.
var errCareful = errors.New("projection batch failed; applying its events one at a time")

// batchMode is one projection's choice between batches and careful polls.
type batchMode struct {
	careful atomic.Int64 // careful polls owed
}

// modeSchema reads a batch of events a poll, or one in careful mode.
type modeSchema struct {
	postgres.Schema
	one  postgres.Schema
	mode *batchMode
}

func newModeSchema(batch int, mode *batchMode) modeSchema {
	return modeSchema{Schema: postgres.NewSchema(batch), one: postgres.NewSchema(1), mode: mode}
}

func (s modeSchema) SelectQuery(params wsql.SelectQueryParams) (wsql.Query, error) {
	if s.mode.careful.Load() > 0 {
		return s.one.SelectQuery(params)
	}
	return s.Schema.SelectQuery(params)
}

// pollBeginner begins a projection's poll transactions (pollTx).
type pollBeginner struct {
	wsql.Beginner
	mode    *batchMode    // nil: never batched
	timeout time.Duration // bounds a statement left running at shutdown
	tracer  *applyTracer  // nil: tracing off
}

func newPollBeginner(pool *pgxpool.Pool, mode *batchMode, timeout time.Duration, tracer *applyTracer) pollBeginner {
	return pollBeginner{Beginner: wsql.BeginnerFromPgx(pool), mode: mode, timeout: timeout, tracer: tracer}
}

func (b pollBeginner) BeginTx(ctx context.Context, opts *sql.TxOptions) (wsql.Tx, error) {
	inner, err := b.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	ptx, ok := inner.(*wsql.PgxTx)
	if !ok {
		_ = inner.Rollback()
		return nil, fmt.Errorf("projection: watermill-sql began a %T, not a pgx transaction", inner)
	}
	batched := b.mode != nil && b.mode.careful.Load() == 0
	return &pollTx{Tx: ptx.Tx, ctx: ctx, mode: b.mode, timeout: b.timeout, batched: batched, tracer: b.tracer}, nil
}

// pollTx is a projection's poll transaction. Its statements and its commit
// run to their end even when the poll's context ends (the shutdown), then
// for at most the timeout: a statement cut short closes its connection, and
// the poll's commit would then fail.
//
// Batched, it collects the events the handlers are given (collect) and
// applies those the offset's update covers together with it (apply);
// otherwise handlers write through it at once. It learns which statement is
// the offset's update, and what that update acknowledges, from the offsets
// adapter (Acked), not from the statement or its arguments.
type pollTx struct {
	pgx.Tx
	ctx     context.Context // the poll's
	mode    *batchMode      // nil: never batched
	timeout time.Duration
	batched bool
	tracer  *applyTracer // nil: tracing off
	items   []setItem
	// delivered counts the poll's messages handed to the handlers, this
	// projection's or not: as many careful polls (one message each) take
	// them all again after a failure.
	delivered int
	failed    error // why the batch cannot commit
	// acked is what the offset's update watermill-sql is about to execute
	// acknowledges, told by postgres.Offsets.AckMessageQuery; nil until then.
	acked *eventstore.Position
}

// Acked implements postgres.AckReceiver: the next statement is the offset's
// update, acknowledging the messages up to pos.
func (t *pollTx) Acked(pos eventstore.Position) { t.acked = &pos }

var _ postgres.AckReceiver = (*pollTx)(nil)

// bounded is ctx without its cancellation: a statement under way when the
// poll's context ends (the shutdown) runs on, for at most the timeout.
func (t *pollTx) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(t.timeout, cancel) })
	return inner, func() { stop(); cancel() }
}

// collect takes an event for the batch.
func (t *pollTx) collect(it setItem) {
	t.items = append(t.items, it)
}

// fail abandons the batch: the subscriber's next statement reports err.
func (t *pollTx) fail(err error) {
	if t.failed == nil {
		t.failed = err
	}
}

// apply applies the collected events that the offset's update q covers (up
// to acked), then sends q, in one round trip: a batch under way at shutdown
// is applied and committed, not cut short. Applying the events is bounded by
// the timeout, as a handler's attempt is.
func (t *pollTx) apply(ctx context.Context, acked eventstore.Position, q string, args ...any) error {
	if t.failed != nil {
		return t.giveUp(t.failed)
	}
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	items := ackedItems(t.items, acked)
	t.items = nil
	if len(items) == 0 {
		_, err := t.Tx.Exec(ctx, q, args...)
		return err
	}
	ctx, cancelApply := context.WithTimeout(ctx, t.timeout)
	defer cancelApply()
	if t.tracer == nil {
		return t.applyItems(ctx, items, q, args)
	}
	ctx, span := t.tracer.startBatch(ctx, items)
	err := t.applyItems(ctx, items, q, args)
	t.tracer.end(span, err)
	return err
}

// applyItems is apply's round trip.
func (t *pollTx) applyItems(ctx context.Context, items []setItem, q string, args []any) error {
	ptx := newPipelineTx(t.Tx, defaultPipeline)
	if _, err := applySets(ctx, ptx, groupSets(items)); err != nil {
		return t.giveUp(err)
	}
	ptx.current = "(the offset's update)"
	if _, err := ptx.Exec(ctx, q, args...); err != nil {
		return t.giveUp(err)
	}
	if err := ptx.flush(ctx); err != nil {
		return t.giveUp(err)
	}
	failpoint.Reach(failpoint.ProjectionApplied)
	return nil
}

// ackedItems returns the items up to acked, the position the offset's
// update records. At shutdown watermill-sql may count the last message it
// delivered as not acked, when the ack and the end of the subscription
// arrive together: that event is read again at the next start, so its rows
// must not commit now.
func ackedItems(items []setItem, acked eventstore.Position) []setItem {
	n := len(items)
	for n > 0 {
		pos, err := eventstore.ParsePosition(items[n-1].m.Position)
		if err != nil || pos.Compare(acked) <= 0 {
			break
		}
		n--
	}
	return items[:n]
}

func (t *pollTx) giveUp(err error) error {
	t.failed = err
	t.mode.careful.Store(int64(max(t.delivered, 1)))
	return pgtext.Valueless(fmt.Errorf("%w: %w", errCareful, err)) // logged: not the values it may quote
}

// errUnacked refuses a batch's statement that came with no acked position:
// the batch cannot tell which of its events the statement would commit.
var errUnacked = errors.New("projection: a live batch's poll executed a statement no acked position came with (is its offsets adapter postgres.Offsets?)")

func (t *pollTx) ExecContext(ctx context.Context, q string, args ...any) (wsql.Result, error) {
	if t.batched {
		if t.acked != nil {
			acked := *t.acked
			t.acked = nil
			// What the statement affected goes only to watermill-sql's trace log.
			return wsql.PgxResult{}, t.apply(ctx, acked, q, args...)
		}
		if t.failed != nil {
			return wsql.PgxResult{}, t.giveUp(t.failed)
		}
		if len(t.items) > 0 {
			return wsql.PgxResult{}, t.giveUp(errUnacked)
		}
	}
	ctx, cancel := t.bounded(ctx)
	defer cancel()
	tag, err := t.Tx.Exec(ctx, q, args...)
	return wsql.PgxResult{CommandTag: tag}, err
}

func (t *pollTx) QueryContext(ctx context.Context, q string, args ...any) (wsql.Rows, error) {
	ctx, cancel := t.bounded(ctx)
	rows, err := t.Tx.Query(ctx, q, args...)
	if err != nil {
		cancel()
		return nil, err
	}
	return boundedRows{PgxRows: wsql.PgxRows{Rows: rows}, cancel: cancel}, nil
}

// boundedRows ends its statement's bounded context once they are closed.
type boundedRows struct {
	wsql.PgxRows
	cancel context.CancelFunc
}

func (r boundedRows) Close() error {
	err := r.PgxRows.Close()
	r.cancel()
	return err
}

// Commit commits; a careful poll that commits counts towards the
// projection's return to batches. Events still collected are dropped:
// watermill-sql commits without updating the offset only when it counted no
// message as acked (see ackedItems), and their rows must not commit without
// it.
func (t *pollTx) Commit() error {
	t.items, t.acked = nil, nil
	ctx, cancel := t.bounded(t.ctx)
	defer cancel()
	if err := t.Tx.Commit(ctx); err != nil {
		return err
	}
	if !t.batched && t.mode != nil && t.mode.careful.Add(-1) < 0 {
		t.mode.careful.Store(0)
	}
	return nil
}

func (t *pollTx) Rollback() error {
	t.items, t.acked = nil, nil
	ctx, cancel := t.bounded(t.ctx)
	defer cancel()
	return t.Tx.Rollback(ctx)
}
