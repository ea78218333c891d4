// Package esdb is the EventStoreDB adapter of the event store port, over the
// official gRPC client (github.com/EventStore/EventStore-Client-Go/v4).
//
// Streams map one to one; Lectern's 1-based versions are EventStoreDB's
// 0-based revisions plus one; a log position is EventStoreDB's commit and
// prepare positions. Event ids are the caller's, so a retried append is
// idempotent on the server. Stream reads need a server of 22.6 or later (older
// ones send no positions with stream events).
package esdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"

	"lectern/eventstore"
)

// readAllLimit is ReadAll's page size when the caller gives none, as in the
// PostgreSQL adapter.
const readAllLimit = 1000

// Store is an eventstore.Store on EventStoreDB.
type Store struct {
	conn *conn
	// AppendRetryFor is how long an append is retried while the server is
	// unreachable or times out, with the same event ids at the same expected
	// revision (the server recognises a repeat); then it fails with
	// eventstore.ErrUnavailable.
	AppendRetryFor time.Duration
}

// Defaults of a Store.
const (
	DefaultAppendRetryFor = 2 * time.Second
	// defaultDiscoverAttempts replaces the client's 10 (at 100 ms apart)
	// when the connection string does not set maxDiscoverAttempts, so that a
	// discovery of a server that is down ends within a third of a second.
	defaultDiscoverAttempts = 3
)

var _ eventstore.Store = (*Store)(nil)

// Open connects to the EventStoreDB node of a connection string such as
// esdb://localhost:2113?tls=false, and checks that it answers: the client
// gives up for good when its first discovery fails, so a server that is down
// must fail here, not on the first append.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := client.ParseConnectionString(url)
	if err != nil {
		return nil, fmt.Errorf("esdb: connection string: %w", err)
	}
	if !strings.Contains(strings.ToLower(url), "maxdiscoverattempts=") {
		cfg.MaxDiscoverAttempts = defaultDiscoverAttempts
	}
	// The client logs every failed call to stdout, including expected
	// outcomes such as a wrong expected version; errors reach the caller anyway.
	cfg.Logger = func(client.LogLevel, string, ...any) {}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := s.ReadStream(ctx, "lectern-connection-probe", eventstore.Backwards, 0, 1); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("esdb: connect: %w", err)
	}
	return s, nil
}

// New returns a Store on a configuration the caller built; it connects on
// its first call.
func New(cfg *client.Configuration) (*Store, error) {
	o, err := newConn(cfg)
	if err != nil {
		return nil, err
	}
	return &Store{conn: o, AppendRetryFor: DefaultAppendRetryFor}, nil
}

// Close closes the connection.
func (s *Store) Close() error { return s.conn.close() }

// PositionOf is the client library's position as the store's.
func PositionOf(p client.Position) eventstore.Position {
	return eventstore.Position{Commit: p.Commit, Prepare: p.Prepare}
}

// ClientPosition is the store's position as the client library's.
func ClientPosition(p eventstore.Position) client.Position {
	return client.Position{Commit: p.Commit, Prepare: p.Prepare}
}

// SubscribeToAll subscribes to $all on the current client (a new one after
// the server was unreachable), honouring ctx while the client connects. A
// position no EventStoreDB log holds fails with eventstore.ErrInvalidPosition.
func (s *Store) SubscribeToAll(ctx context.Context, opts client.SubscribeToAllOptions) (*client.Subscription, error) {
	if p, ok := opts.From.(client.Position); ok {
		if err := checkPosition(PositionOf(p)); err != nil {
			return nil, fmt.Errorf("esdb: subscribe to $all: %w", err)
		}
	}
	return call(ctx, s.conn, func(c *client.Client) (*client.Subscription, error) { return c.SubscribeToAll(ctx, opts) },
		func(sub *client.Subscription) { _ = sub.Close() })
}

// DroppedError classifies the error a subscription dropped with as the
// store's calls are: eventstore.ErrInvalidPosition when the server cannot
// read from its start (it confirms such a subscription, then drops it),
// eventstore.ErrUnavailable when the connection failed.
func (s *Store) DroppedError(err error) error { return classify(err) }

