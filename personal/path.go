package personal

import (
	"encoding/json"
	"fmt"
	"strings"

	gojson "github.com/goccy/go-json"
)

func (f field) name() string { return strings.Join(f.path, ".") }

// placeholder is what the field reads as without its subject's key. It
// may be shared: callers copy it, and never write to it.
func (f field) placeholder(subject string) json.RawMessage {
	switch f.kind {
	case text:
		return erasedTextJSON
	case object:
		return emptyObjectJSON
	case list:
		return emptyListJSON
	case email:
		b, _ := gojson.Marshal(ErasedEmail(subject))
		return b
	default:
		return nullJSON
	}
}

// isPlaceholder reports whether value is the field's placeholder already:
// a null of a nullable field, or, for one under an array, an array of
// nulls (a turn's errors when every model answered). Sealing leaves it
// where it is, in clear (it would read back as null either way), rather
// than carry it in the sealed values too.
func (f field) isPlaceholder(value []byte) bool {
	if f.kind != nullable {
		return false
	}
	if string(value) == "null" {
		return true
	}
	if !strings.HasSuffix(f.path[0], "[]") {
		return false
	}
	var buf [8][]byte
	elems, ok := appendElements(buf[:0], value)
	if !ok {
		return false
	}
	for _, e := range elems {
		if string(e) != "null" {
			return false
		}
	}
	return true
}

// The placeholders that are the same for every subject.
var (
	erasedTextJSON  = json.RawMessage(`"` + ErasedText + `"`)
	emptyObjectJSON = json.RawMessage(`{}`)
	emptyListJSON   = json.RawMessage(`[]`)
	nullJSON        = json.RawMessage(`null`)
)

// take replaces the field in top by its placeholder and returns its value:
// for a field under an array ("results[].response_text"), the array of each
// element's value. nil when the event has no such member.
func (f field) take(top map[string]json.RawMessage, subject string) (json.RawMessage, error) {
	return take(top, f.path, f.placeholder(subject))
}

// put sets the field in top to value, as take returned it.
func (f field) put(top map[string]json.RawMessage, value json.RawMessage) error {
	return put(top, f.path, value)
}

func take(m map[string]json.RawMessage, path []string, placeholder json.RawMessage) (json.RawMessage, error) {
	name, each := strings.CutSuffix(path[0], "[]")
	raw, ok := m[name]
	if !ok {
		return nil, nil
	}
	if len(path) == 1 {
		m[name] = placeholder
		return raw, nil
	}
	if string(raw) == "null" {
		return nil, nil
	}
	if !each {
		var sub map[string]json.RawMessage
		if err := gojson.Unmarshal(raw, &sub); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		v, err := take(sub, path[1:], placeholder)
		if err != nil {
			return nil, err
		}
		m[name], err = gojson.Marshal(sub)
		return v, err
	}
	var elems []map[string]json.RawMessage
	if err := gojson.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	values := make([]json.RawMessage, len(elems))
	for i, el := range elems {
		v, err := take(el, path[1:], placeholder)
		if err != nil {
			return nil, err
		}
		if v == nil {
			v = json.RawMessage(`null`)
		}
		values[i] = v
	}
	var err error
	if m[name], err = gojson.Marshal(elems); err != nil {
		return nil, err
	}
	return gojson.Marshal(values)
}

func put(m map[string]json.RawMessage, path []string, value json.RawMessage) error {
	name, each := strings.CutSuffix(path[0], "[]")
	raw, ok := m[name]
	if !ok {
		return nil
	}
	if len(path) == 1 {
		m[name] = value
		return nil
	}
	if string(raw) == "null" {
		return nil
	}
	if !each {
		var sub map[string]json.RawMessage
		if err := gojson.Unmarshal(raw, &sub); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := put(sub, path[1:], value); err != nil {
			return err
		}
		var err error
		m[name], err = gojson.Marshal(sub)
		return err
	}
	var elems []map[string]json.RawMessage
	if err := gojson.Unmarshal(raw, &elems); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var values []json.RawMessage
	if err := gojson.Unmarshal(value, &values); err != nil || len(values) != len(elems) {
		return fmt.Errorf("%s: %d sealed values for %d elements", name, len(values), len(elems))
	}
	for i, el := range elems {
		if err := put(el, path[1:], values[i]); err != nil {
			return err
		}
	}
	var err error
	m[name], err = gojson.Marshal(elems)
	return err
}
