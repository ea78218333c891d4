package commands

import (
	"context"
	"sync/atomic"
)

// Meter adds up what the commands run under a context record: the bytes
// of the events they append and of the document texts they store. The
// HTTP edge charges it to the caller's write budget (quota): it is what a
// request stores, whatever its body held (a session run copies its
// agent's whole system prompt; a turn records its models' answers).
type Meter struct{ n atomic.Int64 }

type meterKey struct{}

// WithMeter makes m hear of every record of the commands run under ctx.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// Bytes is what m has heard of so far.
func (m *Meter) Bytes() int64 { return m.n.Load() }

// recorded adds n bytes to ctx's meter, if it has one.
func recorded(ctx context.Context, n int) {
	if m, ok := ctx.Value(meterKey{}).(*Meter); ok {
		m.n.Add(int64(n))
	}
}