// checkPosition refuses what no EventStoreDB position is: a prepare past its
// commit, or a commit past int64. The server's Position constructor throws on
// both (KurrentDB v25.0.1, Transport/Common/Position.cs:47-60), and its answer,
// Unknown "Exception was thrown by handler.", tells nothing of the cause.
func checkPosition(p eventstore.Position) error {
	if p.Prepare > p.Commit || p.Commit > math.MaxInt64 {
		return fmt.Errorf("%w: %v is no position of an EventStoreDB log", eventstore.ErrInvalidPosition, p)
	}
	return nil
}

// Ping reads the head of $all within ctx: nil when the server answers.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.LogEnd(ctx)
	return err
}

// storedMetadata is an event's user metadata as stored: Lectern's metadata
// plus what EventStoreDB has no field for.
type storedMetadata struct {
	eventstore.Metadata
	RecordedAt    time.Time `json:"recorded_at"`
	SchemaVersion int       `json:"schema_version"`
	// AppendRest is how many events of the same append follow this one
	// (omitted: none). A subscription delivers an append's events one by
	// one: a projection's subscriber ends a batch with an append's last
	// event (AppendRest), so that no read sees half of an append.
	AppendRest int `json:"append_rest,omitempty"`
}

// AppendRest is how many events of rec's append follow it: 0 when none
// do, or its metadata does not say (an event appended before it did).
func AppendRest(rec *client.RecordedEvent) int {
	if !bytes.Contains(rec.UserMetadata, []byte(`"append_rest"`)) {
		return 0
	}
	var m struct {
		AppendRest int `json:"append_rest"`
	}
	if json.Unmarshal(rec.UserMetadata, &m) != nil {
		return 0
	}
	return m.AppendRest
}

// expectedRevision maps a Lectern expected version to EventStoreDB's.
func expectedRevision(e eventstore.ExpectedVersion) client.ExpectedRevision {
	if e.IsAny() {
		return client.Any{}
	}
	if v, ok := e.Exactly(); ok {
		if v == 0 {
			return client.NoStream{}
		}
		return client.StreamRevision{Value: uint64(v - 1)}
	}
	return client.StreamExists{}
}

// Append writes events to stream if it is at the expected version.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if len(events) == 0 {
		// As in the PostgreSQL adapter; EventStoreDB would answer with no
		// usable version.
		return eventstore.AppendResult{}, errors.New("eventstore: append of no events")
	}
	data := make([]client.EventData, 0, len(events))
	size := 0
	for i, e := range events {
		meta, err := json.Marshal(storedMetadata{Metadata: e.Metadata, RecordedAt: e.RecordedAt.UTC(), SchemaVersion: e.SchemaVersion,
			AppendRest: len(events) - 1 - i})
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %q: metadata: %w", stream, err)
		}
		payload := []byte(e.Data)
		if len(payload) == 0 {
			payload = []byte("null")
		}
		// Refused here as the server would refuse it (InvalidArgument),
		// with a typed error and without a round trip.
		size += eventstore.RecordSize(e.Type, payload, meta)
		data = append(data, client.EventData{
			EventID:     e.ID,
			EventType:   e.Type,
			ContentType: client.ContentTypeJson,
			Data:        payload,
			Metadata:    meta,
		})
	}
	if size > eventstore.MaxAppendBytes {
		return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %q: %w", stream, &eventstore.AppendTooLargeError{Size: size})
	}
	res, err := s.appendRetrying(ctx, stream, client.AppendToStreamOptions{ExpectedRevision: expectedRevision(expected)}, data)
	if err != nil {
		if code, ok := errorCode(err); ok && code == client.ErrorCodeWrongExpectedVersion {
			return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %q expecting %v: %w (%w)", stream, expected, eventstore.ErrWrongExpectedVersion, err)
		}
		return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %q: %w", stream, err)
	}
	out := eventstore.AppendResult{
		Version:  int64(res.NextExpectedVersion) + 1,
		Position: eventstore.Position{Commit: res.CommitPosition, Prepare: res.PreparePosition},
	}
	if out.Position.IsZero() {
		// An idempotent retry is answered without a position: take it from
		// the last event the first attempt wrote.
		last, err := s.ReadStream(ctx, stream, eventstore.Backwards, out.Version, 1)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("esdb: append to %q: position of a repeated append: %w", stream, err)
		}
		if len(last) == 1 {
			out.Position = last[0].Position
		}
	}
	return out, nil
}

