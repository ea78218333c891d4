package knowledge

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf16"

	"github.com/ledongthuc/pdf"
)

// ToUnicode maps, read as the library's readCmap reads them and decoded as
// its cmap.Decode does, but searched rather than scanned: the library looks
// each character up by going through every code and range of the map.

// cmap is a ToUnicode map, for codes of 1 to 4 bytes.
type cmap struct {
	space  [4][]codeRange // merged and sorted
	chars  [4][]cmapChar  // sorted by code, the library's first definition kept
	ranges [4][]cmapRange // in the library's order
	byLo   [4][]cmapRange // sorted by lo, when there are more than linearRanges
	text   strings.Builder
	arena  string // text once built: chars' UTF-8
}

type codeRange struct{ lo, hi uint32 }

type cmapChar struct {
	code     uint32
	from, to int // its text in arena
}

type cmapRange struct {
	lo, hi uint32
	dst    operand // a UTF-16BE string, or an array of them
}

func codeOf(s string) uint32 {
	var c uint32
	for i := 0; i < len(s); i++ {
		c = c<<8 | uint32(s[i])
	}
	return c
}

// rangeHi is the highest n-byte code at or below hi in the library's string
// comparison (hi may be longer or shorter than n); ok is false when none is.
func rangeHi(hi string, n int) (uint32, bool) {
	if len(hi) >= n {
		return codeOf(hi[:n]), true
	}
	p := codeOf(hi) << (8 * (n - len(hi)))
	if p == 0 {
		return 0, false
	}
	return p - 1, true
}

// parseCMap reads a ToUnicode map as the library's readCmap does, with its
// operands bounded; nil is a map the library would not use either.
func (x *extraction) parseCMap(v pdf.Value) (*cmap, error) {
	rd, err := x.open(v)
	if err != nil {
		return nil, err
	}
	lex := newPDFLexer(rd, x.limits.MaxTextBytes)
	var stk operandStack
	type def struct {
		v    operand
		size int
	}
	defs := map[string]def{} // what "def" defined, pushed when named
	defsHeld := 0
	dicts := 0
	n := -1
	m := &cmap{}
	count := func() error {
		if x.cmapCodes++; x.cmapCodes > maxCMapCodes {
			return &TooLargeError{Detail: fmt.Sprintf("The PDF's fonts map more than %d character codes", maxCMapCodes)}
		}
		return nil
	}
	dict := operand{pdfToken: pdfToken{kind: tokDict}}
	for {
		if stk.held > maxOperands { // operators below push a value each
			return nil, x.tooComplex()
		}
		tok := lex.token()
		if lex.long {
			return nil, x.tooLongString()
		}
		if tok.kind == tokEOF {
			if err := x.lexEnd(); err != nil {
				return nil, err
			}
			break
		}
		if tok.kind != tokKeyword || tok.s == "null" {
			if tok.kind == tokArrayEnd || tok.kind == tokDictEnd || tok.kind == tokProc || tok.kind == tokProcEnd {
				continue
			}
			if err := stk.read(lex, tok); err != nil {
				return nil, x.tooComplex()
			}
			continue
		}
		switch tok.s {
		case "dict":
			stk.pop()
			stk.push(dict, 1)
			continue
		case "currentdict":
			stk.push(dict, 1)
			continue
		case "begin":
			stk.pop()
			dicts++
			continue
		case "end":
			dicts = max(dicts-1, 0)
			continue
		case "def":
			val, size := stk.pop(), stk.popped
			if dicts == 0 {
				continue
			}
			// What is defined stays held: it counts, and past the bound is
			// dropped.
			if key := stk.pop(); key.kind == tokName && defsHeld+size <= maxOperands {
				defs[key.s] = def{val, size}
				defsHeld += size
			}
			continue
		case "pop":
			stk.pop()
			continue
		}
		if d, ok := defs[tok.s]; ok {
			if stk.held+d.size > maxOperands {
				return nil, x.tooComplex()
			}
			stk.push(d.v, d.size)
			continue
		}
		switch tok.s {
		case "findresource":
			stk.pop()
			stk.pop()
			stk.push(dict, 1)
		case "begincmap":
			stk.push(dict, 1)
		case "endcmap":
			stk.pop()
		case "defineresource":
			stk.pop()
			val := stk.pop()
			stk.pop()
			stk.push(val, 1)
		case "begincodespacerange", "beginbfchar", "beginbfrange":
			n = int(min(max(stk.pop().int(), -1), 1<<30))
		case "endcodespacerange":
			if n < 0 {
				return nil, nil
			}
			for range n {
				hi, lo := stk.pop().str(), stk.pop().str()
				if len(lo) == 0 || len(lo) != len(hi) || len(lo) > 4 {
					return nil, nil
				}
				if err := count(); err != nil {
					return nil, err
				}
				m.space[len(lo)-1] = append(m.space[len(lo)-1], codeRange{codeOf(lo), codeOf(hi)})
			}
			n = -1
		case "endbfchar":
			if n < 0 {
				return nil, nil
			}
			for i := 0; i < n && len(stk.vals) > 0; i++ {
				repl, orig := stk.pop().str(), stk.pop().str()
				if len(orig) == 0 || len(orig) > 4 {
					continue
				}
				if err := count(); err != nil {
					return nil, err
				}
				from := m.text.Len()
				_ = eachUTF16(repl, func(r rune) error { m.text.WriteRune(r); return nil })
				m.chars[len(orig)-1] = append(m.chars[len(orig)-1], cmapChar{codeOf(orig), from, m.text.Len()})
			}
		case "endbfrange":
			if n < 0 {
				return nil, nil
			}
			for i := 0; i < n && len(stk.vals) > 0; i++ {
				dst, hi, lo := stk.pop(), stk.pop().str(), stk.pop().str()
				if len(lo) == 0 || len(lo) > 4 {
					continue
				}
				hiN, ok := rangeHi(hi, len(lo))
				if !ok {
					continue
				}
				if err := count(); err != nil {
					return nil, err
				}
				for range dst.arr {
					if err := count(); err != nil {
						return nil, err
					}
				}
				m.ranges[len(lo)-1] = append(m.ranges[len(lo)-1], cmapRange{codeOf(lo), hiN, dst})
			}
		}
	}
	m.build()
	return m, nil
}

