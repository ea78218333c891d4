// Package eventstore is the port every event store adapter implements: streams
// with optimistic concurrency, and one global, totally ordered log.
package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ErrWrongExpectedVersion means the stream was not at the version the append expected.
var ErrWrongExpectedVersion = errors.New("eventstore: wrong expected version")

// ErrInvalidPosition means a position cursor could not be parsed.
var ErrInvalidPosition = errors.New("eventstore: invalid position")

// MaxAppendBytes is the most one append may carry, counted as EventStoreDB
// counts it (RecordSize of each event, summed): its default maximum append
// size, which 24.10 and 25.0 enforce (25.1 raised it). Both stores refuse
// more, so that what one accepts the other does too.
const MaxAppendBytes = 1 << 20

// RecordSize is an event's share of an append: its data, its metadata as
// stored, and twice its type's length.
func RecordSize(eventType string, data, metadata []byte) int {
	return len(data) + len(metadata) + 2*len(eventType)
}

// ErrAppendTooLarge means an append exceeded MaxAppendBytes; nothing was written.
var ErrAppendTooLarge = errors.New("eventstore: append too large")

// AppendTooLargeError is an ErrAppendTooLarge with the append's size.
type AppendTooLargeError struct{ Size int }

func (e *AppendTooLargeError) Error() string {
	return fmt.Sprintf("eventstore: an append of %d bytes exceeds the %d-byte limit", e.Size, MaxAppendBytes)
}

// Unwrap lets errors.Is match ErrAppendTooLarge.
func (e *AppendTooLargeError) Unwrap() error { return ErrAppendTooLarge }

// ErrUnavailable means the store could not be reached or did not answer in
// time; the same call may succeed later. An append that fails so may have
// been written: retrying it with the same event ids is safe.
var ErrUnavailable = errors.New("eventstore: unavailable")

// Store appends to streams and reads streams and the global log.
type Store interface {
	// Append writes events at the end of stream if the stream is at the expected
	// version. Appending the same event ids again is idempotent: it succeeds and
	// writes nothing.
	Append(ctx context.Context, stream string, expected ExpectedVersion, events []EventData) (AppendResult, error)
	// ReadStream reads up to limit events of one stream (limit <= 0: all),
	// forwards from version from (inclusive), or backwards from it (from <= 0:
	// from the end). A stream that does not exist reads as empty.
	ReadStream(ctx context.Context, stream string, dir Direction, from int64, limit int) ([]RecordedEvent, error)
	// ReadAll reads up to limit events of the global log after position after
	// (the zero Position: from the start), in log order. It never returns an
	// event before every event that precedes it in the log is visible.
	ReadAll(ctx context.Context, after Position, limit int) ([]RecordedEvent, error)
}

// LogEnder is a store that can tell where its log ends now: every event
// appended before the call is before the returned position, and no event can
// appear before it later. A read of the log bounded by it is the log as of
// the call (an export), however long the log takes to read.
type LogEnder interface {
	LogEnd(ctx context.Context) (Position, error)
}

// LogScanner is a store that can pass a stretch of its log to a function an
// event at a time, as stored, without holding the stretch in memory: an
// export of the whole log reads it so.
type LogScanner interface {
	// ScanAll calls fn with each event after position after and before
	// position end, in log order, limit at most, and returns how many it
	// passed. end must be a LogEnder's: every event before it is visible.
	// fn's event, and its byte slices, are valid only during the call. A
	// store that cannot scan (a wrapper of one that cannot) returns
	// ErrScanUnsupported before calling fn.
	ScanAll(ctx context.Context, after, end Position, limit int, fn func(*RawEvent) error) (int, error)
}

// ErrScanUnsupported is a LogScanner that cannot scan: read with ReadAll.
var ErrScanUnsupported = errors.New("eventstore: the store cannot scan its log")

// RawEvent is an event as a LogScanner passes it: its text members as
// stored, not copied.
type RawEvent struct {
	ID            uuid.UUID
	StreamID      []byte
	Version       int64
	Position      Position
	Type          []byte
	SchemaVersion int
	Data          []byte // the stored JSON text; nil for none
	Metadata      []byte // the stored JSON text of a Metadata
	RecordedAt    time.Time
}

// Direction of a stream read.
type Direction int

// Stream read directions.
const (
	Forwards Direction = iota
	Backwards
)

// ExpectedVersion is the precondition of an append.
type ExpectedVersion struct {
	kind    expectKind
	version int64
}

type expectKind int

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectExact
)

// Expected-version preconditions.
var (
	Any          = ExpectedVersion{kind: expectAny}
	NoStream     = ExpectedVersion{kind: expectNoStream}
	StreamExists = ExpectedVersion{kind: expectStreamExists}
)

// Exact expects the stream's last event to have version v (0: no stream).
func Exact(v int64) ExpectedVersion {
	if v == 0 {
		return NoStream
	}
	return ExpectedVersion{kind: expectExact, version: v}
}

// Check reports whether a stream whose last version is current satisfies e.
func (e ExpectedVersion) Check(current int64) bool {
	switch e.kind {
	case expectNoStream:
		return current == 0
	case expectStreamExists:
		return current > 0
	case expectExact:
		return current == e.version
	default:
		return true
	}
}

