package projections

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// txKey is the context key of a transaction a subscriber of our own
// (ESDBSubscriber) gives its messages. watermill-sql's subscriber carries its
// transaction under a key it does not export; handlers read that one
// through its public TxFromContext (txFrom), so nothing here depends on how
// watermill-sql stores it.
type txKey struct{}

// ContextWithTx returns ctx carrying tx, so projection handlers (On) and the
// runner's savepoint middleware write through tx: for the messages of a
// subscriber other than watermill-sql's.
func ContextWithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}
