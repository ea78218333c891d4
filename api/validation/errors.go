package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrorItem is one entry of a FastAPI 422 "detail" list, as produced by
// pydantic v2 (errors(include_url=False)).
//
// An Input that came from a JSON body holds the decoded value: nil, bool,
// string, json.Number, []any, or, for a JSON object, an unexported type that
// remembers the client's key order and marshals in that order (Values, by
// contrast, hands out objects as plain map[string]any).
type ErrorItem struct {
	Type  string         // pydantic error type, e.g. "int_parsing"
	Loc   []any          // "body" / "query" / "path", then field names (string) and list indexes (int)
	Msg   string         // human-readable message, worded exactly like pydantic
	Input any            // the offending input value
	Ctx   map[string]any // error context; nil when the type has none

	ctxOrder []string // the order of Ctx's keys where pydantic's is not sorted
}

// MarshalJSON writes the keys in pydantic's order: type, loc, msg, input and,
// only when present, ctx. Input and ctx are rendered the way Python's json
// module would print the value FastAPI decoded: 5.0 stays 5.0, 1E2 becomes
// 100.0, and an object decoded from a request body keeps the client's key
// order (other maps have sorted keys).
func (e ErrorItem) MarshalJSON() ([]byte, error) {
	loc := e.Loc
	if loc == nil {
		loc = []any{}
	}
	var buf bytes.Buffer
	buf.WriteString(`{"type":`)
	if err := encodeJSON(&buf, e.Type); err != nil {
		return nil, err
	}
	buf.WriteString(`,"loc":`)
	if err := encodeJSON(&buf, loc); err != nil {
		return nil, fmt.Errorf("validation: encoding loc of %s error: %w", e.Type, err)
	}
	buf.WriteString(`,"msg":`)
	if err := encodeJSON(&buf, e.Msg); err != nil {
		return nil, err
	}
	buf.WriteString(`,"input":`)
	if err := writePythonJSON(&buf, e.Input); err != nil {
		return nil, fmt.Errorf("validation: encoding input of %s error: %w", e.Type, err)
	}
	if e.Ctx != nil {
		buf.WriteString(`,"ctx":`)
		var ctx any = e.Ctx
		if e.ctxOrder != nil {
			ordered := &jsonObject{vals: map[string]any{}}
			for _, k := range e.ctxOrder {
				ordered.set(k, e.Ctx[k])
			}
			ctx = ordered
		}
		if err := writePythonJSON(&buf, ctx); err != nil {
			return nil, fmt.Errorf("validation: encoding ctx of %s error: %w", e.Type, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// encodeJSON appends v without HTML escaping, as Starlette's JSONResponse does.
func encodeJSON(buf *bytes.Buffer, v any) error {
	if err := newEncoder(buf).Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode adds a newline
	return nil
}

// newEncoder returns an encoder into buf that does not escape HTML.
func newEncoder(buf *bytes.Buffer) *json.Encoder {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc
}

// Errors is the full list of validation errors for one request.
type Errors []ErrorItem

// Error summarises the errors on one line, e.g.
// "2 validation errors: body.name: Field required; query.limit: Input should be a valid integer".
func (e Errors) Error() string {
	var b strings.Builder
	if len(e) == 1 {
		b.WriteString("1 validation error: ")
	} else {
		fmt.Fprintf(&b, "%d validation errors: ", len(e))
	}
	for i, item := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, part := range item.Loc {
			if j > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, part)
		}
		b.WriteString(": ")
		b.WriteString(item.Msg)
	}
	return b.String()
}

// DetailJSON renders the 422 response body {"detail":[...]}.
// A nil or empty list renders as {"detail":[]}.
//
// The body is bounded whatever the request: at most MaxErrorItems items, and
// each echoed input cut by cutInput.
func (e Errors) DetailJSON() ([]byte, error) {
	items := make([]ErrorItem, 0, min(len(e), MaxErrorItems))
	for _, item := range e[:min(len(e), MaxErrorItems)] {
		item.Input = cutInput(item.Input, 0)
		items = append(items, item)
	}
	var buf bytes.Buffer
	if err := encodeJSON(&buf, map[string]any{"detail": items}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ValueError builds the error pydantic reports when a validator raises
// ValueError(text): type "value_error", msg "Value error, <text>", ctx
// {"error": "<text>"}. Use it for cross-field checks, e.g.
// ValueError([]any{"body", "end"}, input, "end must be after start").
func ValueError(loc []any, input any, text string) ErrorItem {
	return ErrorItem{
		Type:  "value_error",
		Loc:   loc,
		Msg:   "Value error, " + text,
		Input: input,
		Ctx:   map[string]any{"error": text},
	}
}

// messages holds the fixed wording of the context-free error types
// (pydantic-core src/errors/types.rs, Python mode).
var messages = map[string]string{
	"missing":                    "Field required",
	"int_type":                   "Input should be a valid integer",
	"int_parsing":                "Input should be a valid integer, unable to parse string as an integer",
	"int_from_float":             "Input should be a valid integer, got a number with a fractional part",
	"int_parsing_size":           "Unable to parse input string as an integer, exceeded maximum size",
	"float_type":                 "Input should be a valid number",
	"float_parsing":              "Input should be a valid number, unable to parse string as a number",
	"finite_number":              "Input should be a finite number",
	"string_type":                "Input should be a valid string",
	"string_unicode":             "Input should be a valid string, unable to parse raw data as a unicode string",
	"bool_type":                  "Input should be a valid boolean",
	"bool_parsing":               "Input should be a valid boolean, unable to interpret input",
	"list_type":                  "Input should be a valid list",
	"dict_type":                  "Input should be a valid dictionary",
	"decimal_type":               "Decimal input should be an integer, float, string or Decimal object",
	"decimal_parsing":            "Input should be a valid decimal",
	"date_type":                  "Input should be a valid date",
	"datetime_type":              "Input should be a valid datetime",
	"date_from_datetime_inexact": "Datetimes provided to dates should have zero time - e.g. be exact dates",
	"model_attributes_type":      "Input should be a valid dictionary or object to extract fields from",
}

// UnicodeError is pydantic's string_unicode: s is not UTF-8 (its input is
// shown with each bad byte replaced).
func UnicodeError(loc []any, s string) ErrorItem {
	return newError("string_unicode", loc, strings.ToValidUTF8(s, "\ufffd"))
}

// newError builds an error of a context-free type.
func newError(typ string, loc []any, input any) ErrorItem {
	msg, ok := messages[typ]
	if !ok {
		panic("validation: no message for error type " + typ)
	}
	return ErrorItem{Type: typ, Loc: loc, Msg: msg, Input: input}
}

// tooLongError is pydantic's too_long: "List should have at most 8 items
// after validation, not 9" (fieldType "List" or "Dictionary").
func tooLongError(fieldType string, loc []any, input any, maxLen, actual int) ErrorItem {
	plural := "s"
	if maxLen == 1 {
		plural = ""
	}
	return ErrorItem{
		Type:  "too_long",
		Loc:   loc,
		Msg:   fmt.Sprintf("%s should have at most %d item%s after validation, not %d", fieldType, maxLen, plural, actual),
		Input: input,
		Ctx:   map[string]any{"field_type": fieldType, "max_length": maxLen, "actual_length": actual},

		ctxOrder: []string{"field_type", "max_length", "actual_length"},
	}
}

func missingError(loc []any, input any) ErrorItem {
	return newError("missing", loc, input)
}

// choiceError is the enum / literal_error item: "Input should be 'a', 'b' or 'c'".
func choiceError(typ string, loc []any, input any, allowed []string) ErrorItem {
	expected := expectedList(allowed)
	return ErrorItem{
		Type:  typ,
		Loc:   loc,
		Msg:   "Input should be " + expected,
		Input: input,
		Ctx:   map[string]any{"expected": expected},
	}
}

// expectedList joins Python reprs like pydantic: "'a', 'b' or 'c'".
func expectedList(allowed []string) string {
	reprs := make([]string, len(allowed))
	for i, a := range allowed {
		reprs[i] = pyRepr(a)
	}
	if len(reprs) <= 1 {
		return strings.Join(reprs, "")
	}
	return strings.Join(reprs[:len(reprs)-1], ", ") + " or " + reprs[len(reprs)-1]
}

// boundError is greater_than_equal / less_than_equal. bound is the JSON
// rendering of the limit (an integer when integral) and text its rendering
// inside the message.
func boundError(typ, key string, loc []any, input any, bound json.Number, text string) ErrorItem {
	verb := map[string]string{
		"greater_than_equal": "greater than or equal to",
		"less_than_equal":    "less than or equal to",
	}[typ]
	return ErrorItem{
		Type:  typ,
		Loc:   loc,
		Msg:   "Input should be " + verb + " " + text,
		Input: input,
		Ctx:   map[string]any{key: bound},
	}
}

func stringLengthError(tooShort bool, loc []any, input any, limit int) ErrorItem {
	typ, key, word := "string_too_long", "max_length", "most"
	if tooShort {
		typ, key, word = "string_too_short", "min_length", "least"
	}
	plural := "s"
	if limit == 1 {
		plural = ""
	}
	return ErrorItem{
		Type:  typ,
		Loc:   loc,
		Msg:   fmt.Sprintf("String should have at %s %d character%s", word, limit, plural),
		Input: input,
		Ctx:   map[string]any{key: limit},
	}
}

// emailError is what pydantic's EmailStr raises for email-validator failures.
func emailError(loc []any, input any, reason string) ErrorItem {
	return ErrorItem{
		Type:  "value_error",
		Loc:   loc,
		Msg:   "value is not a valid email address: " + reason,
		Input: input,
		Ctx:   map[string]any{"reason": reason},
	}
}

// temporalParsingError covers date_from_datetime_parsing,
// datetime_from_date_parsing, datetime_parsing and date_parsing (of year 0
// alone), whose message ends with
// speedate's (or Python's) reason.
func temporalParsingError(typ string, loc []any, input any, reason string) ErrorItem {
	prefix := map[string]string{
		"date_from_datetime_parsing": "Input should be a valid date or datetime, ",
		"datetime_from_date_parsing": "Input should be a valid datetime or date, ",
		"datetime_parsing":           "Input should be a valid datetime, ",
		"date_parsing":               "Input should be a valid date in the format YYYY-MM-DD, ",
	}[typ]
	return ErrorItem{
		Type:  typ,
		Loc:   loc,
		Msg:   prefix + reason,
		Input: input,
		Ctx:   map[string]any{"error": reason},
	}
}

// jsonInvalidError is FastAPI's own item for bodies json.loads rejects:
// loc ["body", <character offset>], input {}, ctx {"error": <JSONDecodeError.msg>}.
func jsonInvalidError(pos int, reason string) ErrorItem {
	return ErrorItem{
		Type:  "json_invalid",
		Loc:   []any{"body", pos},
		Msg:   "JSON decode error",
		Input: map[string]any{},
		Ctx:   map[string]any{"error": reason},
	}
}

// Bounds on what a 422 echoes of its request.
const (
	// MaxErrorItems is the most errors one answer lists.
	MaxErrorItems = 50
	// MaxInputChars is the most characters of a string input echoed at the
	// top of an error item; strings inside an echoed object or list keep
	// MaxNestedInputChars.
	MaxInputChars       = 1000
	MaxNestedInputChars = 100
	// MaxInputItems is the most items of a list, or members of an object,
	// echoed; MaxInputDepth the deepest nesting echoed.
	MaxInputItems = 10
	MaxInputDepth = 3
)

// cutInput bounds an echoed input, as pydantic cuts the inputs it prints: a
// long string keeps its start and ends in "...", a long list or object its
// first items then "...", and what is nested deeper than MaxInputDepth is
// "...".
func cutInput(v any, depth int) any {
	if depth > MaxInputDepth {
		return "..."
	}
	switch x := v.(type) {
	case string:
		limit := MaxInputChars
		if depth > 0 {
			limit = MaxNestedInputChars
		}
		if utf8.RuneCountInString(x) <= limit {
			return x
		}
		n := 0
		for i := range x {
			if n == limit {
				return x[:i] + "..."
			}
			n++
		}
		return x
	case []any:
		out := make([]any, 0, min(len(x), MaxInputItems)+1)
		for i, item := range x {
			if i == MaxInputItems {
				out = append(out, "...")
				break
			}
			out = append(out, cutInput(item, depth+1))
		}
		return out
	case *jsonObject:
		out := &jsonObject{vals: map[string]any{}}
		for i, k := range x.keys {
			if i == MaxInputItems {
				out.set("...", "...")
				break
			}
			out.set(cutInput(k, depth+1).(string), cutInput(x.vals[k], depth+1))
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := &jsonObject{vals: map[string]any{}}
		for i, k := range keys {
			if i == MaxInputItems {
				out.set("...", "...")
				break
			}
			out.set(cutInput(k, depth+1).(string), cutInput(x[k], depth+1))
		}
		return out
	}
	return v
}
