package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipelineTx is the transaction a replay hands to handlers: Exec and
// SendBatch are queued and sent in one pipelined batch per flush, instead of
// a round trip each, which is what makes a replay fast. Their results are
// therefore empty (see Handler); Query and QueryRow flush what is queued
// first and run at once, so a handler still reads its own writes.
type pipelineTx struct {
	sendFirst
	batch   pgx.Batch
	owners  []string // the event each queued statement belongs to
	current string   // the event whose handler is running
	limit   int      // flush once this many statements are queued
}

// defaultPipeline is how many statements a pipelineTx queues before it
// sends them, unless told otherwise.
const defaultPipeline = 1000

func newPipelineTx(tx pgx.Tx, limit int) *pipelineTx {
	t := &pipelineTx{limit: limit}
	t.sendFirst = sendFirst{Tx: tx, send: t.flush}
	return t
}

// errDeferred answers a handler that reads a deferred statement's result.
var errDeferred = errors.New("projection: a replay defers Exec and SendBatch; read results with Query or QueryRow")

func (t *pipelineTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.batch.Queue(sql, args...)
	t.owners = append(t.owners, t.current)
	if t.batch.Len() >= t.limit {
		return pgconn.CommandTag{}, t.flush(ctx)
	}
	return pgconn.CommandTag{}, nil
}

func (t *pipelineTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, q := range b.QueuedQueries {
		if q.Fn != nil { // a statement with a result callback runs at once
			if err := t.flush(ctx); err != nil {
				return deferredBatch{err}
			}
			return t.Tx.SendBatch(ctx, b)
		}
	}
	for _, q := range b.QueuedQueries {
		t.batch.Queue(q.SQL, q.Arguments...)
		t.owners = append(t.owners, t.current)
	}
	if t.batch.Len() >= t.limit {
		if err := t.flush(ctx); err != nil {
			return deferredBatch{err}
		}
	}
	return deferredBatch{nil}
}

func (t *pipelineTx) Commit(ctx context.Context) error {
	if err := t.flush(ctx); err != nil {
		return err
	}
	return t.Tx.Commit(ctx)
}

// flush sends what is queued; an error names the event whose statement failed.
func (t *pipelineTx) flush(ctx context.Context) error {
	n := t.batch.Len()
	if n == 0 {
		return nil
	}
	b := t.batch
	owners := t.owners
	t.batch, t.owners = pgx.Batch{}, nil
	res := t.Tx.SendBatch(ctx, &b)
	for i := range n {
		if _, err := res.Exec(); err != nil {
			_ = res.Close()
			return fmt.Errorf("event %s: %w", owners[i], err)
		}
	}
	return res.Close()
}

// deferredBatch is the result of a deferred SendBatch: Close reports only an
// error of a flush it caused.
type deferredBatch struct{ err error }

func (b deferredBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.orDeferred() }
func (b deferredBatch) Query() (pgx.Rows, error)         { return nil, b.orDeferred() }
func (b deferredBatch) QueryRow() pgx.Row                { return errRow{b.orDeferred()} }
func (b deferredBatch) Close() error                     { return b.err }
func (b deferredBatch) Tx() pgx.Tx                       { return nil }

func (b deferredBatch) orDeferred() error {
	if b.err != nil {
		return b.err
	}
	return errDeferred
}
