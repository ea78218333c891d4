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
	pgx.Tx
	pending []string // statements owed before the handler's first
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
	defer res.Close()
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

func (t *savepointTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.establish(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.establish(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.establish(ctx); err != nil {
		return deferredBatch{err}
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *savepointTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.establish(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, columns, src)
}

func (t *savepointTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.establish(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}
