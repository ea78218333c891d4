package validation

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a JSON decoder that fails exactly like CPython's json module
// (Modules/_json.c plus json/decoder.py), because FastAPI reports
// JSONDecodeError's message and character position verbatim. encoding/json's
// syntax errors use different wording and byte offsets.
//
// Decoded values are nil, bool, string, json.Number, []any and *jsonObject,
// which keeps the keys in document order as a Python dict does: a duplicate
// key keeps the position of its first occurrence and takes the last value.
// Values hands callers plain map[string]any (see plainJSON); error inputs
// keep the order, so echoed objects read as the client sent them.
// Python's non-standard NaN / Infinity / -Infinity literals are rejected
// ("Expecting value"): FastAPI could not echo them back either.

// maxJSONDepth bounds nesting so a hostile body cannot exhaust the stack;
// CPython similarly gives up near its recursion limit of 1000.
const maxJSONDepth = 1000

// jsonSyntaxError is a JSONDecodeError: the unformatted message and the byte
// offset in the document (converted to characters by the caller).
type jsonSyntaxError struct {
	msg string
	pos int
}

type jsonDecoder struct {
	data  []byte
	depth int
}

// decodePythonJSON decodes a whole document, as json.loads does.
func decodePythonJSON(data []byte) (any, *jsonSyntaxError) {
	d := &jsonDecoder{data: data}
	v, end, err := d.value(d.skipSpace(0))
	if err != nil {
		return nil, err
	}
	if end = d.skipSpace(end); end != len(data) {
		return nil, &jsonSyntaxError{"Extra data", end}
	}
	return v, nil
}

