package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// This file renders values the way Python prints them, so error messages and
// echoed inputs are byte-for-byte what FastAPI sends.

// pyRepr is Python's repr() of a str: single quotes unless the text holds a
// single quote and no double quote; non-printable characters escaped.
func pyRepr(s string) string {
	quote := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteRune(quote)
	for _, r := range s {
		switch {
		case r == quote || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteRune(quote)
	return b.String()
}

// pyFloatRepr is Python's repr() of a float: the shortest round-tripping
// digits, always with a ".0" or an exponent, scientific notation when the
// decimal exponent is below -4 or above 15 ("1e-05", "1e+16").
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "1.5e-05"
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// isFloatLiteral reports whether a JSON number literal is a Python float
// (has a fraction or exponent) rather than an int.
func isFloatLiteral(n json.Number) bool {
	return strings.ContainsAny(string(n), ".eE")
}

// writePythonJSON appends v as Python's json.dumps (in Starlette's compact
// form, without HTML escaping) prints what json.loads produced: objects in
// their decoded key order, other maps with sorted keys, float literals in
// repr form, "-0" as 0. A nil map or []any prints as {} or [].
func writePythonJSON(buf *bytes.Buffer, v any) error {
	return pyJSONWriter{buf, newEncoder(buf)}.value(v)
}

type pyJSONWriter struct {
	buf *bytes.Buffer
	enc *json.Encoder // writes leaves into buf
}

func (w pyJSONWriter) value(v any) error {
	switch v := v.(type) {
	case *jsonObject:
		if v == nil {
			w.buf.WriteString("{}")
			return nil
		}
		return w.object(v.keys, v.vals)
	case map[string]any:
		return w.object(slices.Sorted(maps.Keys(v)), v)
	case []any:
		w.buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			if err := w.value(e); err != nil {
				return err
			}
		}
		w.buf.WriteByte(']')
		return nil
	}
	return w.leaf(pythonScalar(v))
}

func (w pyJSONWriter) object(keys []string, vals map[string]any) error {
	w.buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if err := w.leaf(k); err != nil {
			return err
		}
		w.buf.WriteByte(':')
		if err := w.value(vals[k]); err != nil {
			return err
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// leaf writes v with encoding/json.
func (w pyJSONWriter) leaf(v any) error {
	if err := w.enc.Encode(v); err != nil {
		return err
	}
	w.buf.Truncate(w.buf.Len() - 1) // Encode adds a newline
	return nil
}

// MarshalJSON renders a decoded object as writePythonJSON does, so that an
// error's Input encodes in request order wherever it is marshalled.
func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := writePythonJSON(&buf, o); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// pythonScalar rewrites a decoded number so that encoding/json prints it as
// Python's json.dumps would: float literals in repr form, "-0" as 0,
// non-finite floats as JavaScript's names (in quotes). Other values are
// returned unchanged.
func pythonScalar(v any) any {
	switch v := v.(type) {
	case json.Number:
		if !isFloatLiteral(v) {
			if v == "-0" {
				return json.Number("0")
			}
			return v
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return v // overflow: Python would hold inf, which it cannot print either
		}
		return json.Number(pyFloatRepr(f))
	case float64:
		switch {
		case math.IsNaN(v):
			return "NaN"
		case math.IsInf(v, 1):
			return "Infinity"
		case math.IsInf(v, -1):
			return "-Infinity"
		}
		return json.Number(pyFloatRepr(v))
	}
	return v
}

// boundNumber renders a numeric bound for ctx and message as pydantic does:
// an Int or Decimal field's integral bound is an integer (ctx {"ge": 1}), a
// Float field's bound is always a float (ctx {"ge": 1.0}). The message text
// uses Rust's float Display, which never uses an exponent ("0.0000001").
func boundNumber(b float64, kind Kind) (json.Number, string) {
	text := strconv.FormatFloat(b, 'f', -1, 64)
	if kind != Float && b == math.Trunc(b) && math.Abs(b) < 1<<63 {
		return json.Number(text), text
	}
	return json.Number(pyFloatRepr(b)), text
}
