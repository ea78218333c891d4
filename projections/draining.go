package projections

import (
	"context"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// drainingSubscriber delays closing the SQL subscriber until every message it
// handed out has been acked or nacked. watermill-sql commits a batch's
// transaction as soon as it is closed, even while a handler is still writing
// through that transaction; waiting first keeps a half-applied event from
// being committed on shutdown.
type drainingSubscriber struct {
	inner message.Subscriber

	mu       sync.Mutex
	idle     *sync.Cond
	inFlight int
	closed   bool
	closing  chan struct{}
}

func newDrainingSubscriber(inner message.Subscriber) *drainingSubscriber {
	d := &drainingSubscriber{inner: inner, closing: make(chan struct{})}
	d.idle = sync.NewCond(&d.mu)
	return d
}

// Subscribe forwards the inner subscription, counting messages in flight.
func (d *drainingSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	in, err := d.inner.Subscribe(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	go func() {
		defer close(out)
		for {
			var msg *message.Message
			select {
			case <-d.closing:
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
			}
		}
	}()
	return out, nil
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
// the inner subscriber.
func (d *drainingSubscriber) Close() error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.closing)
	}
	for d.inFlight > 0 {
		d.idle.Wait()
	}
	d.mu.Unlock()
	return d.inner.Close()
}
