package queries

// The event history for analysts and downstream systems (DESIGN §9) is the
// one read of the events table outside the event store: it serves the log as
// stored (raw payloads at their stored schema version), never a decision.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
)

// MaxEventPage bounds one page of the event history.
const MaxEventPage = 1000

// Redacted replaces secrets in the event history.
const Redacted = "[redacted]"

// EventFilter selects events of the log; zero fields select everything.
type EventFilter struct {
	Category string              // streams "{category}-..."
	Type     string              // event type
	Stream   string              // one stream
	After    eventstore.Position // only events after this position
	Since    time.Time           // recorded at or after
	Until    time.Time           // recorded before
	Before   eventstore.Position // only events before this position (zero: no bound); see LogEnd
	Limit    int                 // 1..MaxEventPage
}

// StoredEvent is one event of the log as stored, secrets redacted.
type StoredEvent struct {
	Position      eventstore.Position
	EventID       uuid.UUID
	Stream        string
	Version       int64
	Type          string
	SchemaVersion int
	Data          json.RawMessage
	Metadata      json.RawMessage
	RecordedAt    time.Time
}

// Events reads one page of the log in log order, and whether more events
// follow it now. Like the event store's ReadAll it stops below the
// pg_snapshot_xmin horizon, so a transaction that commits late never lands
// behind a cursor already handed out.
func (q *DB) Events(ctx context.Context, f EventFilter) (page []StoredEvent, more bool, err error) {
	if f.Limit < 1 || f.Limit > MaxEventPage {
		return nil, false, fmt.Errorf("queries: event page limit %d outside 1..%d", f.Limit, MaxEventPage)
	}
	var since, until any
	if !f.Since.IsZero() {
		since = f.Since
	}
	if !f.Until.IsZero() {
		until = f.Until
	}
	rows, err := q.pool.Query(ctx, `
		SELECT transaction_id::text, "offset", uuid::text, stream_id, version, event_type, schema_version,
		       payload::text, metadata::text, recorded_at
		FROM events
		WHERE ((transaction_id = $1::text::xid8 AND "offset" > $2) OR transaction_id > $1::text::xid8)
		  AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
		  AND ($3::text = '' OR starts_with(stream_id, $3::text || '-'))
		  AND ($4::text = '' OR event_type = $4::text)
		  AND ($5::text = '' OR stream_id = $5::text)
		  AND ($6::timestamptz IS NULL OR recorded_at >= $6::timestamptz)
		  AND ($7::timestamptz IS NULL OR recorded_at < $7::timestamptz)
		  AND ($9::text = '0-0' OR transaction_id < $10::text::xid8 OR (transaction_id = $10::text::xid8 AND "offset" < $11))
		ORDER BY transaction_id, "offset"
		LIMIT $8`,
		strconv.FormatUint(f.After.Commit, 10), int64(f.After.Prepare), f.Category, f.Type, f.Stream, since, until, f.Limit+1,
		f.Before.String(), strconv.FormatUint(f.Before.Commit, 10), int64(f.Before.Prepare))
	if err != nil {
		return nil, false, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if len(page) == f.Limit {
			more = true // the one event past the page
			break
		}
		var e StoredEvent
		var txid, id string
		var data, meta *string
		var offset int64
		if err := rows.Scan(&txid, &offset, &id, &e.Stream, &e.Version, &e.Type, &e.SchemaVersion, &data, &meta, &e.RecordedAt); err != nil {
			return nil, false, fmt.Errorf("read events: %w", err)
		}
		commit, err := strconv.ParseUint(txid, 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("read events: transaction id %q: %w", txid, err)
		}
		e.Position = eventstore.Position{Commit: commit, Prepare: uint64(offset)}
		if e.EventID, err = uuid.Parse(id); err != nil {
			return nil, false, fmt.Errorf("read events: event id %q: %w", id, err)
		}
		e.Metadata = json.RawMessage(`{}`)
		if meta != nil && *meta != "" && *meta != "null" {
			e.Metadata = json.RawMessage(*meta)
		}
		e.Data = json.RawMessage(`null`)
		if data != nil && *data != "" {
			e.Data = json.RawMessage(*data)
		}
		if e.Data, err = redact(e.Type, e.Data); err != nil {
			return nil, false, fmt.Errorf("read events: event %s: %w", id, err)
		}
		e.RecordedAt = e.RecordedAt.UTC()
		page = append(page, e)
	}
	return page, more, rows.Err()
}

// LogEnd waits until every transaction running when it was called has ended,
// then returns the position before which the log is complete: every event
// committed before the call is before it, and no event can still appear
// before it. An export bounded by it is the log as of the call, even while a
// long transaction holds the pg_snapshot_xmin horizon back.
func (q *DB) LogEnd(ctx context.Context) (eventstore.Position, error) {
	var xmax string
	if err := q.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&xmax); err != nil {
		return eventstore.Position{}, fmt.Errorf("log end: %w", err)
	}
	commit, err := strconv.ParseUint(xmax, 10, 64)
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("log end: transaction id %q: %w", xmax, err)
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var done bool
		if err := q.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::text::xid8`, xmax).Scan(&done); err != nil {
			return eventstore.Position{}, fmt.Errorf("log end: %w", err)
		}
		if done {
			return eventstore.Position{Commit: commit}, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return eventstore.Position{}, ctx.Err()
		case <-t.C:
		}
	}
}

// secretFields are the members of an event's data never shown in its history.
var secretFields = map[string][]string{
	"user.signed_up": {"password_hash"},
}

// redact replaces the secret members of data, keeping every other byte (and
// the members' order) as stored.
func redact(eventType string, data json.RawMessage) (json.RawMessage, error) {
	secrets := secretFields[eventType]
	if len(secrets) == 0 {
		return data, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return data, nil // not an object: nothing named to redact
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for first := true; dec.More(); first = false {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		for _, s := range secrets {
			if key == s {
				value = json.RawMessage(strconv.Quote(Redacted))
			}
		}
		if !first {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(value)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
