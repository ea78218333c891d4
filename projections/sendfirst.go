package projections

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// sendFirst is a transaction with statements held back (pipelineTx,
// savepointTx): its calls that need their answer at once send what is held
// back first, with send, then run.
type sendFirst struct {
	pgx.Tx
	send func(ctx context.Context) error
}

func (t sendFirst) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.send(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t sendFirst) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.send(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t sendFirst) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.send(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, columns, src)
}

func (t sendFirst) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.send(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

// errRow is a row that fails to scan with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
