// Package history writes the event log out for analysts and downstream
// systems (DESIGN §9): `lectern events export`.
package history

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"lectern/eventstore"
)

// Filter selects the events to export; zero fields select everything.
type Filter struct {
	Category string
	Type     string
	Stream   string
	Since    time.Time // recorded at or after
	Until    time.Time // recorded before
	// After, for an export, starts it after this position (an exported
	// line's): an incremental export goes on from the last line of the one
	// before.
	After eventstore.Position
}

// Validate reports every problem with f.
func (f Filter) Validate() error {
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return errors.New("history: --since must be before --until")
	}
	return nil
}

// pageSize is how many events one read holds in memory.
const pageSize = 500

// Line is one event of an export, one JSON object per line.
type Line struct {
	Position      string          `json:"position"`
	Stream        string          `json:"stream"`
	Version       int64           `json:"version"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata"`
	RecordedAt    string          `json:"recorded_at"`
	EventID       string          `json:"event_id"`
}

// timeFormat is the wire's: UTC RFC 3339 with microseconds.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// Export writes the events f selects from s to w as NDJSON, in log order,
// and returns how many it wrote. It reads the log a page at a time by position
// and writes each page before reading the next, so memory stays constant
// however long the log; password hashes are redacted. When s is an
// eventstore.LogEnder the export is the log as of its start (on PostgreSQL it
// first waits for the transactions then running to end), and later events are
// left to the next export.
func Export(ctx context.Context, s eventstore.Store, w io.Writer, f Filter) (n int, err error) {
	return export(ctx, s, w, f, func(e Event) (any, error) {
		return Line{Position: e.Position.String(), Stream: e.Stream, Version: e.Version, Type: e.Type,
			SchemaVersion: e.SchemaVersion, Data: e.Data, Metadata: e.Metadata,
			RecordedAt: e.RecordedAt.UTC().Format(timeFormat), EventID: e.EventID}, nil
	}, writeLine)
}

// CloudEvents attributes of ExportCloudEvents' lines.
const (
	CloudEventSource     = "/lectern"
	CloudEventTypePrefix = "lectern."
)

// ExportCloudEvents is Export with each line a CloudEvent (1.0, structured
// JSON): id the event id, source /lectern, type lectern.<event type>,
// subject the stream, time the recorded time, data the stored data (secrets
// redacted), and the extensions position, streamversion and schemaversion.
func ExportCloudEvents(ctx context.Context, s eventstore.Store, w io.Writer, f Filter) (int, error) {
	return export(ctx, s, w, f, func(e Event) (any, error) { return cloudEvent(e) }, writeCloudEvent)
}

// cloudEvent is e as a line of ExportCloudEvents.
func cloudEvent(e Event) (*cloudevents.Event, error) {
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ce.SetID(e.EventID)
	ce.SetSource(CloudEventSource)
	ce.SetType(CloudEventTypePrefix + e.Type)
	ce.SetSubject(e.Stream)
	ce.SetTime(e.RecordedAt.UTC())
	ce.SetExtension("position", e.Position.String())
	ce.SetExtension("streamversion", e.Version)
	ce.SetExtension("schemaversion", e.SchemaVersion)
	if err := ce.SetData(cloudevents.ApplicationJSON, e.Data); err != nil {
		return nil, err
	}
	return &ce, ce.Validate()
}

// export writes the lines line makes of what f selects; a store that scans
// its log (eventstore.LogScanner) is read through scanExport, its lines
// written by raw, which must write what line's encoded would.
func export(ctx context.Context, s eventstore.Store, w io.Writer, f Filter, line func(Event) (any, error), raw rawLine) (n int, err error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	out := bufio.NewWriterSize(w, 64<<10)
	defer func() {
		if err != nil {
			// The lines encoded before the failure are whole: written, an
			// export resumed after the output's last line redoes less.
			_ = out.Flush()
		}
	}()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	q := Query{Filter: f, After: f.After, Limit: pageSize}
	if e, ok := s.(eventstore.LogEnder); ok {
		if q.End, err = e.LogEnd(ctx); err != nil {
			return 0, err
		}
		q.HasEnd = true
	}
	if sc, ok := s.(eventstore.LogScanner); ok && q.HasEnd && q.Stream == "" {
		n, err := scanExport(ctx, sc, out, q, raw)
		if !errors.Is(err, eventstore.ErrScanUnsupported) {
			return n, err
		}
	}
	for {
		page, next, more, err := Page(ctx, s, q)
		if err != nil {
			return n, fmt.Errorf("export after %s: %w", q.After, err)
		}
		for _, e := range page {
			l, err := line(e)
			if err == nil {
				err = enc.Encode(l)
			}
			if err != nil {
				return n, fmt.Errorf("export event %s: %w", e.EventID, err)
			}
			n++
		}
		if err := out.Flush(); err != nil {
			return n, err
		}
		if !more {
			return n, nil
		}
		q.After = next
	}
}
