package knowledge

import (
	"errors"
	"io"
	"strconv"
)

// A PDF tokenizer of our own, for content streams, CMaps and the file's
// structure. The PDF library's (pdf.Interpret) keeps every operand until an
// operator takes it: a few kilobytes inflating to a stream of bare numbers
// grow its stack by hundreds of megabytes. This one returns one token at a
// time and its callers bound what they keep.

type tokKind uint8

const (
	tokNull tokKind = iota // as an operand: null, or nothing at all
	tokEOF
	tokNumber
	tokBool
	tokString
	tokName
	tokKeyword
	tokArray    // "[", or as an operand an array
	tokArrayEnd // "]"
	tokDict     // "<<", or as an operand a dictionary
	tokDictEnd  // ">>"
	tokProc     // "{"
	tokProcEnd  // "}"
	tokRef      // as an operand: "id gen R" (i is id)
)

type pdfToken struct {
	kind  tokKind
	isInt bool   // a number that is an integer (i); no one reads reals
	s     string // string bytes, name (without the slash) or keyword
	i     int64
}

// operand is a value read whole: arrays hold their elements, dictionaries
// their entries when asked to keep them.
type operand struct {
	pdfToken
	arr  []operand
	dict map[string]operand
}

// int is the operand as an integer, the way the PDF library reads one:
// anything but an integer is 0.
func (o operand) int() int64 {
	if o.kind == tokNumber && o.isInt {
		return o.i
	}
	return 0
}

func (o operand) str() string {
	if o.kind == tokString {
		return o.s
	}
	return ""
}

func (o operand) name() string {
	if o.kind == tokName {
		return o.s
	}
	return ""
}

// errTooComplex is an object nested or filled past the reader's bounds.
var errTooComplex = errors.New("too complex")

// maxNesting bounds arrays and dictionaries within one another (the PDF
// library stops at 1 000).
const maxNesting = 100

type pdfLexer struct {
	r    io.Reader
	buf  []byte
	pos  int
	end  int
	eof  bool
	err  error // the first read error other than io.EOF
	tmp  []byte
	max  int   // the longest string, name or keyword kept
	long bool  // a token was cut at max
	base int64 // offset of buf[0] in the input
	back []pdfToken
}

func newPDFLexer(r io.Reader, max int) *pdfLexer {
	return &pdfLexer{r: r, buf: make([]byte, 4096), max: max}
}

// offset is the position of the next byte in the input.
func (l *pdfLexer) offset() int64 { return l.base + int64(l.pos) }

func (l *pdfLexer) next() (byte, bool) {
	if l.pos == l.end && !l.fill() {
		return 0, false
	}
	c := l.buf[l.pos]
	l.pos++
	return c, true
}

// unread steps back over the byte next just returned.
func (l *pdfLexer) unread() { l.pos-- }

func (l *pdfLexer) fill() bool {
	for !l.eof {
		l.base += int64(l.end)
		n, err := l.r.Read(l.buf)
		l.pos, l.end = 0, n
		if err != nil {
			l.eof = true
			if err != io.EOF {
				l.err = err
			}
		}
		if n > 0 {
			return true
		}
	}
	return false
}

func (l *pdfLexer) add(b []byte, c byte) []byte {
	if len(b) >= l.max {
		l.long = true
		return b
	}
	return append(b, c)
}

func isPDFSpace(c byte) bool {
	switch c {
	case 0, '\t', '\n', '\f', '\r', ' ':
		return true
	}
	return false
}

func isPDFDelim(c byte) bool {
	switch c {
	case '<', '>', '(', ')', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

func unhexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// pushBack returns a token to be read again (at most two are ever held).
func (l *pdfLexer) pushBack(t pdfToken) { l.back = append(l.back, t) }

func (l *pdfLexer) token() pdfToken {
	if n := len(l.back); n > 0 {
		t := l.back[n-1]
		l.back = l.back[:n-1]
		return t
	}
	for {
		c, ok := l.next()
		if !ok {
			return pdfToken{kind: tokEOF}
		}
		if isPDFSpace(c) {
			continue
		}
		if c == '%' {
			// A comment is kept by no one, but bounded all the same: an
			// object stream's objects may be looked up inside one.
			for n := 0; ok && c != '\n' && c != '\r'; n++ {
				if n > l.max {
					l.long = true
				}
				c, ok = l.next()
			}
			continue
		}
		switch c {
		case '(':
			return pdfToken{kind: tokString, s: l.literal()}
		case '<':
			if c, ok := l.next(); ok {
				if c == '<' {
					return pdfToken{kind: tokDict}
				}
				l.unread()
			}
			return pdfToken{kind: tokString, s: l.hex()}
		case '>':
			if c, ok := l.next(); ok {
				if c == '>' {
					return pdfToken{kind: tokDictEnd}
				}
				l.unread()
			}
			return pdfToken{kind: tokKeyword, s: ">"}
		case '[':
			return pdfToken{kind: tokArray}
		case ']':
			return pdfToken{kind: tokArrayEnd}
		case '{':
			return pdfToken{kind: tokProc}
		case '}':
			return pdfToken{kind: tokProcEnd}
		case '/':
			return pdfToken{kind: tokName, s: l.name()}
		case ')':
			return pdfToken{kind: tokKeyword, s: ")"}
		}
		l.unread()
		return l.keyword()
	}
}

func (l *pdfLexer) literal() string {
	b := l.tmp[:0]
	depth := 1
	for {
		c, ok := l.next()
		if !ok {
			break
		}
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				l.tmp = b
				return string(b)
			}
		case '\\':
			if c, ok = l.next(); !ok {
				l.tmp = b
				return string(b)
			}
			switch c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case '\r': // a line continuation
				if c, ok := l.next(); ok && c != '\n' {
					l.unread()
				}
				continue
			case '\n':
				continue
			case '0', '1', '2', '3', '4', '5', '6', '7':
				x := int(c - '0')
				for range 2 {
					d, ok := l.next()
					if !ok {
						break
					}
					if d < '0' || d > '7' {
						l.unread()
						break
					}
					x = x*8 + int(d-'0')
				}
				c = byte(x)
			}
		}
		b = l.add(b, c)
	}
	l.tmp = b
	return string(b)
}