// eachUTF16 calls f with each rune of UTF-16BE text, as the library's
// utf16Decode reads it (an odd last byte is dropped: the library panics).
func eachUTF16(s string, f func(rune) error) error {
	for i := 0; i+1 < len(s); i += 2 {
		r := rune(s[i])<<8 | rune(s[i+1])
		if utf16.IsSurrogate(r) && i+3 < len(s) {
			if pair := utf16.DecodeRune(r, rune(s[i+2])<<8|rune(s[i+3])); pair != noRune {
				r = pair
				i += 2
			}
		}
		if utf16.IsSurrogate(r) {
			r = noRune
		}
		if err := f(r); err != nil {
			return err
		}
	}
	return nil
}

func (m *cmap) build() {
	m.arena = m.text.String()
	for n := range 4 {
		sp := m.space[n]
		sort.Slice(sp, func(i, j int) bool { return sp[i].lo < sp[j].lo })
		merged := sp[:0]
		for _, r := range sp {
			if r.lo > r.hi {
				continue
			}
			if k := len(merged) - 1; k >= 0 && r.lo <= merged[k].hi {
				merged[k].hi = max(merged[k].hi, r.hi)
				continue
			}
			merged = append(merged, r)
		}
		m.space[n] = merged

		cs := m.chars[n]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].code < cs[j].code })
		kept := cs[:0]
		for _, c := range cs {
			if k := len(kept) - 1; k >= 0 && kept[k].code == c.code {
				continue
			}
			kept = append(kept, c)
		}
		m.chars[n] = kept

		if rs := m.ranges[n]; len(rs) > linearRanges {
			byLo := append([]cmapRange(nil), rs...)
			sort.SliceStable(byLo, func(i, j int) bool { return byLo[i].lo < byLo[j].lo })
			m.byLo[n] = byLo
		}
	}
}

func (m *cmap) inSpace(n int, code uint32) bool {
	sp := m.space[n]
	i := sort.Search(len(sp), func(i int) bool { return sp[i].hi >= code })
	return i < len(sp) && sp[i].lo <= code
}

func (m *cmap) findRange(n int, code uint32) *cmapRange {
	if rs := m.byLo[n]; rs != nil {
		i := sort.Search(len(rs), func(i int) bool { return rs[i].lo > code }) - 1
		if i >= 0 && code <= rs[i].hi {
			return &rs[i]
		}
		return nil
	}
	for i := range m.ranges[n] {
		if r := &m.ranges[n][i]; r.lo <= code && code <= r.hi {
			return r
		}
	}
	return nil
}

// decode follows the library's cmap.Decode: the shortest code in a
// codespace range, then its bfchar, else its bfrange, else U+FFFD.
func (m *cmap) decode(x *extraction, raw string) error {
	for len(raw) > 0 {
		found := false
		for n := 1; n <= 4 && n <= len(raw); n++ {
			code := codeOf(raw[:n])
			if !m.inSpace(n-1, code) {
				continue
			}
			raw, found = raw[n:], true
			if err := m.show(x, n-1, code); err != nil {
				return err
			}
			break
		}
		if !found {
			if err := x.emitRune(noRune); err != nil {
				return err
			}
			raw = raw[1:]
		}
	}
	return nil
}

func (m *cmap) show(x *extraction, n int, code uint32) error {
	cs := m.chars[n]
	if i := sort.Search(len(cs), func(i int) bool { return cs[i].code >= code }); i < len(cs) && cs[i].code == code {
		return x.emit(m.arena[cs[i].from:cs[i].to])
	}
	r := m.findRange(n, code)
	if r == nil {
		return x.emitRune(noRune)
	}
	step := byte(code) - byte(r.lo) // the library moves the last byte only
	switch r.dst.kind {
	case tokString:
		s := r.dst.s
		if code != r.lo {
			if s == "" {
				return x.emitRune(noRune)
			}
			b := []byte(s)
			b[len(b)-1] += step
			s = string(b)
		}
		return x.emitUTF16(s)
	case tokArray:
		if int(step) < len(r.dst.arr) && r.dst.arr[step].kind == tokString {
			return x.emitUTF16(r.dst.arr[step].s)
		}
	}
	return x.emitRune(noRune)
}
