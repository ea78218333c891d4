package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/pgtext"
)

// Handler applies one event inside the projection's transaction.
//
// A handler expresses its idempotence guards in SQL (ON CONFLICT, version
// conditions), not by reading the result of an Exec: a replay and a live
// batch (pollTx) defer Exec and SendBatch into one pipelined batch, where
// their results are empty. Query and QueryRow run at once in every mode.
//
// A handler reads and writes only the rows of its event's stream (a counter
// shared by streams only adds): a replay and a live batch apply the events
// of different streams out of log order, each stream's in order (sets.go).
// The exception, an erasure, is applied in log order (see crossStream).
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
	return handle(ctx, t, event)
}

// handle applies one event Watermill delivered with h, or collects it for
// the live batch it belongs to (pollTx).
func handle(ctx context.Context, h replayable, event any) error {
	msg := cqrs.OriginalMessageFromCtx(ctx)
	if msg == nil {
		return errors.New("projection: no message in context")
	}
	m, err := metaOf(msg)
	if err != nil {
		return err
	}
	if b, ok := batchOf(ctx); ok {
		b.collect(setItem{h: h, typ: marshaler{}.NameFromMessage(msg), stream: m.StreamID, m: m, e: event})
		return nil
	}
	tx, err := txFrom(ctx)
	if err != nil {
		return err
	}
	// Watermill logs the error before the runner sees it: not the values
	// it may quote.
	return pgtext.Valueless(h.applyAll(ctx, tx, []events.Meta{m}, []any{event}))
}

func (t typedHandler[T]) apply(ctx context.Context, tx pgx.Tx, m events.Meta, event any) error {
	e, ok := event.(*T)
	if !ok {
		return fmt.Errorf("projection: event is %T, not %T", event, new(T))
	}
	return t.h(ctx, tx, m, *e)
}

// applyAll applies events one by one.
func (t typedHandler[T]) applyAll(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []any) error {
	for i, e := range es {
		if err := t.apply(ctx, tx, ms[i], e); err != nil {
			return err
		}
	}
	return nil
}

// SetHandler applies several events of one type, each of a different
// stream, with one statement for all of them: what makes a replay fast.
// Live, it is called with one event at a time.
type SetHandler[T events.Event] func(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []T) error

// OnSet adapts a set handler to Watermill's group handler, as On does.
func OnSet[T events.Event](h SetHandler[T]) GroupHandler {
	return setHandler[T]{h: h}
}

type setHandler[T events.Event] struct{ h SetHandler[T] }

// metaColumns are the events' stream versions and times, as a set handler
// binds them.
func metaColumns(ms []events.Meta) (versions []int64, at []time.Time) {
	versions, at = make([]int64, len(ms)), make([]time.Time, len(ms))
	for i, m := range ms {
		versions[i], at[i] = m.Version, m.RecordedAt
	}
	return versions, at
}

func (s setHandler[T]) NewEvent() any { return new(T) }

func (s setHandler[T]) Handle(ctx context.Context, event any) error {
	return handle(ctx, s, event)
}

func (s setHandler[T]) applyAll(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []any) error {
	ts := make([]T, len(es))
	for i, e := range es {
		t, ok := e.(*T)
		if !ok {
			return fmt.Errorf("projection: event is %T, not %T", e, new(T))
		}
		ts[i] = *t
	}
	return s.h(ctx, tx, ms, ts)
}

// replayable is what a replay needs of a handler: to apply events of
// different streams (see Replayer) in one call.
type replayable interface {
	GroupHandler
	applyAll(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []any) error
}

// handlersByType is hs with one handler per event type: handlers of one type
// (projections merged into one consumer group, each anonymising its tables
// on user.erased) become one that applies each in turn, in hs's order. The
// runner batches only a group with one handler a type, and a replay and a
// set apply an event with one handler. Handlers that cannot be combined (not
// built with On or OnSet) are left as they are.
func handlersByType(hs []GroupHandler) []GroupHandler {
	out := make([]GroupHandler, 0, len(hs))
	at := map[string]int{}
	for _, h := range hs {
		name := marshaler{}.Name(h.NewEvent())
		i, seen := at[name]
		if !seen {
			at[name] = len(out)
			out = append(out, h)
			continue
		}
		first, ok1 := out[i].(replayable)
		next, ok2 := h.(replayable)
		if !ok1 || !ok2 {
			out = append(out, h)
			continue
		}
		c, ok := first.(combinedHandler)
		if !ok {
			c = combinedHandler{parts: []replayable{first}}
		}
		c.parts = append(slices.Clip(c.parts), next)
		out[i] = c
	}
	return out
}

// combinedHandler applies one event type's events with several handlers,
// one after the other, in one transaction. They share the decoded event,
// which handlers only read.
type combinedHandler struct{ parts []replayable }

func (c combinedHandler) NewEvent() any { return c.parts[0].NewEvent() }

func (c combinedHandler) Handle(ctx context.Context, event any) error {
	return handle(ctx, c, event)
}

func (c combinedHandler) applyAll(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []any) error {
	for _, p := range c.parts {
		if err := p.applyAll(ctx, tx, ms, es); err != nil {
			return err
		}
	}
	return nil
}
