package esdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"lectern/eventstore"
)

// Backoff between rebuilds of a client whose server could not be reached.
const (
	minRebuildBackoff = 250 * time.Millisecond
	maxRebuildBackoff = 2 * time.Second
)

// conn owns the EventStoreDB client. The official client gives up for good
// when a discovery fails (the server was unreachable for about a second): its
// connection goroutine sets a close flag and exits, and every later call
// answers ConnectionClosed even once the server is back. conn builds a new
// client when a call finds its client closed, and until the new one may try
// again (a backoff that doubles while the server stays away) calls fail at
// once with eventstore.ErrUnavailable instead of waiting on a discovery.
//
// A client that gave up is dropped, not closed: Close closes the channel
// that callers which raced with the give-up may still be sending on, and a
// send on a closed channel panics. What it holds (a gRPC connection that had
// failed) is left to the garbage collector.
type conn struct {
	cfg *client.Configuration

	mu        sync.Mutex
	c         *client.Client
	calls     *sync.WaitGroup // calls started on c and not yet returned
	closed    bool
	downUntil time.Time     // no call before this: a rebuilt client waits
	backoff   time.Duration // the next wait after a failed discovery
}

func newConn(cfg *client.Configuration) (*conn, error) {
	c, err := client.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("esdb: client: %w", err)
	}
	return &conn{cfg: cfg, c: c, calls: new(sync.WaitGroup), backoff: minRebuildBackoff}, nil
}

// errDown is the answer while the server is known to be unreachable.
var errDown = fmt.Errorf("esdb: the server was unreachable moments ago: %w", eventstore.ErrUnavailable)

// errClosed answers calls made after Close.
var errClosed = errors.New("esdb: store closed")

// client returns the current client, or errDown while a rebuilt client waits
// out its backoff. The caller makes one call on it, then calls done. (The
// count is taken under mu, with closed, so that no call starts on a client
// once close waits for its calls.)
func (o *conn) client() (c *client.Client, done func(), err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, nil, errClosed
	}
	if time.Now().Before(o.downUntil) {
		return nil, nil, errDown
	}
	o.calls.Add(1)
	return o.c, o.calls.Done, nil
}

// readyAt is when the next call may be tried.
func (o *conn) readyAt() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.downUntil
}

// gaveUp: the call found its client closed, or was the call whose discovery
// failed and closed it. The client reports the latter with the code of the
// last failure (often Unknown), so its message is the only sign; a later
// release that changes the message only delays the rebuild to the next call,
// which finds the client closed.
func gaveUp(err error) bool {
	code, ok := errorCode(err)
	return ok && (code == client.ErrorCodeConnectionClosed || strings.Contains(err.Error(), "maximum discovery attempt count reached"))
}

// observe updates the connection's state after a call on c: a client that
// gave up is replaced (once, whichever caller comes first); any answer from
// the server resets the backoff.
func (o *conn) observe(c *client.Client, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gaveUp(err) {
		if o.closed || o.c != c {
			return
		}
		next, nerr := client.NewClient(o.cfg)
		if nerr != nil {
			return // the configuration was valid when first used; keep the old one
		}
		o.c, o.calls = next, new(sync.WaitGroup)
		o.downUntil = time.Now().Add(o.backoff)
		o.backoff = min(2*o.backoff, maxRebuildBackoff)
		return
	}
	if err == nil || !transient(err) {
		o.backoff = minRebuildBackoff
	}
}

// closeWait bounds how long close waits for the calls under way.
const closeWait = callWait

// close stops new calls, waits (closeWait at most) for those under way,
// then closes the client. The client's Close closes a channel that a call
// starting on it sends on (as for a client that gave up, above): closed under
// a call, it panics the process, which a shutdown during a read did in a
// test. A call still under way after closeWait keeps the client from being
// closed; the process is stopping, and the garbage collector has it.
func (o *conn) close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	c, calls := o.c, o.calls
	o.mu.Unlock()
	idle := make(chan struct{})
	go func() { calls.Wait(); close(idle) }()
	select {
	case <-idle:
		return c.Close()
	case <-time.After(closeWait):
		return fmt.Errorf("esdb: calls still under way after %v; the client was left open", closeWait)
	}
}

// callWait bounds the wait for the client to start a call (to return a
// subscription or a read stream, or to finish an append).
const callWait = 5 * time.Second

