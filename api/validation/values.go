package validation

import (
	"strconv"
	"time"
)

// Values holds the normalized values of one validated input, by field name.
// Only fields present in the input are recorded; an explicit JSON null is
// recorded as null. The zero Values is empty and safe to use.
//
// The typed accessors return ok=false when the field is absent, null, or of
// another kind; callers apply their own defaults in that case.
type Values struct {
	fields map[string]value
}

type value struct {
	kind Kind
	elem Kind // element kind of a List, 0 when unknown
	v    any  // nil when null
	null bool
	in   any // the input as the request carried it
}

func (vs *Values) set(f *Field, v, in any, null bool) {
	if vs.fields == nil {
		vs.fields = map[string]value{}
	}
	var elem Kind
	if f.Kind == List && f.Elem != nil {
		elem = f.Elem.Kind
	}
	vs.fields[f.Name] = value{kind: f.Kind, elem: elem, v: v, null: null, in: in}
}

// Input returns the field's input as the request carried it (a query or
// path value's string, a body field's decoded JSON), before normalisation:
// the input an error item about the field echoes. ok is false when the
// field is absent.
func (vs Values) Input(name string) (any, bool) {
	f, ok := vs.fields[name]
	return f.in, ok
}

// Has reports whether the field was present in the input, even as null.
func (vs Values) Has(name string) bool {
	_, ok := vs.fields[name]
	return ok
}

// IsNull reports whether the field was present with the value null.
func (vs Values) IsNull(name string) bool {
	return vs.fields[name].null
}

// Value returns the normalized value of any kind (see the Kind constants for
// the Go types); ok is false when the field is absent or null.
func (vs Values) Value(name string) (any, bool) {
	f, ok := vs.fields[name]
	if !ok || f.null {
		return nil, false
	}
	return f.v, true
}

// Int returns an Int field.
func (vs Values) Int(name string) (int64, bool) {
	v, ok := vs.fields[name].v.(int64)
	return v, ok
}

// Float returns a Float field, or an Int or Decimal field converted to float64.
func (vs Values) Float(name string) (float64, bool) {
	f := vs.fields[name]
	switch v := f.v.(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	case string:
		if f.kind == Decimal {
			fl, err := strconv.ParseFloat(v, 64)
			return fl, err == nil || isRangeError(err)
		}
	}
	return 0, false
}

// String returns a String, Email, Enum or Literal field.
func (vs Values) String(name string) (string, bool) {
	f := vs.fields[name]
	switch f.kind {
	case String, Email, Enum, Literal:
		s, ok := f.v.(string)
		return s, ok
	}
	return "", false
}

// Decimal returns a Decimal field in canonical plain form ("0.25", "-3", "100").
func (vs Values) Decimal(name string) (string, bool) {
	f := vs.fields[name]
	if f.kind != Decimal {
		return "", false
	}
	s, ok := f.v.(string)
	return s, ok
}

// Bool returns a Bool field.
func (vs Values) Bool(name string) (bool, bool) {
	v, ok := vs.fields[name].v.(bool)
	return v, ok
}

// Time returns a Date or DateTime field.
func (vs Values) Time(name string) (time.Time, bool) {
	v, ok := vs.fields[name].v.(time.Time)
	return v, ok
}

// Object returns an Object field.
func (vs Values) Object(name string) (map[string]any, bool) {
	v, ok := vs.fields[name].v.(map[string]any)
	return v, ok
}

// Ints returns a List of Int; ok is false if any element is null.
func (vs Values) Ints(name string) ([]int64, bool) {
	return listOf[int64](vs.fields[name], Int)
}

// Strings returns a List of String, Email, Enum, Literal or Decimal; ok is
// false if any element is null.
func (vs Values) Strings(name string) ([]string, bool) {
	f := vs.fields[name]
	switch f.elem {
	case String, Email, Enum, Literal, Decimal:
		return listOf[string](f, f.elem)
	}
	return nil, false
}

// listOf converts a List value whose elements all have type T.
func listOf[T any](f value, elem Kind) ([]T, bool) {
	items, ok := f.v.([]any)
	if !ok || f.elem != elem {
		return nil, false
	}
	out := make([]T, len(items))
	for i, item := range items {
		if out[i], ok = item.(T); !ok {
			return nil, false
		}
	}
	return out, true
}
