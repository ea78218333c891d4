// Package events holds every domain event: one Go type per fact, each with a
// stable type name and schema version, and the registry that turns stored
// JSON back into types.
package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// Event is a fact recorded in a stream. Its type name is stored with it and is
// never derived from the Go type name: renaming a struct must not break
// history, and a shipped type name never changes meaning.
type Event interface {
	EventType() string
	SchemaVersion() int
}

// Meta is what the store records beside an event.
type Meta struct {
	EventID       string
	StreamID      string
	Version       int64
	Position      string
	RecordedAt    time.Time
	CorrelationID string
	CausationID   string
	UserID        int64
	RequestID     string
	// TraceParent and TraceState are the W3C trace context of the append
	// that recorded the event (eventstore.Metadata); empty when untraced.
	TraceParent string
	TraceState  string
}

// Envelope is an event with its metadata.
type Envelope struct {
	Meta
	Event Event
}

// Registry decodes stored events by type name.
type Registry struct {
	decoders  map[string]func(json.RawMessage) (Event, error)
	upcasters map[upcastKey]Upcaster // see upcast.go
	sameShape map[upcastKey]bool     // steps that change nothing (RegisterSameShape)
	open      Opener                 // nil: events are read as stored
	openInto  IntoOpener             // nil: DecodeInto opens with open
}

// Opener turns an event's data as stored into its data in clear: the
// personal fields that were sealed at append (package personal) put back,
// or their placeholders once the subject was erased.
type Opener func(eventType string, data json.RawMessage) (json.RawMessage, error)

// OpenWith makes r open every event it decodes with open; set it once, as
// the registry is built.
func (r *Registry) OpenWith(open Opener) *Registry {
	r.open = open
	return r
}

// IntoOpener decodes an event's data as stored into v, a pointer to a new
// event of its type, as decoding the Opener's result would; handled false
// when it does not take the event (v is then still zero, and the Opener's
// way is taken). It spares readers that decode every event (a replay)
// writing each event's JSON in clear only to decode it.
type IntoOpener func(eventType string, data json.RawMessage, v any) (handled bool, err error)

// OpenIntoWith makes r's DecodeInto open events of a current schema
// version with open, beside the Opener of OpenWith, which takes the rest.
func (r *Registry) OpenIntoWith(open IntoOpener) *Registry {
	r.openInto = open
	return r
}

// register adds T under its own type name.
func register[T Event](r *Registry) {
	var zero T
	name := zero.EventType()
	if _, dup := r.decoders[name]; dup {
		panic("events: type registered twice: " + name)
	}
	r.decoders[name] = func(data json.RawMessage) (Event, error) {
		var e T
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, fmt.Errorf("decode %s: %w", name, err)
		}
		return e, nil
	}
}

// Decode turns a stored event back into its type, upcasting a payload of an
// older schema version to the current shape first.
func (r *Registry) Decode(eventType string, schemaVersion int, data json.RawMessage) (Event, error) {
	dec, ok := r.decoders[eventType]
	if !ok {
		return nil, fmt.Errorf("events: unknown event type %q", eventType)
	}
	data, reached, err := r.Upcast(eventType, schemaVersion, data)
	if err != nil {
		return nil, err
	}
	e, err := dec(data)
	if err != nil {
		return nil, err
	}
	return e, checkVersion(eventType, reached, e)
}

// Known reports whether eventType is registered.
func (r *Registry) Known(eventType string) bool {
	_, ok := r.decoders[eventType]
	return ok
}

// NewRegistry returns a registry of every event Lectern records.
func NewRegistry() *Registry {
	r := &Registry{decoders: map[string]func(json.RawMessage) (Event, error){}}
	register[UserSignedUp](r)
	r.RegisterUpcaster("user.signed_up", 1, dropPasswordHash)
	r.RegisterUpcaster("knowledge.document_uploaded", 1, addressContent)
	r.RegisterSameShape("session.turn_recorded", 1) // version 1's messages are whole: history_turns 0
	register[UserRoleGranted](r)
	register[UserErased](r)
	register[UserPasswordChanged](r)
	register[AgentCreated](r)
	register[AgentUpdated](r)
	registerOrganisations(r)
	registerClassroom(r)
	registerPractice(r)
	registerSessions(r)
	registerKnowledge(r)
	return r
}
