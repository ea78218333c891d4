package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/jackc/pgx/v5"

	"lectern/events"
)

// Handler applies one event inside the projection's transaction.
//
// A handler expresses its idempotence guards in SQL (ON CONFLICT, version
// conditions), not by reading the result of an Exec: a replay defers Exec
// and SendBatch into one pipelined batch, where their results are empty.
// Query and QueryRow run at once in both modes.
type Handler[T events.Event] func(ctx context.Context, tx pgx.Tx, m events.Meta, e T) error

// On adapts a typed handler to Watermill's group handler: it takes the
// subscriber's transaction from the message context, so the rows it writes
// commit together with the projection's offset.
func On[T events.Event](h Handler[T]) GroupHandler {
	return typedHandler[T]{h: h}
}

// typedHandler is a handler that both the live runner (through Watermill)
// and a replay (directly) can call.
type typedHandler[T events.Event] struct{ h Handler[T] }

func (t typedHandler[T]) NewEvent() any { return new(T) }

func (t typedHandler[T]) Handle(ctx context.Context, event any) error {
	tx, err := txFrom(ctx)
	if err != nil {
		return err
	}
	msg := cqrs.OriginalMessageFromCtx(ctx)
	if msg == nil {
		return errors.New("projection: no message in context")
	}
	m, err := metaOf(msg)
	if err != nil {
		return err
	}
	return t.apply(ctx, tx, m, event)
}

func (t typedHandler[T]) apply(ctx context.Context, tx pgx.Tx, m events.Meta, event any) error {
	e, ok := event.(*T)
	if !ok {
		return fmt.Errorf("projection: event is %T, not %T", event, new(T))
	}
	return t.h(ctx, tx, m, *e)
}

// replayable is what a replay needs of a handler.
type replayable interface {
	GroupHandler
	apply(ctx context.Context, tx pgx.Tx, m events.Meta, event any) error
}