func (l *pdfLexer) hex() string {
	b := l.tmp[:0]
	hi := -1
	for {
		c, ok := l.next()
		if !ok || c == '>' {
			break
		}
		d := unhexDigit(c)
		if d < 0 {
			continue
		}
		if hi < 0 {
			hi = d
			continue
		}
		b = l.add(b, byte(hi<<4|d))
		hi = -1
	}
	if hi >= 0 { // an odd digit count: the last is followed by 0
		b = l.add(b, byte(hi<<4))
	}
	l.tmp = b
	return string(b)
}

func (l *pdfLexer) name() string { return l.regular(true) }

// regular reads regular characters up to a delimiter or white space; in a
// name (escapes), #xx is the byte xx.
func (l *pdfLexer) regular(escapes bool) string {
	b := l.tmp[:0]
	for {
		c, ok := l.next()
		if !ok {
			break
		}
		if isPDFDelim(c) || isPDFSpace(c) {
			l.unread()
			break
		}
		if escapes && c == '#' {
			if d1, ok := l.next(); ok {
				if h1 := unhexDigit(d1); h1 >= 0 {
					if d2, ok := l.next(); ok {
						if h2 := unhexDigit(d2); h2 >= 0 {
							b = l.add(b, byte(h1<<4|h2))
							continue
						}
						l.unread()
					}
				} else {
					l.unread()
				}
			}
		}
		b = l.add(b, c)
	}
	l.tmp = b
	return string(b)
}

func (l *pdfLexer) keyword() pdfToken {
	s := l.regular(false)
	switch {
	case s == "true" || s == "false":
		return pdfToken{kind: tokBool, s: s}
	case isPDFInteger(s):
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return pdfToken{kind: tokNumber, i: i, isInt: true}
		}
		return pdfToken{kind: tokNumber}
	case isPDFReal(s):
		return pdfToken{kind: tokNumber}
	}
	return pdfToken{kind: tokKeyword, s: s}
}

func isPDFInteger(s string) bool {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isPDFReal(s string) bool {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	dots, digits := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '.':
			dots++
		case '0' <= s[i] && s[i] <= '9':
			digits++
		default:
			return false
		}
	}
	return dots == 1 && digits > 0
}

// objectReader reads whole values, counting every value it keeps against
// max: an operand's arrays and dictionaries are held until its operator.
type objectReader struct {
	lex      *pdfLexer
	keepDict bool // keep dictionary entries (else they are read and dropped)
	refs     bool // read "id gen R" as a reference
	count    int
	max      int
}

// object reads the value tok begins.
func (o *objectReader) object(tok pdfToken, depth int) (operand, error) {
	if o.count++; o.count > o.max {
		return operand{}, errTooComplex
	}
	switch tok.kind {
	case tokArray:
		return o.array(depth + 1)
	case tokDict:
		return o.dictionary(depth + 1)
	case tokKeyword:
		if tok.s == "null" {
			return operand{pdfToken: pdfToken{kind: tokNull}}, nil
		}
	case tokNumber:
		if o.refs && tok.isInt {
			return o.maybeRef(tok), nil
		}
	}
	return operand{pdfToken: tok}, nil
}

// maybeRef reads "id gen R" as a reference, else gives back what follows id.
func (o *objectReader) maybeRef(id pdfToken) operand {
	gen := o.lex.token()
	if gen.kind == tokNumber && gen.isInt {
		r := o.lex.token()
		if r.kind == tokKeyword && r.s == "R" {
			return operand{pdfToken: pdfToken{kind: tokRef, i: id.i}}
		}
		o.lex.pushBack(r)
	}
	o.lex.pushBack(gen)
	return operand{pdfToken: id}
}

func (o *objectReader) array(depth int) (operand, error) {
	if depth > maxNesting {
		return operand{}, errTooComplex
	}
	v := operand{pdfToken: pdfToken{kind: tokArray}}
	for {
		tok := o.lex.token()
		switch tok.kind {
		case tokEOF, tokArrayEnd:
			return v, nil
		case tokDictEnd, tokProc, tokProcEnd:
			continue
		case tokKeyword:
			if tok.s != "null" {
				continue // the PDF library drops such an array; keeping the rest is kinder
			}
		}
		e, err := o.object(tok, depth)
		if err != nil {
			return v, err
		}
		if len(v.arr) == cap(v.arr) { // doubling, as operandStack.push does
			v.arr = append(make([]operand, 0, max(4, 2*cap(v.arr))), v.arr...)
		}
		v.arr = append(v.arr, e)
	}
}

func (o *objectReader) dictionary(depth int) (operand, error) {
	if depth > maxNesting {
		return operand{}, errTooComplex
	}
	v := operand{pdfToken: pdfToken{kind: tokDict}}
	if o.keepDict {
		v.dict = map[string]operand{}
	}
	for {
		tok := o.lex.token()
		switch tok.kind {
		case tokEOF, tokDictEnd:
			return v, nil
		case tokName:
		default:
			continue // not a key
		}
		vt := o.lex.token()
		if vt.kind == tokEOF || vt.kind == tokDictEnd {
			return v, nil
		}
		e, err := o.object(vt, depth)
		if err != nil {
			return v, err
		}
		if o.keepDict {
			v.dict[tok.s] = e
		}
	}
}
