package projections

import (
	"context"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
)

// wsqlTxKey is the context key under which watermill-sql's subscriber puts
// its transaction. watermill-sql does not export it (nor a setter), so it is
// learnt once from TxFromContext itself: a probing context records the key
// asked for.
var wsqlTxKey = func() any {
	p := &keyProbe{Context: context.Background()}
	wsql.TxFromContext(p)
	if p.key == nil {
		panic("projections: watermill-sql's TxFromContext asked for no context key")
	}
	return p.key
}()

type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

// ContextWithTx returns ctx carrying tx the way watermill-sql's subscriber
// carries its transaction, so projection handlers (On) and the runner's
// savepoint middleware write through tx. A subscriber other than
// watermill-sql's (ESDBSubscriber) uses it for its messages' contexts.
func ContextWithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, wsqlTxKey, wsql.Tx(&wsql.PgxTx{Tx: tx}))
}
