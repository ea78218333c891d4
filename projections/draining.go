package projections

import (
	"context"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// drainingSubscriber delays closing the SQL subscriber, and ending its
// subscriptions' contexts, until every message it handed out has been acked
// or nacked. watermill-sql commits a batch's transaction as soon as it is
// closed or its subscription's context ends, even while a handler is still
// writing through that transaction; waiting first keeps a half-applied event
// from being committed on shutdown (and the handler from using a transaction
// being committed: a data race in pgx).
type drainingSubscriber struct {
	inner message.Subscriber

	mu       sync.Mutex
	idle     *sync.Cond
	inFlight int
	closed   bool
	closing  chan struct{}

	closeInner sync.Once
	closeErr   error
}

func newDrainingSubscriber(inner message.Subscriber) *drainingSubscriber {
	d := &drainingSubscriber{inner: inner, closing: make(chan struct{})}
	d.idle = sync.NewCond(&d.mu)
	return d
}

// Subscribe forwards the inner subscription, counting messages in flight.
// The inner subscription's context ends once ctx has ended and the messages
// in flight are acked or nacked.
func (d *drainingSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	innerCtx, cancelInner := context.WithCancel(context.WithoutCancel(ctx))
	in, err := d.inner.Subscribe(innerCtx, topic)
	if err != nil {
		cancelInner()
		return nil, err
	}
	out := make(chan *message.Message)
	go func() {
		defer close(out)
		defer cancelInner()
		defer d.wait()
		for {
			var msg *message.Message
			select {
			case <-d.closing:
				return
			case <-ctx.Done():
				return
			case m, ok := <-in:
				if !ok {
					return
				}
				msg = m
			}
			if !d.begin() {
				return
			}
			select {
			case out <- msg:
				go func() {
					select {
					case <-msg.Acked():
					case <-msg.Nacked():
					}
					d.end()
				}()
			case <-d.closing:
				d.end()
				return
			case <-ctx.Done():
				d.end()
				return
			}
		}
	}()
	return out, nil
}

// wait waits until no message handed out is unanswered.
func (d *drainingSubscriber) wait() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.inFlight > 0 {
		d.idle.Wait()
	}
}

func (d *drainingSubscriber) begin() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.inFlight++
	return true
}

func (d *drainingSubscriber) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inFlight--
	if d.inFlight == 0 {
		d.idle.Broadcast()
	}
}

// Close stops handing out messages, waits for those in flight, then closes
// the inner subscriber. Every call returns once the inner subscriber is
// closed, which watermill-sql's is only once its poll under way has ended
// (a live batch being applied: pollTx): the router closes subscribers
// without waiting, so the runner calls Close again to wait.
func (d *drainingSubscriber) Close() error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.closing)
	}
	d.mu.Unlock()
	d.wait()
	d.closeInner.Do(func() { d.closeErr = d.inner.Close() })
	return d.closeErr
}
