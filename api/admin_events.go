package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"lectern/api/validation"
	"lectern/derrors"
	"lectern/eventstore"
	"lectern/history"
)

// The event history for administrators (DESIGN §7, §9): the log as stored,
// paged by position cursor, password hashes redacted.

const defaultEventPage = 100

var (
	eventPageQuery = []validation.Field{
		{Name: "after", Kind: validation.String, MaxLength: 64,
			Description: "A position cursor (`next` of the previous page, or an event's position): only events after it"},
		{Name: "limit", Kind: validation.Int, Ge: bound(1), Le: bound(history.MaxPage), Default: defaultEventPage},
	}
	eventListQuery = append([]validation.Field{
		{Name: "category", Kind: validation.String, MaxLength: maxName, Description: "Streams of this category (`user`, `agent`, ...)"},
		{Name: "type", Kind: validation.String, MaxLength: maxName, Description: "Events of this type (`user.signed_up`, ...)"},
		{Name: "stream", Kind: validation.String, MaxLength: maxName, Description: "Events of this stream (`user-7`, ...)"},
		{Name: "since", Kind: validation.DateTime, Description: "Events recorded at or after this date-time"},
		{Name: "until", Kind: validation.DateTime, Description: "Events recorded before this date-time"},
	}, eventPageQuery...)
	streamPath = []validation.Field{{Name: "stream", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName}}
)

// adminEventOperations are the event history's routes.
func (s *Server) adminEventOperations() []operation {
	return []operation{
		{method: http.MethodGet, path: "/admin/events", id: "list_events", tag: "administration", auth: true,
			summary: "Read the event log in log order, filtered (admin); a page examines at most 10 000 events, so a sparse filter's page may hold fewer items than `limit`, even none: follow `next` until it is null", query: eventListQuery, status: 200, response: "EventPage",
			errors: []int{401, 403}, handle: s.listEvents},
		{method: http.MethodGet, path: "/admin/events/streams/{stream}", id: "list_stream_events", tag: "administration", auth: true,
			summary:    "Read one stream's events in log order (admin); a stream with no events reads as empty",
			pathParams: streamPath, query: eventPageQuery, status: 200, response: "EventPage",
			errors: []int{401, 403}, handle: s.listStreamEvents},
	}
}

// adminEventComponents are their response schemas.
func adminEventComponents() schema {
	return schema{
		"StoredEvent": object(schema{
			"position": str(), "stream": str(), "version": integer(), "type": str(), "schema_version": integer(),
			"data": schema{}, "metadata": schema{"type": "object"}, "recorded_at": dateTime(),
			"event_id": schema{"type": "string", "format": "uuid"},
		}, "position", "stream", "version", "type", "schema_version", "data", "metadata", "recorded_at", "event_id"),
		"EventPage": object(schema{"items": arrayOf(ref("StoredEvent")), "next": nullable(str())}, "items", "next"),
	}
}

type storedEventJSON struct {
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

type eventPageJSON struct {
	Items []storedEventJSON `json:"items"`
	Next  *string           `json:"next"`
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, in input) error {
	f := history.Filter{}
	f.Category, _ = in.query.String("category")
	f.Type, _ = in.query.String("type")
	f.Stream, _ = in.query.String("stream")
	since, hasSince := in.query.Time("since")
	until, hasUntil := in.query.Time("until")
	if hasSince && hasUntil && !since.Before(until) {
		raw, _ := in.query.Input("until")
		return derrors.Invalid([]any{"query", "until"}, raw, "until must be after since")
	}
	// The filter's zero time is "no bound": a since at or before it bounds
	// nothing, and an until there leaves no event (none is recorded before
	// year 1).
	none := hasUntil && !until.After(time.Time{})
	if hasSince && since.After(time.Time{}) {
		f.Since = since
	}
	f.Until = until
	return s.eventPage(w, r, in, f, none)
}

func (s *Server) listStreamEvents(w http.ResponseWriter, r *http.Request, in input) error {
	f := history.Filter{}
	f.Stream, _ = in.path.String("stream")
	return s.eventPage(w, r, in, f, false)
}

// eventPage reads one page past the cursor through the event store, whichever
// it is: next is null at the end of the log (poll again from the last item's
// position for later events). A sparse filter's page may hold fewer items
// than the limit, even none, with a next to follow (history.MaxScan). none
// is a filter that selects no event (one history.Filter cannot express).
func (s *Server) eventPage(w http.ResponseWriter, r *http.Request, in input, f history.Filter, none bool) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	q := history.Query{Filter: f}
	if after, ok := in.query.String("after"); ok && after != "" {
		pos, err := eventstore.ParsePosition(after)
		if err != nil {
			return derrors.Invalid([]any{"query", "after"}, after, "after must be a position cursor such as \"1234-56\"")
		}
		q.After = pos
	}
	limit := int64(defaultEventPage)
	if l, ok := in.query.Int("limit"); ok {
		limit = l
	}
	q.Limit = int(limit)
	if none {
		writeJSON(w, http.StatusOK, eventPageJSON{Items: []storedEventJSON{}})
		return nil
	}
	evs, next, more, err := history.Page(r.Context(), s.deps.Commands.Store, q)
	if errors.Is(err, eventstore.ErrInvalidPosition) {
		after, _ := in.query.String("after")
		return derrors.Invalid([]any{"query", "after"}, after, "after is not a position of this event log")
	}
	if err != nil {
		return err
	}
	page := eventPageJSON{Items: make([]storedEventJSON, 0, len(evs))}
	for _, e := range evs {
		page.Items = append(page.Items, storedEventJSON{Position: e.Position.String(), Stream: e.Stream, Version: e.Version,
			Type: e.Type, SchemaVersion: e.SchemaVersion, Data: e.Data, Metadata: e.Metadata,
			RecordedAt: ts(e.RecordedAt), EventID: e.EventID})
	}
	if more {
		cursor := next.String()
		page.Next = &cursor
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