func (d *jsonDecoder) skipSpace(i int) int {
	for i < len(d.data) {
		switch d.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value scans one term starting at i and returns it with the index after it.
func (d *jsonDecoder) value(i int) (any, int, *jsonSyntaxError) {
	if i >= len(d.data) {
		return nil, i, &jsonSyntaxError{"Expecting value", i}
	}
	switch d.data[i] {
	case '"':
		return d.str(i + 1)
	case '{', '[':
		if d.depth >= maxJSONDepth {
			return nil, i, &jsonSyntaxError{"Maximum nesting depth exceeded", i}
		}
		d.depth++
		defer func() { d.depth-- }()
		if d.data[i] == '{' {
			return d.object(i + 1)
		}
		return d.array(i + 1)
	case 'n':
		if d.hasLiteral(i, "null") {
			return nil, i + 4, nil
		}
	case 't':
		if d.hasLiteral(i, "true") {
			return true, i + 4, nil
		}
	case 'f':
		if d.hasLiteral(i, "false") {
			return false, i + 5, nil
		}
	}
	return d.number(i)
}

func (d *jsonDecoder) hasLiteral(i int, lit string) bool {
	return len(d.data)-i >= len(lit) && string(d.data[i:i+len(lit)]) == lit
}

// object parses members after the opening brace at i-1.
func (d *jsonDecoder) object(i int) (any, int, *jsonSyntaxError) {
	obj := &jsonObject{vals: map[string]any{}}
	i = d.skipSpace(i)
	if i < len(d.data) && d.data[i] == '}' {
		return obj, i + 1, nil
	}
	for {
		if i >= len(d.data) || d.data[i] != '"' {
			return nil, i, &jsonSyntaxError{"Expecting property name enclosed in double quotes", i}
		}
		key, next, err := d.str(i + 1)
		if err != nil {
			return nil, next, err
		}
		i = d.skipSpace(next)
		if i >= len(d.data) || d.data[i] != ':' {
			return nil, i, &jsonSyntaxError{"Expecting ':' delimiter", i}
		}
		val, next, err := d.value(d.skipSpace(i + 1))
		if err != nil {
			return nil, next, err
		}
		obj.set(key.(string), val)
		i = d.skipSpace(next)
		if i < len(d.data) && d.data[i] == '}' {
			return obj, i + 1, nil
		}
		if i >= len(d.data) || d.data[i] != ',' {
			return nil, i, &jsonSyntaxError{"Expecting ',' delimiter", i}
		}
		comma := i
		if i = d.skipSpace(i + 1); i < len(d.data) && d.data[i] == '}' {
			return nil, i, &jsonSyntaxError{"Illegal trailing comma before end of object", comma}
		}
	}
}

// jsonObject is a decoded JSON object that remembers its key order.
type jsonObject struct {
	keys []string       // each key once, where it first occurred
	vals map[string]any // the last value given for each key
}

// set records a member as a Python dict assignment does: a new key goes
// last, a repeated key keeps its place and takes the new value.
func (o *jsonObject) set(key string, val any) {
	if _, dup := o.vals[key]; !dup {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = val
}

// get returns a member's value.
func (o *jsonObject) get(key string) (any, bool) {
	v, ok := o.vals[key]
	return v, ok
}

// plainJSON converts a decoded value into the plain Go values callers see:
// every *jsonObject, however deeply nested, becomes a new map[string]any.
// Arrays are copied; the decoded value is never modified.
func plainJSON(v any) any {
	switch v := v.(type) {
	case *jsonObject:
		if v == nil {
			return map[string]any(nil)
		}
		out := make(map[string]any, len(v.vals))
		for k, e := range v.vals {
			out[k] = plainJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plainJSON(e)
		}
		return out
	}
	return v
}

// array parses elements after the opening bracket at i-1.
func (d *jsonDecoder) array(i int) (any, int, *jsonSyntaxError) {
	arr := []any{}
	i = d.skipSpace(i)
	if i < len(d.data) && d.data[i] == ']' {
		return arr, i + 1, nil
	}
	for {
		val, next, err := d.value(i)
		if err != nil {
			return nil, next, err
		}
		arr = append(arr, val)
		i = d.skipSpace(next)
		if i < len(d.data) && d.data[i] == ']' {
			return arr, i + 1, nil
		}
		if i >= len(d.data) || d.data[i] != ',' {
			return nil, i, &jsonSyntaxError{"Expecting ',' delimiter", i}
		}
		comma := i
		if i = d.skipSpace(i + 1); i < len(d.data) && d.data[i] == ']' {
			return nil, i, &jsonSyntaxError{"Illegal trailing comma before end of array", comma}
		}
	}
}

// str scans a string whose opening quote is at end-1 (scanstring_unicode).
func (d *jsonDecoder) str(end int) (any, int, *jsonSyntaxError) {
	begin := end - 1
	data := d.data
	var out []byte
	for {
		next := end
		for next < len(data) && data[next] != '"' && data[next] != '\\' {
			if data[next] <= 0x1f {
				return nil, next, &jsonSyntaxError{"Invalid control character at", next}
			}
			next++
		}
		if next >= len(data) {
			return nil, next, &jsonSyntaxError{"Unterminated string starting at", begin}
		}
		out = append(out, data[end:next]...)
		if data[next] == '"' {
			return string(out), next + 1, nil
		}
		next++ // past the backslash
		if next == len(data) {
			return nil, next, &jsonSyntaxError{"Unterminated string starting at", begin}
		}
		if c := data[next]; c != 'u' {
			end = next + 1
			unescaped, ok := simpleEscape(c)
			if !ok {
				return nil, end, &jsonSyntaxError{`Invalid \escape`, end - 2}
			}
			out = append(out, unescaped)
			continue
		}
		next++ // past the 'u'
		end = next + 4
		if end >= len(data) {
			return nil, end, &jsonSyntaxError{`Invalid \uXXXX escape`, next - 1}
		}
		r, ok := hex4(data[next:end])
		if !ok {
			return nil, end, &jsonSyntaxError{`Invalid \uXXXX escape`, end - 5}
		}
		if utf16.IsSurrogate(r) && r < 0xdc00 && end+6 < len(data) && data[end] == '\\' && data[end+1] == 'u' {
			low, ok := hex4(data[end+2 : end+6])
			if !ok {
				return nil, end + 6, &jsonSyntaxError{`Invalid \uXXXX escape`, end + 1}
			}
			if low >= 0xdc00 && low <= 0xdfff {
				r = utf16.DecodeRune(r, low)
				end += 6
			}
		}
		// A lone surrogate cannot be held in a Go string; use U+FFFD as encoding/json does.
		out = utf8.AppendRune(out, r)
	}
}

// simpleEscape maps the character after a backslash to what it stands for.
func simpleEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number matches -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? the way
// _match_number_unicode does: a dangling "." or exponent is left unread, and
// no number at all means "Expecting value" at start.
func (d *jsonDecoder) number(start int) (any, int, *jsonSyntaxError) {
	data, last := d.data, len(d.data)-1
	isDigit := func(i int) bool { return i <= last && data[i] >= '0' && data[i] <= '9' }
	i := start
	if data[i] == '-' {
		i++
		if i > last {
			return nil, start, &jsonSyntaxError{"Expecting value", start}
		}
	}
	switch {
	case data[i] >= '1' && data[i] <= '9':
		for i++; isDigit(i); i++ {
		}
	case data[i] == '0':
		i++
	default:
		return nil, start, &jsonSyntaxError{"Expecting value", start}
	}
	if i < last && data[i] == '.' && isDigit(i+1) {
		for i += 2; isDigit(i); i++ {
		}
	}
	if i < last && (data[i] == 'e' || data[i] == 'E') {
		eStart := i
		i++
		if i < last && (data[i] == '-' || data[i] == '+') {
			i++
		}
		for isDigit(i) {
			i++
		}
		if !(data[i-1] >= '0' && data[i-1] <= '9') {
			i = eStart
		}
	}
	return json.Number(data[start:i]), i, nil
}
