// Package derrors defines the kinds of failure the domain reports. Code below
// the HTTP edge returns (wrapped) errors of these kinds; only the edge maps a
// kind to a status, with errors.Is and errors.As.
package derrors

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	// ErrUnavailable: a service the request needs (the mail server) is
	// out of reach for now; the same request may be sent again.
	ErrUnavailable = errors.New("unavailable")
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

// FieldError is a business-rule violation of one field of a command, named
// in the domain's words: Field is the command's field ("name",
// "model_names"), or, for one item of a list field, the field and the item's
// index joined by a dot ("model_names.1"); "" is the command as a whole.
// It carries no request location: only the HTTP edge knows whether a field
// came in the body, the query or the path, and how the client is told.
type FieldError struct {
	// Kind, when set, names the rule for the edge (errors.Is matches it), for
	// a message the edge words itself.
	Kind  error
	Field string
	Input any
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap lets errors.Is match the Kind.
func (e *FieldError) Unwrap() error { return e.Kind }

// InvalidField returns a FieldError about field (see FieldError).
func InvalidField(field string, input any, msg string) error {
	return &FieldError{Field: field, Input: input, Msg: msg}
}

// Path returns Field as its parts: field names, and item indexes as ints
// ("model_names.1" is ["model_names", 1]); none for the command as a whole.
func (e *FieldError) Path() []any {
	if e.Field == "" {
		return nil
	}
	parts := strings.Split(e.Field, ".")
	path := make([]any, len(parts))
	for i, p := range parts {
		if n, err := strconv.Atoi(p); err == nil {
			path[i] = n
		} else {
			path[i] = p
		}
	}
	return path
}

// Item names the index-th item of a list field: Item("model_names", 1) is
// "model_names.1".
func Item(field string, index int) string { return field + "." + strconv.Itoa(index) }

// LocatedError is a request input the HTTP edge itself refused, at its place
// in the request (["query", "after"], ["header", "Idempotency-Key"]).
type LocatedError struct {
	Loc   []any
	Input any
	Msg   string
}

func (e *LocatedError) Error() string { return fmt.Sprintf("%v: %s", e.Loc, e.Msg) }

// Invalid returns a LocatedError. It is for the HTTP edge, which alone knows
// request locations; code below it names fields with InvalidField.
func Invalid(loc []any, input any, msg string) error {
	return &LocatedError{Loc: loc, Input: input, Msg: msg}
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
