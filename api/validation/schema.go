package validation

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind is the type of a field.
type Kind int

// The field kinds. The comment gives the Go type Values holds for each.
const (
	Int      Kind = iota + 1 // int64
	Float                    // float64; finite only
	String                   // string
	Bool                     // bool
	Email                    // string, normalized (domain lower-cased)
	Enum                     // string, one of Field.Enum
	Literal                  // string, one of Field.Enum (usually a single value)
	Decimal                  // string in canonical plain form, e.g. "0.25"
	Date                     // time.Time at midnight UTC
	DateTime                 // time.Time; without an offset the input is taken as UTC
	Object                   // map[string]any of decoded JSON (numbers as json.Number)
	List                     // []any of the element kind's values
)

var kindNames = map[Kind]string{
	Int: "Int", Float: "Float", String: "String", Bool: "Bool", Email: "Email",
	Enum: "Enum", Literal: "Literal", Decimal: "Decimal", Date: "Date",
	DateTime: "DateTime", Object: "Object", List: "List",
}

func (k Kind) String() string {
	if name, ok := kindNames[k]; ok {
		return name
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Field describes one body property, query parameter or path parameter.
// Kind must be set (validating a field without one panics), and bounds must
// not be NaN.
type Field struct {
	Name     string
	Kind     Kind
	Required bool // absent → "missing"; an optional absent field is simply not in Values
	Nullable bool // JSON null is accepted (and recorded as null)

	Elem *Field // List: the element field (its Name is ignored); nil accepts any JSON values
	// Members, for an Object, checks its members where it is checked, so
	// that their errors come with the rest of the request's (nil: any).
	Members *Schema
	Enum    []string // Enum / Literal: the allowed values, matched exactly

	Ge, Le *float64 // Int / Float / Decimal: inclusive bounds; see Bound

	MinLength, MaxLength int // String: bounds in Unicode code points; 0 = unbounded

	// MaxItems bounds a List's items or an Object's properties (pydantic's
	// too_long beyond it, checked before any item). Every List and Object
	// of a request must have one: an unbounded one lets a request of 1 MiB
	// cost far more than its size (TestEveryCollectionIsBounded).
	MaxItems int

	Default     any    // documentation only (OpenAPI "default"); callers apply defaults themselves
	Description string // documentation only (OpenAPI "description")
}

// Bound returns a pointer to v, for Field.Ge and Field.Le.
func Bound(v float64) *float64 { return &v }

// Schema is an ordered list of fields: errors are reported in this order.
type Schema struct {
	Fields []Field
}

// Validate checks obj (a decoded JSON object) against the schema. loc is the
// location prefix of every error, e.g. []any{"body"}. A missing required
// field's error has the whole obj as its input, as pydantic reports it.
// Keys that are not in the schema are ignored.
func (s Schema) Validate(loc []any, obj map[string]any) (Values, Errors) {
	var input any = obj
	if obj == nil {
		input = map[string]any{}
	}
	return s.validate(loc, mapLookup(obj), input)
}

// lookup returns the input value of a field, and whether it is present.
type lookup func(name string) (any, bool)

func mapLookup(m map[string]any) lookup {
	return func(name string) (any, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// validate checks every field in order; missingInput is the input reported
// for an absent required field.
func (s Schema) validate(loc []any, get lookup, missingInput any) (Values, Errors) {
	vals := Values{}
	var errs Errors
	for i := range s.Fields {
		f := &s.Fields[i]
		raw, ok := get(f.Name)
		if !ok {
			if f.Required {
				errs = append(errs, missingError(appendLoc(loc, f.Name), missingInput))
			}
			continue
		}
		v, fieldErrs := f.validate(appendLoc(loc, f.Name), raw)
		if len(fieldErrs) > 0 {
			errs = append(errs, fieldErrs...)
			continue
		}
		vals.set(f, v, raw, raw == nil)
	}
	return vals, errs
}

// requiresAny reports whether an absent body is an error.
func (s Schema) requiresAny() bool {
	return slices.ContainsFunc(s.Fields, func(f Field) bool { return f.Required })
}

// appendLoc returns a new location; the prefix is never shared or modified.
func appendLoc(loc []any, part any) []any {
	return append(slices.Clip(loc), part)
}

// validate coerces one input value. A nil result with no errors and a nil
// input means an accepted null.
func (f *Field) validate(loc []any, in any) (any, Errors) {
	if in == nil && f.Nullable {
		return nil, nil
	}
	var v any
	var err *ErrorItem
	switch f.Kind {
	case Int:
		v, err = validateInt(f, loc, in)
	case Float:
		v, err = validateFloat(f, loc, in)
	case Decimal:
		v, err = validateDecimal(f, loc, in)
	case Bool:
		v, err = validateBool(loc, in)
	case String:
		v, err = validateString(f, loc, in)
	case Email:
		v, err = validateEmail(loc, in)
	case Enum, Literal:
		v, err = validateChoice(f, loc, in)
	case Date:
		v, err = validateDate(loc, in)
	case DateTime:
		v, err = validateDateTime(loc, in)
	case Object:
		switch obj := in.(type) {
		case *jsonObject:
			if f.MaxItems > 0 && len(obj.keys) > f.MaxItems {
				return nil, Errors{tooLongError("Dictionary", loc, in, f.MaxItems, len(obj.keys))}
			}
			v = plainJSON(obj)
		case map[string]any:
			if f.MaxItems > 0 && len(obj) > f.MaxItems {
				return nil, Errors{tooLongError("Dictionary", loc, in, f.MaxItems, len(obj))}
			}
			v = obj
		default:
			err = errorPtr(newError("dict_type", loc, in))
		}
		if m, ok := v.(map[string]any); ok && f.Members != nil {
			if _, errs := f.Members.Validate(loc, m); len(errs) > 0 {
				return nil, errs
			}
		}
	case List:
		return f.validateList(loc, in)
	default:
		panic(fmt.Sprintf("validation: field %q has no kind", f.Name))
	}
	if err != nil {
		return nil, Errors{*err}
	}
	return v, nil
}

// validateList checks the length, then the elements. Only the first element
// that fails is reported (at its index), so that the answer to a list of
// bad items stays small whatever the list's length.
func (f *Field) validateList(loc []any, in any) (any, Errors) {
	items, ok := in.([]any)
	if !ok {
		return nil, Errors{newError("list_type", loc, in)}
	}
	if f.MaxItems > 0 && len(items) > f.MaxItems {
		return nil, Errors{tooLongError("List", loc, in, f.MaxItems, len(items))}
	}
	out := make([]any, len(items))
	for i, item := range items {
		if f.Elem == nil {
			out[i] = plainJSON(item)
			continue
		}
		v, itemErrs := f.Elem.validate(appendLoc(loc, i), item)
		if len(itemErrs) > 0 {
			return nil, itemErrs
		}
		out[i] = v
	}
	return out, nil
}

func validateString(f *Field, loc []any, in any) (any, *ErrorItem) {
	s, ok := in.(string)
	if !ok {
		return nil, errorPtr(newError("string_type", loc, in))
	}
	// A query or path value is raw bytes once unescaped (%FF): PostgreSQL
	// refuses text that is not UTF-8, so it is refused here, as pydantic
	// refuses bytes it cannot decode.
	if !utf8.ValidString(s) {
		return nil, errorPtr(UnicodeError(loc, s))
	}
	// PostgreSQL text cannot hold U+0000: refuse it at the edge, where it is
	// a clear 422, rather than let a read model fail on it later.
	if strings.ContainsRune(s, 0) {
		return nil, errorPtr(ValueError(loc, in, "String must not contain NUL characters"))
	}
	if f.MinLength > 0 || f.MaxLength > 0 {
		n := utf8.RuneCountInString(s)
		if f.MinLength > 0 && n < f.MinLength {
			return nil, errorPtr(stringLengthError(true, loc, in, f.MinLength))
		}
		if f.MaxLength > 0 && n > f.MaxLength {
			return nil, errorPtr(stringLengthError(false, loc, in, f.MaxLength))
		}
	}
	return s, nil
}

// validateChoice accepts exactly one of f.Enum. Any other input, of any
// type, gets the enum / literal_error listing the allowed values.
func validateChoice(f *Field, loc []any, in any) (any, *ErrorItem) {
	if s, ok := in.(string); ok && slices.Contains(f.Enum, s) {
		return s, nil
	}
	typ := "enum"
	if f.Kind == Literal {
		typ = "literal_error"
	}
	return nil, errorPtr(choiceError(typ, loc, in, f.Enum))
}