// IsAny reports whether e accepts any stream state.
func (e ExpectedVersion) IsAny() bool { return e.kind == expectAny }

// Exactly returns the exact version e expects, if it expects one (NoStream: 0).
func (e ExpectedVersion) Exactly() (int64, bool) {
	switch e.kind {
	case expectNoStream:
		return 0, true
	case expectExact:
		return e.version, true
	}
	return 0, false
}

func (e ExpectedVersion) String() string {
	switch e.kind {
	case expectNoStream:
		return "no stream"
	case expectStreamExists:
		return "stream exists"
	case expectExact:
		return strconv.FormatInt(e.version, 10)
	}
	return "any"
}

// Metadata travels with every event.
type Metadata struct {
	CorrelationID string `json:"correlation_id,omitempty"`
	CausationID   string `json:"causation_id,omitempty"`
	UserID        int64  `json:"user_id,omitempty"`
	RequestID     string `json:"request_id,omitempty"`
	// Actor names who acted outside the API: "cli:users create by ops"
	// for an operator's command line.
	Actor string `json:"actor,omitempty"`
	// TraceParent and TraceState are the W3C trace context of the append
	// that recorded the event, when tracing is on: the projections that
	// apply it link their spans to it, and its CloudEvent carries it.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// EventData is an event to append.
type EventData struct {
	ID            uuid.UUID
	Type          string
	SchemaVersion int
	Data          json.RawMessage
	Metadata      Metadata
	RecordedAt    time.Time
}

// RecordedEvent is an event as stored.
type RecordedEvent struct {
	ID            uuid.UUID
	StreamID      string
	Version       int64
	Position      Position
	Type          string
	SchemaVersion int
	Data          json.RawMessage
	Metadata      Metadata
	RecordedAt    time.Time
}

// AppendResult is where an append left the stream and the log.
type AppendResult struct {
	// Version is the stream's last version after the append.
	Version int64
	// Position is the log position of the last event appended.
	Position Position
}

// Position is a point in the global log. Each adapter fills it with its own
// total order (PostgreSQL: transaction id and offset; EventStoreDB: commit and
// prepare positions); callers only compare and print positions.
type Position struct {
	Commit  uint64
	Prepare uint64
}

// IsZero reports whether p is the start of the log.
func (p Position) IsZero() bool { return p == Position{} }

// Compare returns -1, 0 or +1 as p is before, at or after q.
func (p Position) Compare(q Position) int {
	switch {
	case p.Commit < q.Commit:
		return -1
	case p.Commit > q.Commit:
		return 1
	case p.Prepare < q.Prepare:
		return -1
	case p.Prepare > q.Prepare:
		return 1
	}
	return 0
}

// String is the cursor clients see, e.g. in X-Event-Position.
func (p Position) String() string {
	return strconv.FormatUint(p.Commit, 10) + "-" + strconv.FormatUint(p.Prepare, 10)
}

// AppendText appends p.String() to b.
func (p Position) AppendText(b []byte) []byte {
	b = strconv.AppendUint(b, p.Commit, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, p.Prepare, 10)
}

// ReadStreamPages reads stream forwards from its first event, size events
// at a time, and hands each page to page, until page returns true or the
// stream ends: a long stream is never held whole.
func ReadStreamPages(ctx context.Context, s Store, stream string, size int, page func([]RecordedEvent) (stop bool)) error {
	for from := int64(1); ; {
		evs, err := s.ReadStream(ctx, stream, Forwards, from, size)
		if err != nil {
			return err
		}
		if page(evs) || len(evs) < size {
			return nil
		}
		from = evs[len(evs)-1].Version + 1
	}
}

// MaxPositionLength is the longest a position's text may be: two uint64s
// in decimal and the dash ("18446744073709551615-18446744073709551615").
// Longer ones (leading zeros) are refused, so that a header or cursor
// costs no more than that to read.
const MaxPositionLength = 41

// ParsePosition parses a cursor written by Position.String.
func ParsePosition(s string) (Position, error) {
	if len(s) > MaxPositionLength {
		return Position{}, fmt.Errorf("%w: %d characters", ErrInvalidPosition, len(s))
	}
	commit, prepare, ok := strings.Cut(s, "-")
	if !ok {
		return Position{}, fmt.Errorf("%w: %q", ErrInvalidPosition, s)
	}
	c, err1 := strconv.ParseUint(commit, 10, 64)
	p, err2 := strconv.ParseUint(prepare, 10, 64)
	if err1 != nil || err2 != nil {
		return Position{}, fmt.Errorf("%w: %q", ErrInvalidPosition, s)
	}
	return Position{Commit: c, Prepare: p}, nil
}

// StreamName is "{category}-{id}", as EventStoreDB names streams.
func StreamName(category string, id int64) string {
	return category + "-" + strconv.FormatInt(id, 10)
}

// Category returns the category part of a stream name.
func Category(stream string) string {
	c, _, _ := strings.Cut(stream, "-")
	return c
}
