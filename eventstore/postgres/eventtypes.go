package postgres

import (
	"slices"
	"strings"

	"lectern/eventstore"
)

// eventTypes gathers the event types of commits awaiting their NOTIFY, so
// that the NOTIFY can name them and a listener wake only the projections
// that handle one. Not safe for concurrent use: the store's notifyMu guards it.
type eventTypes struct {
	names   map[string]struct{}
	unknown bool // a commit of unknown types: the payload names none
}

// maxPayload keeps a NOTIFY payload well under PostgreSQL's 8000 bytes.
const maxPayload = 4000

func (t *eventTypes) add(types []string) {
	if types == nil {
		t.unknown = true
		return
	}
	if t.names == nil {
		t.names = map[string]struct{}{}
	}
	for _, name := range types {
		t.names[name] = struct{}{}
	}
}

func (t *eventTypes) reset() {
	clear(t.names)
	t.unknown = false
}

// payload is the NOTIFY payload announcing the gathered types and extra:
// their names, sorted and comma-separated, or "" (any type) when one is
// unknown or they would not fit.
func (t *eventTypes) payload(extra []string) string {
	if t.unknown {
		return ""
	}
	names := slices.Clone(extra)
	for name := range t.names {
		names = append(names, name)
	}
	slices.Sort(names)
	out := strings.Join(slices.Compact(names), ",")
	if len(out) > maxPayload {
		return ""
	}
	return out
}

// EventTypes reads a NOTIFY payload of EventsChannel: the types of the
// events it announces, or nil when it does not name them (any type).
func EventTypes(payload string) []string {
	if payload == "" {
		return nil
	}
	return strings.Split(payload, ",")
}

func typesOf(evs []eventstore.EventData) []string {
	types := make([]string, len(evs))
	for i, e := range evs {
		types[i] = e.Type
	}
	return types
}