// appendRetrying appends, and appends again while the failure is transient
// and AppendRetryFor has not passed. A repeat is safe: the events keep their
// ids and the expected revision, so the server either writes them once or
// recognises them as written (and answers with success).
func (s *Store) appendRetrying(ctx context.Context, stream string, opts client.AppendToStreamOptions, data []client.EventData) (*client.WriteResult, error) {
	deadline := time.Now().Add(s.AppendRetryFor)
	wait := 50 * time.Millisecond
	for {
		actx, cancel := context.WithDeadline(ctx, deadline)
		res, err := call(actx, s.conn, func(c *client.Client) (*client.WriteResult, error) {
			return c.AppendToStream(actx, stream, opts, data...)
		}, nil)
		cancel()
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: no answer within %v", eventstore.ErrUnavailable, s.AppendRetryFor)
		}
		if !transient(err) {
			return nil, err
		}
		next := time.Now().Add(wait)
		if ready := s.conn.readyAt(); ready.After(next) {
			next = ready
		}
		if next.After(deadline) {
			return nil, err
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// ReadStream reads up to limit events of stream from version from; a stream
// that does not exist (or was deleted) reads as empty.
func (s *Store) ReadStream(ctx context.Context, stream string, dir eventstore.Direction, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	if strings.HasPrefix(stream, "$") {
		// The server's own streams ($settings, $$-metadata, projections'):
		// no stream of Lectern's is named so, as ReadAll leaves out the
		// server's events.
		return []eventstore.RecordedEvent{}, nil
	}
	opts := client.ReadStreamOptions{Direction: client.Forwards, From: client.Start{}}
	if dir == eventstore.Backwards {
		opts.Direction = client.Backwards
		opts.From = client.End{}
	}
	if from > 0 {
		opts.From = client.StreamRevision{Value: uint64(from - 1)}
	}
	count := uint64(math.MaxInt64)
	if limit > 0 {
		count = uint64(limit)
	}
	out, err := s.read(ctx, func(c *client.Client) (*client.ReadStream, error) { return c.ReadStream(ctx, stream, opts, count) }, nil)
	if err != nil {
		if code, ok := errorCode(err); ok && code == client.ErrorCodeResourceNotFound {
			return []eventstore.RecordedEvent{}, nil
		}
		return nil, fmt.Errorf("esdb: read stream %q: %w", stream, err)
	}
	return out, nil
}

// ReadAll reads up to limit events of $all after position after (exclusive),
// skipping system events (types starting with "$").
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	if limit <= 0 {
		limit = readAllLimit
	}
	if err := checkPosition(after); err != nil {
		return nil, fmt.Errorf("esdb: read all: %w", err)
	}
	out := []eventstore.RecordedEvent{}
	from := after
	for len(out) < limit {
		// EventStoreDB reads forwards from a position inclusively: ask for one
		// more and drop the event at from.
		var start client.AllPosition = ClientPosition(from)
		if from.IsZero() {
			start = client.Start{}
		}
		batch := uint64(limit - len(out) + 1)
		floor := from
		var seen uint64
		var last eventstore.Position
		page, err := s.read(ctx, func(c *client.Client) (*client.ReadStream, error) {
			return c.ReadAll(ctx, client.ReadAllOptions{Direction: client.Forwards, From: start}, batch)
		}, func(ev *client.RecordedEvent) bool {
			seen++
			p := PositionOf(ev.Position)
			last = p
			return p.Compare(floor) > 0 && !strings.HasPrefix(ev.EventType, "$")
		})
		if err != nil {
			return nil, fmt.Errorf("esdb: read all after %v: %w", after, err)
		}
		out = append(out, page...)
		if seen < batch || last.Compare(from) <= 0 {
			break // the end of the log
		}
		from = last
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

var _ eventstore.LogEnder = (*Store)(nil)

// LogEnd implements eventstore.LogEnder: just past the last event of $all.
// EventStoreDB assigns positions as it commits, so nothing can appear before it.
func (s *Store) LogEnd(ctx context.Context) (eventstore.Position, error) {
	var end eventstore.Position
	// The last event may be a system event: only its position is wanted.
	_, err := s.read(ctx, func(c *client.Client) (*client.ReadStream, error) {
		return c.ReadAll(ctx, client.ReadAllOptions{Direction: client.Backwards, From: client.End{}}, 1)
	}, func(ev *client.RecordedEvent) bool {
		end = eventstore.Position{Commit: ev.Position.Commit, Prepare: ev.Position.Prepare + 1}
		return false
	})
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("esdb: log end: %w", err)
	}
	return end, nil
}

// PastEnd reports whether p is past the end of the server's log: a
// checkpoint kept from a log since recreated, or restored from a backup older
// than the checkpoint's. A subscription from there is confirmed and goes live
// at once, then passes over every event the new log takes until it grows past
// p. The server refuses a read backwards from past its writer checkpoint
// (KurrentDB v25.0.0, TFChunkReader.cs:89-93: "Requested position ... is
// greater than writer checkpoint"), with Unknown "Unexpected ReadAllResult:
// Error" (StorageReaderWorker.All.cs, Enumerator.ReadAllBackwards.cs); from
// the writer checkpoint itself, where a filtered subscription's last
// checkpoint may be, it reads the last record. Only a position past the log's
// last record is read from: other positions cost the one read of LogEnd.
func (s *Store) PastEnd(ctx context.Context, p eventstore.Position) (bool, error) {
	last, err := s.LogEnd(ctx)
	if err != nil {
		return false, err
	}
	if p.Commit <= last.Commit {
		return false, nil
	}
	_, err = s.read(ctx, func(c *client.Client) (*client.ReadStream, error) {
		return c.ReadAll(ctx, client.ReadAllOptions{Direction: client.Backwards,
			From: ClientPosition(p)}, 1)
	}, func(*client.RecordedEvent) bool { return false })
	switch {
	case err == nil:
		return false, nil
	case pastWriterCheckpoint(err):
		return true, nil
	}
	return false, fmt.Errorf("esdb: read back from %v: %w", p, err)
}

// pastWriterCheckpoint: the server's answer to a read of $all backwards
// from past the end of its log (see PastEnd); later servers add
// " >> " and the exception's message.
func pastWriterCheckpoint(err error) bool {
	st, ok := grpcStatus(err)
	return ok && st.Code() == codes.Unknown && strings.HasPrefix(st.Message(), "Unexpected ReadAllResult: Error")
}

// read drains a read, keeping the events keep accepts (nil: all).
func (s *Store) read(ctx context.Context, open func(*client.Client) (*client.ReadStream, error), keep func(*client.RecordedEvent) bool) ([]eventstore.RecordedEvent, error) {
	rs, err := call(ctx, s.conn, open, func(rs *client.ReadStream) { rs.Close() })
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := []eventstore.RecordedEvent{}
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, classify(err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec := ev.OriginalEvent()
		if rec == nil || (keep != nil && !keep(rec)) {
			continue
		}
		e, err := fromRecorded(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
}

// fromRecorded maps a recorded EventStoreDB event to Lectern's.
func fromRecorded(r *client.RecordedEvent) (eventstore.RecordedEvent, error) {
	e := eventstore.RecordedEvent{
		ID:       r.EventID,
		StreamID: r.StreamID,
		Version:  int64(r.EventNumber) + 1,
		Type:     r.EventType,
		Data:     json.RawMessage(r.Data),
		// The server's time, unless the metadata carries the recorded time.
		RecordedAt: r.CreatedDate,
	}
	// A server before 22.6 sends no position with stream events (all ones).
	if r.Position.Commit != math.MaxUint64 {
		e.Position = PositionOf(r.Position)
	}
	if len(r.UserMetadata) > 0 {
		var m storedMetadata
		if err := json.Unmarshal(r.UserMetadata, &m); err != nil {
			return eventstore.RecordedEvent{}, fmt.Errorf("event %s of %q: metadata: %w", r.EventID, r.StreamID, err)
		}
		e.Metadata = m.Metadata
		e.SchemaVersion = m.SchemaVersion
		if !m.RecordedAt.IsZero() {
			e.RecordedAt = m.RecordedAt
		}
	}
	return e, nil
}
