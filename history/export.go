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

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/queries"
)

// Filter selects the events to export; zero fields select everything.
type Filter struct {
	Category string
	Type     string
	Stream   string
	Since    time.Time // recorded at or after
	Until    time.Time // recorded before
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

// Export writes the events f selects to w as NDJSON, in log order, and
// returns how many it wrote. It reads the log a page at a time by position
// and writes each page before reading the next, so memory stays constant
// however long the log; password hashes are redacted (queries.Events). It
// is the log as of its start (queries.LogEnd): it first waits for the
// transactions then running to end, and leaves later events to the next export.
func Export(ctx context.Context, pool *pgxpool.Pool, w io.Writer, f Filter) (n int, err error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	q := queries.New(pool)
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	end, err := q.LogEnd(ctx)
	if err != nil {
		return 0, err
	}
	after := eventstore.Position{}
	for {
		page, more, err := q.Events(ctx, queries.EventFilter{Category: f.Category, Type: f.Type, Stream: f.Stream,
			Since: f.Since, Until: f.Until, After: after, Before: end, Limit: pageSize})
		if err != nil {
			return n, fmt.Errorf("export after %s: %w", after, err)
		}
		for _, e := range page {
			line := Line{Position: e.Position.String(), Stream: e.Stream, Version: e.Version, Type: e.Type,
				SchemaVersion: e.SchemaVersion, Data: e.Data, Metadata: e.Metadata,
				RecordedAt: e.RecordedAt.UTC().Format(timeFormat), EventID: e.EventID.String()}
			if err := enc.Encode(line); err != nil {
				return n, fmt.Errorf("export event %s: %w", line.EventID, err)
			}
			n++
		}
		if err := out.Flush(); err != nil {
			return n, err
		}
		if !more {
			return n, nil
		}
		after = page[len(page)-1].Position
	}
}
