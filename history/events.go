package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"lectern/eventstore"
)

// The event history is read through the event store port, so it is the same
// on PostgreSQL and EventStoreDB: the log as stored (payloads at their stored
// schema version, not upcast), filtered while it streams by, secrets redacted.

// MaxPage bounds one page of the event history.
const MaxPage = 1000

// Redacted replaces secrets in the event history.
const Redacted = "[redacted]"

// readChunk is how many events one read of the store holds.
const readChunk = 500

// Event is one event of the history: as stored, secrets redacted.
type Event struct {
	Position      eventstore.Position
	EventID       string
	Stream        string
	Version       int64
	Type          string
	SchemaVersion int
	Data          json.RawMessage
	Metadata      json.RawMessage
	RecordedAt    time.Time
}

// Query is one page of the history: the events f selects after After (the
// zero Position: from the start), before End when HasEnd, Limit at most.
type Query struct {
	Filter
	After  eventstore.Position
	End    eventstore.Position
	HasEnd bool
	Limit  int // 1..MaxPage
}

// matches reports whether f selects e (its stream aside, which the read chose).
func (f Filter) matches(e eventstore.RecordedEvent) bool {
	return (f.Category == "" || strings.HasPrefix(e.StreamID, f.Category+"-")) &&
		(f.Type == "" || e.Type == f.Type) &&
		(f.Stream == "" || e.StreamID == f.Stream) &&
		(f.Since.IsZero() || !e.RecordedAt.Before(f.Since)) &&
		(f.Until.IsZero() || e.RecordedAt.Before(f.Until))
}

// MaxScan bounds the events past the cursor one page examines: a sparse
// filter over a long log then answers a page with fewer events than asked
// (perhaps none) and a cursor to go on from, instead of reading the whole log
// in one request.
const MaxScan = 20 * readChunk

// Page reads one page of the history in log order. When more events may
// follow, more is true and next is where the following page starts: the
// page's last event, or the last event it examined when MaxScan ran out
// first. A stream's events come from the stream (in its order, which is its
// order in the log); other filters go through the global log, which on
// PostgreSQL stops below the pg_snapshot_xmin horizon, so a transaction that
// commits late never lands behind a cursor handed out.
func Page(ctx context.Context, s eventstore.Store, q Query) (page []Event, next eventstore.Position, more bool, err error) {
	if q.Limit < 1 || q.Limit > MaxPage {
		return nil, next, false, fmt.Errorf("history: page limit %d outside 1..%d", q.Limit, MaxPage)
	}
	// One event past the page says whether more follow.
	var found []eventstore.RecordedEvent
	scanned := 0
	var last eventstore.Position // the last event examined past the cursor
	take := func(evs []eventstore.RecordedEvent) (done bool) {
		for _, e := range evs {
			if q.HasEnd && e.Position.Compare(q.End) >= 0 {
				return true
			}
			if e.Position.Compare(q.After) <= 0 {
				continue
			}
			if scanned == MaxScan {
				more = true // e, past the cursor, is not examined yet
				return true
			}
			scanned++
			last = e.Position
			if !q.matches(e) {
				continue
			}
			if found = append(found, e); len(found) > q.Limit {
				return true
			}
		}
		return false
	}
	if q.Stream != "" {
		if q.Category != "" && eventstore.Category(q.Stream) != q.Category {
			return []Event{}, next, false, nil
		}
		if err := eventstore.ReadStreamPages(ctx, s, q.Stream, readChunk, take); err != nil {
			return nil, next, false, fmt.Errorf("history: read stream %s: %w", q.Stream, err)
		}
	} else {
		for after := q.After; ; {
			evs, err := s.ReadAll(ctx, after, readChunk)
			if err != nil {
				return nil, next, false, fmt.Errorf("history: read the log after %s: %w", after, err)
			}
			if take(evs) || len(evs) == 0 {
				break
			}
			after = evs[len(evs)-1].Position
		}
	}
	switch {
	case len(found) > q.Limit:
		found, more = found[:q.Limit], true
		next = found[len(found)-1].Position
	case more:
		next = last
	}
	page = make([]Event, 0, len(found))
	for _, e := range found {
		out, err := stored(e)
		if err != nil {
			return nil, eventstore.Position{}, false, err
		}
		page = append(page, out)
	}
	return page, next, more, nil
}

// stored is e as the history shows it.
func stored(e eventstore.RecordedEvent) (Event, error) {
	meta, err := json.Marshal(e.Metadata)
	if err != nil {
		return Event{}, fmt.Errorf("history: event %s metadata: %w", e.ID, err)
	}
	data := e.Data
	if len(bytes.TrimSpace(data)) == 0 {
		data = json.RawMessage(`null`)
	}
	if data, err = redact(e.Type, data); err != nil {
		return Event{}, fmt.Errorf("history: event %s: %w", e.ID, err)
	}
	return Event{Position: e.Position, EventID: e.ID.String(), Stream: e.StreamID, Version: e.Version, Type: e.Type,
		SchemaVersion: e.SchemaVersion, Data: data, Metadata: meta, RecordedAt: e.RecordedAt.UTC()}, nil
}

// secretFields are the members of an event's data never shown in its history.
// Invite codes are credentials: whoever reads one can join the class.
var secretFields = map[string][]string{
	"user.signed_up":            {"password_hash"},
	"class.invite_code_issued":  {"code"},
	"class.invite_code_used":    {"code"},
	"class.invite_code_revoked": {"code"},
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
