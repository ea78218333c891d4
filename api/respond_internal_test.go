package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// driverError stands for pgconn's own errors, which say whether a retry is
// safe (their types are unexported).
type driverError struct{ err error }

func (e driverError) Error() string     { return "pgconn: " + e.err.Error() }
func (e driverError) Unwrap() error     { return e.err }
func (e driverError) SafeToRetry() bool { return false }

func TestDatabaseUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a connection lost mid-statement", fmt.Errorf("append: %w", driverError{refused}), true},
		{"the stream ended early", driverError{io.ErrUnexpectedEOF}, true},
		{"a closed connection", fmt.Errorf("query: %w", pgconn.ErrConnClosed), true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"a connection exception", &pgconn.PgError{Code: "08006"}, true},
		{"shutting down", &pgconn.PgError{Code: "57P01"}, true},
		{"a statement_timeout", &pgconn.PgError{Code: "57014"}, true},
		{"a unique violation is not an outage", &pgconn.PgError{Code: "23505"}, false},
		{"a message the driver could not send is not an outage", driverError{errors.New("message body too large")}, false},
		{"a mail server refusing connections is not the database", fmt.Errorf("mail: %w", refused), false},
		{"a deadline of something else is not the database", fmt.Errorf("embed: %w", context.DeadlineExceeded), false},
	} {
		if got := databaseUnavailable(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
