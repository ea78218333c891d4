package personal

import (
	"bytes"
	"encoding/base64"
	"strconv"
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
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
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

// topLevel reports whether every personal field of r is a top-level member.
func (r rule) topLevel() bool {
	for _, f := range r.fields {
		if len(f.path) != 1 || bytes.HasSuffix([]byte(f.path[0]), []byte("[]")) {
			return false
		}
	}
	return true
}

// fieldOf returns r's top-level field named key.
func (r rule) fieldOf(key []byte) (field, bool) {
	for _, f := range r.fields {
		if f.path[0] == string(key) {
			return f, true
		}
	}
	return field{}, false
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
	out = base64.StdEncoding.AppendEncode(out, sealed)
	return append(out, `"}`...)
}
