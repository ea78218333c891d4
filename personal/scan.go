package personal

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// The byte-level path: most event types keep their personal fields at the
// top level of their data, and sealing or opening those needs no parse into
// maps and no marshal back (which cost four fifths of Seal and Open): the
// members are found by a scan and the output is written in one pass,
// members in their order. Anything the scan does not expect (a key with an
// escape, malformed JSON) goes the general way.

// member is a top-level member of a JSON object: its key as written
// (without quotes) and its value's bytes.
type member struct{ key, value []byte }

// members splits the top level of the JSON object data into dst, or reports
// false.
func members(data []byte, dst []member) ([]member, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return dst, skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, false
		}
		end := stringEnd(data, i)
		if end < 0 || bytes.IndexByte(data[i+1:end-1], '\\') >= 0 {
			return nil, false
		}
		key := data[i+1 : end-1]
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		vend := valueEnd(data, i)
		if vend < 0 {
			return nil, false
		}
		dst = append(dst, member{key: key, value: data[i:vend]})
		i = skipSpace(data, vend)
		if i >= len(data) {
			return nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return dst, skipSpace(data, i+1) == len(data)
		default:
			return nil, false
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at data[i] ('"').
// It jumps from quote to quote (IndexByte is vectorised): a quote ends the
// string unless an odd run of backslashes escapes it.
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		escapes := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// valueEnd returns the index after the JSON value starting at data[i].
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end := stringEnd(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) && !delimiter(data[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

func delimiter(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// scannable reports whether the byte-level path can take every personal
// field of r: top-level members, and members one level down (of an object,
// or of each element of an array).
func (r rule) scannable() bool {
	for _, f := range r.fields {
		if len(f.path) > 2 || len(f.path) == 1 && strings.HasSuffix(f.path[0], "[]") {
			return false
		}
	}
	return true
}

// fieldOf returns r's top-level field named key.
func (r rule) fieldOf(key []byte) (field, bool) {
	for _, f := range r.fields {
		if len(f.path) == 1 && f.path[0] == string(key) {
			return f, true
		}
	}
	return field{}, false
}

// nestedUnder returns r's fields one level below the top-level member key.
func (r rule) nestedUnder(key []byte) []field {
	var out []field
	for _, f := range r.fields {
		if len(f.path) == 2 && strings.TrimSuffix(f.path[0], "[]") == string(key) {
			out = append(out, f)
		}
	}
	return out
}

// elements splits the JSON array data, or reports false.
func elements(data []byte) ([][]byte, bool) { return appendElements(nil, data) }

// appendElements is elements appending to out.
func appendElements(out [][]byte, data []byte) ([][]byte, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return out, skipSpace(data, i+1) == len(data)
	}
	for {
		end := valueEnd(data, i)
		if end < 0 {
			return nil, false
		}
		out = append(out, data[i:end])
		i = skipSpace(data, end)
		if i >= len(data) {
			return nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return out, skipSpace(data, i+1) == len(data)
		default:
			return nil, false
		}
	}
}

// replaceMember returns the object obj with its member key's value replaced
// by value, and the old value (nil when obj has no such member: then obj is
// returned as it is).
func replaceMember(obj []byte, key string, value []byte) (out, old []byte, ok bool) {
	out, old, ok = appendReplaced(make([]byte, 0, len(obj)+32), obj, key, value)
	if ok && old == nil {
		return obj, nil, true
	}
	return out, old, ok
}

// takeNested replaces f (one level below the top) in value, the top-level
// member's value, by its placeholder: it returns the new value and what was
// taken (for an array, the array of each element's value; nil for nothing).
func takeNested(value []byte, f field, placeholder []byte) (out, taken []byte, ok bool) {
	if string(value) == "null" {
		return value, nil, true
	}
	leaf := f.path[1]
	if !strings.HasSuffix(f.path[0], "[]") {
		return replaceMember(value, leaf, placeholder)
	}
	elems, ok := elements(value)
	if !ok {
		return nil, nil, false
	}
	out = append(make([]byte, 0, len(value)+32), '[')
	taken = append(make([]byte, 0, 64), '[')
	for i, el := range elems {
		newEl, v, ok := replaceMember(el, leaf, placeholder)
		if !ok {
			return nil, nil, false
		}
		if v == nil {
			v = []byte("null")
		}
		if i > 0 {
			out, taken = append(out, ','), append(taken, ',')
		}
		out, taken = append(out, newEl...), append(taken, v...)
	}
	return append(out, ']'), append(taken, ']'), true
}

// appendPutNested appends value with f (one level below the top) set to
// sealed, as takeNested took it, to dst: written in one pass, since opening
// a log (a replay) does it for every event.
func appendPutNested(dst, value []byte, f field, sealed []byte) ([]byte, bool) {
	if string(value) == "null" {
		return append(dst, value...), true
	}
	leaf := f.path[1]
	if !strings.HasSuffix(f.path[0], "[]") {
		out, _, ok := appendReplaced(dst, value, leaf, sealed)
		return out, ok
	}
	var ebuf, vbuf [8][]byte
	elems, ok := appendElements(ebuf[:0], value)
	if !ok {
		return nil, false
	}
	vals, ok := appendElements(vbuf[:0], sealed)
	if !ok || len(vals) != len(elems) {
		return nil, false
	}
	dst = append(dst, '[')
	for i, el := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, _, ok = appendReplaced(dst, el, leaf, vals[i]); !ok {
			return nil, false
		}
	}
	return append(dst, ']'), true
}

// appendReplaced appends the object obj, its member key's value (if it has
// one) replaced by value, to dst; old is the value replaced (nil: none).
func appendReplaced(dst, obj []byte, key string, value []byte) (out, old []byte, ok bool) {
	var buf [16]member
	ms, ok := members(obj, buf[:0])
	if !ok {
		return nil, nil, false
	}
	dst = append(dst, '{')
	for i, m := range ms {
		v := m.value
		if string(m.key) == key {
			old, v = m.value, value
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, m.key...)
		dst = append(dst, '"', ':')
		dst = append(dst, v...)
	}
	return append(dst, '}'), old, true
}

// subjectOf is subject over scanned members.
func (r rule) subjectOf(ms []member, actor int64) string {
	for _, s := range r.subjects {
		for _, m := range ms {
			if string(m.key) != s.member {
				continue
			}
			if id, err := strconv.ParseInt(string(m.value), 10, 64); err == nil && id > 0 {
				return s.category + "-" + strconv.FormatInt(id, 10)
			}
		}
	}
	if actor > 0 {
		return "user-" + strconv.FormatInt(actor, 10)
	}
	return ""
}

// appendMember writes "key":value after a comma when out holds one already.
func appendMember(out, key, value []byte) []byte {
	if len(out) > 1 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	return append(out, value...)
}

// appendEnvelope writes the "pii" member's value, as envelope marshals.
func appendEnvelope(out []byte, subject string, sealed []byte) []byte {
	out = append(out, `{"sub":"`...)
	out = append(out, subject...) // "user-7": nothing to escape
	out = append(out, `","ct":"`...)
	n := fastBase64.EncodedLen(len(sealed))
	out = slices.Grow(out, n)[:len(out)+n]
	fastBase64.Encode(out[len(out)-n:], sealed)
	return append(out, `"}`...)
}
