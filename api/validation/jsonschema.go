package validation

import (
	"strings"
	"unicode"
)

// JSONSchema describes the schema as an OpenAPI 3.1 (JSON Schema 2020-12)
// object: "type", "properties" and, when any field is required, "required"
// in field order.
func (s Schema) JSONSchema() map[string]any {
	props := make(map[string]any, len(s.Fields))
	var required []string
	for _, f := range s.Fields {
		props[f.Name] = f.JSONSchema()
		if f.Required {
			required = append(required, f.Name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// jsonTypes are the JSON Schema types each kind accepts from clients.
var jsonTypes = map[Kind][]string{
	Int:      {"integer"},
	Float:    {"number"},
	String:   {"string"},
	Bool:     {"boolean"},
	Email:    {"string"},
	Enum:     {"string"},
	Literal:  {"string"},
	Date:     {"string"},
	DateTime: {"string"},
	Object:   {"object"},
	List:     {"array"},
}

var jsonFormats = map[Kind]string{Email: "email", Date: "date", DateTime: "date-time"}

// DecimalPattern is the JSON Schema pattern of a decimal written as a string:
// the pattern pydantic documents for a Decimal,
// ^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$, without its look-ahead, which RE2-based
// validators cannot compile. A response writes every decimal this way.
const DecimalPattern = `^[+-]?(\d+\.?\d*|\.\d+)$`

// DecimalString is the JSON Schema of a decimal as a response writes it: a
// string in plain notation ("0.25").
func DecimalString() map[string]any {
	return map[string]any{"type": "string", "pattern": DecimalPattern}
}

// JSONSchema describes one field. A nullable field's "type" also lists
// "null" (and its "enum" also holds null); "title" is derived from the name
// as pydantic does ("model_names" → "Model Names").
//
// A Decimal is pydantic's validation-mode schema of a Decimal: anyOf a
// number within the bounds, a string of DecimalPattern (DecimalString, the
// form every response uses, so that a client can send back what it read)
// and, when nullable, null. JSON Schema's minimum and maximum bind numbers
// only, so the bounds stand on the number branch; the server checks a
// string's value against them too.
func (f Field) JSONSchema() map[string]any {
	out := map[string]any{}
	if f.Name != "" {
		out["title"] = fieldTitle(f.Name)
	}
	if f.Kind == Decimal {
		number := map[string]any{"type": "number"}
		if f.Ge != nil {
			number["minimum"] = *f.Ge
		}
		if f.Le != nil {
			number["maximum"] = *f.Le
		}
		branches := []any{number, DecimalString()}
		if f.Nullable {
			branches = append(branches, map[string]any{"type": "null"})
		}
		out["anyOf"] = branches
		f.describe(out)
		return out
	}
	types := jsonTypes[f.Kind]
	if f.Nullable {
		types = append(types[:len(types):len(types)], "null")
	}
	if len(types) == 1 {
		out["type"] = types[0]
	} else {
		out["type"] = types
	}
	if format, ok := jsonFormats[f.Kind]; ok {
		out["format"] = format
	}
	switch f.Kind {
	case Enum, Literal:
		if f.Kind == Literal && len(f.Enum) == 1 && !f.Nullable {
			out["const"] = f.Enum[0]
			break
		}
		values := make([]any, 0, len(f.Enum)+1)
		for _, e := range f.Enum {
			values = append(values, e)
		}
		if f.Nullable {
			values = append(values, nil)
		}
		out["enum"] = values
	case Int, Float:
		if f.Ge != nil {
			out["minimum"] = *f.Ge
		}
		if f.Le != nil {
			out["maximum"] = *f.Le
		}
	case String:
		if f.MinLength > 0 {
			out["minLength"] = f.MinLength
		}
		if f.MaxLength > 0 {
			out["maxLength"] = f.MaxLength
		}
	case Object:
		if f.MaxItems > 0 {
			out["maxProperties"] = f.MaxItems
		}
	case List:
		if f.MaxItems > 0 {
			out["maxItems"] = f.MaxItems
		}
		if f.Elem != nil {
			elem := *f.Elem
			elem.Name = ""
			out["items"] = elem.JSONSchema()
		} else {
			out["items"] = map[string]any{}
		}
	}
	f.describe(out)
	return out
}

// describe adds the field's documentation: "default" and "description".
func (f Field) describe(out map[string]any) {
	if f.Default != nil {
		out["default"] = f.Default
	}
	if f.Description != "" {
		out["description"] = f.Description
	}
}

// fieldTitle is pydantic's default title: Python's str.title() with
// underscores turned into spaces.
func fieldTitle(name string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range name {
		cased := unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
		switch {
		case cased && !prevCased:
			r = unicode.ToTitle(r)
		case cased:
			r = unicode.ToLower(r)
		case r == '_':
			r = ' '
		}
		b.WriteRune(r)
		prevCased = cased
	}
	return strings.TrimSpace(b.String())
}
