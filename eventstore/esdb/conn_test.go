package esdb

import (
	"context"
	"errors"
	"fmt"
	"testing"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"lectern/eventstore"
)

// Failures of the connection under a call count as unavailable (503, and an
// append retried with the same ids); the server's answers about the data,
// and the caller giving up, do not.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "connection closed"), true},
		{status.Error(codes.Internal, "stream terminated by RST_STREAM"), true},
		{status.Error(codes.Canceled, "grpc: the client connection is closing"), true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.DeadlineExceeded, "slow")), true},
		{errDown, true},
		{status.Error(codes.InvalidArgument, "Invalid position"), false},
		{status.Error(codes.NotFound, "no stream"), false},
		{context.Canceled, false},
		{errors.New("something else"), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
		if got := errors.Is(classify(c.err), eventstore.ErrUnavailable); got != c.want {
			t.Errorf("classify(%v) unavailable = %v, want %v", c.err, got, c.want)
		}
	}
}

// The server's answers that it cannot read from a position (a cursor or
// checkpoint of another store) are ErrInvalidPosition, whether the client
// wrapped them (a read) or not (a dropped subscription); its other failures
// stay as they were.
func TestInvalidPositionAnswers(t *testing.T) {
	wrap := func(err error) error { e, _ := client.FromError(err); return e }
	for _, c := range []struct {
		err                  error
		invalid, unavailable bool
	}{
		{status.Error(codes.InvalidArgument, "Trying to read from an invalid position."), true, false},
		{wrap(status.Error(codes.InvalidArgument, "Trying to read from an invalid position.")), true, false},
		{status.Error(codes.Unknown, "Unexpected ReadAllResult: InvalidPosition"), true, false},
		{wrap(status.Error(codes.Unknown, "Unexpected ReadAllResult: InvalidPosition")), true, false},
		{wrap(status.Error(codes.Unknown, "Unexpected FilteredReadAllResult: InvalidPosition")), true, false},
		// The client's Unknown: also a connection torn down under the call.
		{wrap(status.Error(codes.Unknown, "Unexpected ReadAllResult: Error")), false, true},
		{status.Error(codes.Unavailable, "connection refused"), false, true},
		{wrap(status.Error(codes.Unavailable, "connection refused")), false, true},
		{status.Error(codes.DeadlineExceeded, "slow"), false, true},
	} {
		got := classify(c.err)
		if errors.Is(got, eventstore.ErrInvalidPosition) != c.invalid || errors.Is(got, eventstore.ErrUnavailable) != c.unavailable {
			t.Errorf("classify(%v) = %v; want invalid position %v, unavailable %v", c.err, got, c.invalid, c.unavailable)
		}
		if transient(c.err) != c.unavailable {
			t.Errorf("transient(%v) = %v, want %v", c.err, !c.unavailable, c.unavailable)
		}
	}
}
