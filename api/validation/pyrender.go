package validation

import (
	"encoding/json"
	"fmt"
	"math"
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

// pythonJSON rewrites a decoded value so that encoding/json prints it as
// Python's json.dumps would print what json.loads produced: float literals
// in repr form, "-0" as 0. Maps and slices are copied, never modified.
func pythonJSON(v any) any {
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
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = pythonJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = pythonJSON(e)
		}
		return out
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
