package events

import (
	"encoding/json"
	"fmt"

	gojson "github.com/goccy/go-json"
)

// Upcaster turns the JSON of an event stored at one schema version into the
// shape of the next version. Stored history is never rewritten: old payloads
// are brought up to date each time they are read.
type Upcaster func(data json.RawMessage) (json.RawMessage, error)

type upcastKey struct {
	eventType string
	from      int
}

// Register adds the event type T to r under its own type name (for an
// extension, or a test's own event types).
func Register[T Event](r *Registry) { register[T](r) }

// RegisterUpcaster adds the step of eventType from schema version from to
// from+1. Registries are built at start-up, so a second step for the same
// version is a programming error and panics, as a duplicate type does.
func (r *Registry) RegisterUpcaster(eventType string, from int, up Upcaster) {
	if from < 1 || up == nil {
		panic(fmt.Sprintf("events: bad upcaster for %s from version %d", eventType, from))
	}
	key := upcastKey{eventType, from}
	if r.upcasters == nil {
		r.upcasters = map[upcastKey]Upcaster{}
	}
	if _, dup := r.upcasters[key]; dup {
		panic(fmt.Sprintf("events: upcaster registered twice: %s from version %d", eventType, from))
	}
	r.upcasters[key] = up
}

// RegisterSameShape records that eventType's payloads of schema version
// from read as version from+1 unchanged: the next version added a field
// whose absence (its zero value) says what version from meant. Its step
// changes nothing, so a reader that decodes the stored data straight into
// the event (OpenIntoWith) may take such payloads too.
func (r *Registry) RegisterSameShape(eventType string, from int) {
	r.RegisterUpcaster(eventType, from, func(data json.RawMessage) (json.RawMessage, error) { return data, nil })
	if r.sameShape == nil {
		r.sameShape = map[upcastKey]bool{}
	}
	r.sameShape[upcastKey{eventType, from}] = true
}

// sameShapeFrom is the version a payload stored at version v reads as
// through same-shape steps alone.
func (r *Registry) sameShapeFrom(eventType string, v int) int {
	for r.sameShape[upcastKey{eventType, v}] {
		v++
	}
	return v
}

// Upcast applies eventType's steps to data, stored at schemaVersion (0 reads
// as 1), for as long as there is a step from the version reached. It returns
// the data and the version it reached.
func (r *Registry) Upcast(eventType string, schemaVersion int, data json.RawMessage) (json.RawMessage, int, error) {
	v := max(schemaVersion, 1)
	if r == nil {
		return data, v, nil
	}
	if r.open != nil {
		opened, err := r.open(eventType, data)
		if err != nil {
			return nil, v, err
		}
		data = opened
	}
	for {
		up, ok := r.upcasters[upcastKey{eventType, v}]
		if !ok {
			return data, v, nil
		}
		out, err := up(data)
		if err != nil {
			return nil, v, fmt.Errorf("events: upcast %s from version %d: %w", eventType, v, err)
		}
		data, v = out, v+1
	}
}

// DecodeInto upcasts data as Upcast does and decodes it into v, a pointer to
// the event's Go type (as Watermill's marshalers receive it). When v is an
// Event, the version reached must be the type's current one: a payload of an
// older shape with no upcaster, or of a newer release, is refused rather than
// misread.
func (r *Registry) DecodeInto(eventType string, schemaVersion int, data json.RawMessage, v any) error {
	if r != nil && r.openInto != nil {
		if reads := r.sameShapeFrom(eventType, max(schemaVersion, 1)); r.upcasters[upcastKey{eventType, reads}] == nil {
			// Stored at a version no step that changes anything starts
			// from: the opener may decode the stored data straight into v.
			handled, err := r.openInto(eventType, data, v)
			if err != nil {
				return err
			}
			if handled {
				if e, ok := v.(Event); ok {
					return checkVersion(eventType, reads, e)
				}
				return nil
			}
		}
	}
	data, reached, err := r.Upcast(eventType, schemaVersion, data)
	if err != nil {
		return err
	}
	// go-json, not encoding/json: decoding events is most of a replay's work
	// in Go, and go-json decodes them several times faster (make bench).
	if err := gojson.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", eventType, err)
	}
	// v itself (a non-nil pointer, or Unmarshal failed): its method set has
	// the Event methods, and taking the event out of it would copy it to the
	// heap, once per event read.
	if e, ok := v.(Event); ok {
		return checkVersion(eventType, reached, e)
	}
	return nil
}

// checkVersion refuses an event decoded from a payload whose shape is not the
// type's current one.
func checkVersion(eventType string, reached int, e Event) error {
	if want := max(e.SchemaVersion(), 1); reached != want {
		return fmt.Errorf("events: %s reached schema version %d, but the type is at version %d (missing upcaster?)", eventType, reached, want)
	}
	return nil
}
