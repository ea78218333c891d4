package validation

import (
	"bytes"
	"net/url"
	"unicode/utf8"
)

// DecodeBody decodes a JSON request body and validates it against s, with
// error locations starting at "body". It reports, as FastAPI does:
//   - an empty (or blank) body or a JSON null: one "missing" error at
//     ["body"] when s has a required field, otherwise no values and no errors;
//   - a body json.loads rejects: one "json_invalid" error at
//     ["body", <character offset>] with Python's reason in ctx;
//   - valid JSON that is not an object: one "model_attributes_type" error;
//   - otherwise every field error, in schema order.
//
// A leading UTF-8 byte order mark is ignored, as json.loads ignores it in bytes.
func DecodeBody(body []byte, s Schema) (Values, Errors) {
	body = bytes.TrimPrefix(body, []byte("\uFEFF"))
	if len(bytes.Trim(body, " \t\r\n")) == 0 {
		return absentBody(s)
	}
	if pos, ok := firstInvalidUTF8(body); !ok {
		// Python fails before parsing (UnicodeDecodeError); report it at the offending character.
		return Values{}, Errors{jsonInvalidError(pos, "Invalid UTF-8 byte sequence")}
	}
	decoded, syntaxErr := decodePythonJSON(body)
	if syntaxErr != nil {
		pos := utf8.RuneCount(body[:syntaxErr.pos])
		return Values{}, Errors{jsonInvalidError(pos, syntaxErr.msg)}
	}
	if decoded == nil {
		return absentBody(s)
	}
	obj, ok := decoded.(*jsonObject)
	if !ok {
		return Values{}, Errors{newError("model_attributes_type", []any{"body"}, decoded)}
	}
	return s.validate([]any{"body"}, obj.get, obj)
}

func absentBody(s Schema) (Values, Errors) {
	if s.requiresAny() {
		return Values{}, Errors{missingError([]any{"body"}, nil)}
	}
	return Values{}, nil
}

// firstInvalidUTF8 returns the character offset of the first invalid byte.
func firstInvalidUTF8(b []byte) (int, bool) {
	if utf8.Valid(b) {
		return 0, true
	}
	chars := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return chars, false
		}
		b = b[size:]
		chars++
	}
	return chars, false
}

// Query validates query parameters, with error locations starting at "query".
// A scalar field takes the key's last value, as Starlette's QueryParams does
// (?a=1&a=2 gives "2"); a List field takes all values in order, each
// validated at its index. A field with no value is "missing" (input null)
// when required and otherwise absent from Values. Unknown keys are ignored.
func Query(values url.Values, fields ...Field) (Values, Errors) {
	in := map[string]any{}
	for _, f := range fields {
		got := values[f.Name]
		switch {
		case len(got) == 0:
		case f.Kind == List:
			items := make([]any, len(got))
			for i, v := range got {
				items[i] = v
			}
			in[f.Name] = items
		default:
			in[f.Name] = got[len(got)-1]
		}
	}
	return validateParams("query", in, fields)
}

// Path validates path parameters, with error locations starting at "path".
func Path(values map[string]string, fields ...Field) (Values, Errors) {
	in := map[string]any{}
	for _, f := range fields {
		if v, ok := values[f.Name]; ok {
			in[f.Name] = v
		}
	}
	return validateParams("path", in, fields)
}

// validateParams validates string parameters; unlike body fields, a missing
// parameter's error has input null.
func validateParams(where string, in map[string]any, fields []Field) (Values, Errors) {
	return Schema{Fields: fields}.validate([]any{where}, mapLookup(in), nil)
}
