package projections

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// savepointTx is the transaction a live handler writes through: the
// savepoint that protects its event (see Runner.attempts) is sent in the
// same round trip as the handler's first Exec instead of one of its own.
// Other calls send it first.
type savepointTx struct {
	sendFirst
	pending []string // statements owed before the handler's first
}

func newSavepointTx(tx pgx.Tx, pending ...string) *savepointTx {
	t := &savepointTx{pending: pending}
	t.sendFirst = sendFirst{Tx: tx, send: t.establish}
	return t
}

type savepointKey struct{}

// established reports whether the event's savepoint has been set.
func (t *savepointTx) established() bool { return len(t.pending) == 0 }

func (t *savepointTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.established() {
		return t.Tx.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	for _, s := range t.pending {
		b.Queue(s)
	}
	b.Queue(sql, args...)
	res := t.Tx.SendBatch(ctx, b)
	defer func() { _ = res.Close() }()
	for range t.pending {
		if _, err := res.Exec(); err != nil {
			return pgconn.CommandTag{}, err
		}
	}
	t.pending = nil
	tag, err := res.Exec()
	if err != nil {
		return tag, err
	}
	return tag, res.Close()
}

// establish sends the owed statements on their own.
func (t *savepointTx) establish(ctx context.Context) error {
	if t.established() {
		return nil
	}
	b := &pgx.Batch{}
	for _, s := range t.pending {
		b.Queue(s)
	}
	if err := t.Tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	t.pending = nil
	return nil
}

func (t *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.establish(ctx); err != nil {
		return deferredBatch{err}
	}
	return t.Tx.SendBatch(ctx, b)
}
