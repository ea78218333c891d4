// Package derrors defines the kinds of failure the domain reports. Code below
// the HTTP edge returns (wrapped) errors of these kinds; only the edge maps a
// kind to a status, with errors.Is and errors.As.
package derrors

import (
	"errors"
	"fmt"
	"time"
)

// Kinds of failure.
var (
	// ErrNotFound: the resource does not exist or is not the caller's.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request conflicts with the resource's current state.
	ErrConflict = errors.New("conflict")
	// ErrForbidden: the caller is known but may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthenticated: no valid credentials.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrBadRequest: the request is well-formed but cannot be honoured as sent
	// (a wrong verification code, a token for another e-mail).
	ErrBadRequest = errors.New("bad request")
	// ErrBadGateway: every upstream the request depended on failed.
	ErrBadGateway = errors.New("bad gateway")
)

// Error is a failure of a kind with a sentence for the client.
type Error struct {
	Kind   error
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

// New returns an error of kind with a client-facing sentence.
func New(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// FieldError is a business-rule violation of one input field, reported as a
// 422 validation error at Loc (e.g. ["body", "student_id"]).
type FieldError struct {
	Loc   []any
	Input any
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%v: %s", e.Loc, e.Msg) }

// Invalid returns a FieldError.
func Invalid(loc []any, input any, msg string) error {
	return &FieldError{Loc: loc, Input: input, Msg: msg}
}

// RateLimitedError asks the client to come back after RetryAfter.
type RateLimitedError struct {
	RetryAfter time.Duration
	Detail     string
}

func (e *RateLimitedError) Error() string { return e.Detail }

// Wrap adds context to *errp, keeping the chain for errors.Is/As:
//
//	defer derrors.Wrap(&err, "AppendToStream(%q)", stream)
func Wrap(errp *error, format string, args ...any) {
	if *errp != nil {
		*errp = fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), *errp)
	}
}