// call runs f on the current client and honours ctx, and callWait, even
// where the client does not: it waits for its connection without a context,
// which during a discovery takes a while, and forever for a caller that
// raced with a discovery that gave up (its request is sent on a channel
// nobody reads any more). A call abandoned so finishes in the background, or
// never; what it returns late is released with drop (nil: nothing to
// release). An append abandoned so is safe to retry (same event ids).
func call[T any](ctx context.Context, o *conn, f func(*client.Client) (T, error), drop func(T)) (T, error) {
	var zero T
	c, done, err := o.client()
	if err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		done()
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	results := make(chan result) // unbuffered: a result nobody takes is dropped
	abandoned := make(chan struct{})
	go func() {
		v, err := f(c)
		done()
		o.observe(c, err)
		select {
		case results <- result{v, err}:
		case <-abandoned:
			if err == nil && drop != nil {
				drop(v)
			}
		}
	}()
	t := time.NewTimer(callWait)
	defer t.Stop()
	select {
	case r := <-results:
		return r.v, classify(r.err)
	case <-ctx.Done():
		close(abandoned)
		return zero, ctx.Err()
	case <-t.C:
		close(abandoned)
		return zero, fmt.Errorf("%w: esdb: no answer within %v", eventstore.ErrUnavailable, callWait)
	}
}

// errorCode is the client's code of err, if it is a client error.
func errorCode(err error) (client.ErrorCode, bool) {
	// esdb.FromError uses a type assertion, which a wrapped error defeats.
	var esErr *client.Error
	if errors.As(err, &esErr) {
		return esErr.Code(), true
	}
	return 0, false
}

// transient: the server could not be reached, or the connection failed
// under the call, or no answer came in time; the same call may succeed
// later. The client reports a connection torn down under a call with the
// code of whatever gRPC said (Unavailable, but also Internal, Canceled or
// Unknown for a stream reset by a stopping server), so every failure that is
// not one of the server's answers about the data counts.
func transient(err error) bool {
	if errors.Is(err, eventstore.ErrUnavailable) {
		return true
	}
	code, ok := errorCode(err)
	if !ok {
		switch grpcCode(err) {
		case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.Internal, codes.Canceled, codes.ResourceExhausted:
			return true
		}
		return false
	}
	switch code {
	case client.ErrorCodeWrongExpectedVersion, client.ErrorCodeResourceNotFound, client.ErrorCodeStreamDeleted,
		client.ErrorCodeAccessDenied, client.ErrorCodeUnauthenticated, client.ErrorCodeUnsupportedFeature,
		client.ErrorCodeResourceAlreadyExists, client.ErrorCodeParsing:
		return false // the server's answer about the request: retrying changes nothing
	case client.ErrorCodeUnknown:
		// A position refused is an answer too.
		return grpcCode(err) != codes.InvalidArgument && !invalidPosition(err)
	}
	return true
}

// invalidPosition: the server cannot read from the position asked for (a
// cursor or checkpoint of another store, inside one of its records). A
// subscription is dropped with InvalidArgument "Trying to read from an invalid
// position."; a plain read of $all ends with Unknown "Unexpected
// ReadAllResult: InvalidPosition" (FilteredReadAllResult when filtered), the
// one unexpected result that retrying cannot change (KurrentDB v25.0.1:
// Enumerator.ReadAllForwards.cs:122-124, RpcExceptions.cs:51-52).
func invalidPosition(err error) bool {
	st, ok := grpcStatus(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return strings.Contains(strings.ToLower(st.Message()), "position")
	case codes.Unknown:
		return strings.HasPrefix(st.Message(), "Unexpected ") && strings.HasSuffix(st.Message(), "ReadAllResult: InvalidPosition")
	}
	return false
}

// classify marks transient failures as eventstore.ErrUnavailable, which the
// HTTP edge answers with 503 and Retry-After, and a position the server
// refuses (not one of its log: a cursor or checkpoint of another store) as
// eventstore.ErrInvalidPosition.
func classify(err error) error {
	switch {
	case err == nil || errors.Is(err, eventstore.ErrUnavailable) || errors.Is(err, eventstore.ErrInvalidPosition):
		return err
	case invalidPosition(err):
		return fmt.Errorf("%w: %w", eventstore.ErrInvalidPosition, err)
	case transient(err):
		return fmt.Errorf("%w: %w", eventstore.ErrUnavailable, err)
	}
	return err
}

// grpcCode is the gRPC status code in err's chain (codes.Unknown if none).
func grpcCode(err error) codes.Code {
	if st, ok := grpcStatus(err); ok {
		return st.Code()
	}
	return codes.Unknown
}

// grpcStatus is the gRPC status in err's chain, if any.
func grpcStatus(err error) (*status.Status, bool) {
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		return st.GRPCStatus(), true
	}
	return nil, false
}
