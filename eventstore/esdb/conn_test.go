package esdb

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
