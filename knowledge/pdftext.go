package knowledge

import (
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// The text of a PDF, read the way the PDF library's Page.GetPlainText reads
// it (BT and T* start lines; Tj, TJ, ' and " show text; a font's encoding or
// ToUnicode map decodes it) but with everything it keeps bounded: the
// library interprets content and CMaps with a stack that grows with every
// operand, and decodes each character by scanning the whole CMap. The
// library still parses the file, finds objects and inflates streams.

// Bounds on one document's text extraction besides ExtractLimits.
const (
	// pageCost is the least of the content budget a page is counted as
	// taking: a page tree can name one small page millions of times, so a
	// document has at most MaxContentBytes/pageCost pages.
	pageCost = 1 << 10
	// maxTreeDepth bounds the nesting of the page tree.
	maxTreeDepth = 64
	// maxOperands bounds the values held for one operator, array elements
	// included (a line's TJ array holds a few hundred).
	maxOperands = 1 << 14
	// maxFonts is how many font names a document's pages may use; the rest
	// are read with no encoding.
	maxFonts = 1 << 10
	// maxDifferences bounds a font encoding's Differences array, which the
	// library scans whole for each character.
	maxDifferences = 1 << 10
	// maxCMapCodes bounds the codes and ranges of a document's ToUnicode
	// maps (a complete CJK font maps some 20 000).
	maxCMapCodes = 1 << 17
	// linearRanges: up to this many ranges of one code length are searched
	// in order, as the library does; more are searched by bisection.
	linearRanges = 64
)

// noRune is what the library shows for a code its CMap does not map.
const noRune = utf8.RuneError

type fontEntry struct {
	v    pdf.Value
	page int // the first page that names it
	dec  *fontDecoder
}

// measurePage counts what reading a page's text will inflate: its content,
// each time a page reads it, and the ToUnicode map of each font name met for
// the first time (a font is parsed once per document, as the library does).
func (x *extraction) measurePage(page int, v pdf.Value) error {
	if err := x.measure(v.Key("Contents")); err != nil {
		return err
	}
	fonts := resources(v).Key("Font")
	for _, name := range fonts.Keys() {
		if _, ok := x.fonts[name]; ok || len(x.fonts) >= maxFonts {
			continue
		}
		f := fonts.Key(name)
		x.fonts[name] = &fontEntry{v: f, page: page}
		if err := x.measure(f.Key("ToUnicode")); err != nil {
			return err
		}
	}
	return nil
}

// resources is a page's resource dictionary, inherited as the library's
// Page.Resources finds it but looking no further up than a page tree may be
// deep: the library would follow a loop of Parents until the deadline.
func resources(v pdf.Value) pdf.Value {
	for range maxTreeDepth + 1 {
		if v.IsNull() {
			break
		}
		if r := v.Key("Resources"); !r.IsNull() {
			return r
		}
		v = v.Key("Parent")
	}
	return pdf.Value{}
}

// measure inflates a stream, or an array of streams, into nothing, counting
// it against the document's content budget.
func (x *extraction) measure(v pdf.Value) error {
	switch v.Kind() {
	case pdf.Array:
		for i := 0; i < v.Len(); i++ {
			if e := v.Index(i); e.Kind() == pdf.Stream {
				if err := x.measure(e); err != nil {
					return err
				}
			}
		}
	case pdf.Stream:
		rd, err := x.open(v)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, io.LimitReader(rd, x.left+1))
		if x.left -= n; x.left < 0 {
			return &TooLargeError{Detail: fmt.Sprintf("The PDF's pages decompress to more than %d bytes", x.limits.MaxContentBytes)}
		}
		if err != nil {
			// A damaged stream is read as far as it goes, here and when its
			// text is read; the deadline ends everything.
			return x.ctx.Err()
		}
	}
	return nil
}

// walkPages calls visit with each page of the page tree, in order.
func (x *extraction) walkPages(root pdf.Value, visit func(page int, v pdf.Value) error) error {
	maxPages := int(x.limits.MaxContentBytes / pageCost)
	type frame struct {
		kids pdf.Value
		next int
	}
	var stack []frame
	pages, nodes := 0, 0
	node := func(v pdf.Value) error {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		// A tree of shared nodes names far more pages than it holds: every
		// node visited is counted, pages or not.
		if nodes++; nodes > 2*maxPages+1 {
			return &TooLargeError{Detail: fmt.Sprintf("The PDF has more than %d pages", maxPages)}
		}
		switch v.Key("Type").Name() {
		case "Pages":
			if len(stack) == maxTreeDepth {
				return fmt.Errorf("unreadable PDF: its page tree is nested more than %d deep", maxTreeDepth)
			}
			stack = append(stack, frame{kids: v.Key("Kids")})
		case "Page":
			if pages++; pages > maxPages {
				return &TooLargeError{Detail: fmt.Sprintf("The PDF has more than %d pages", maxPages)}
			}
			return visit(pages, v)
		}
		return nil
	}
	if err := node(root); err != nil {
		return err
	}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next >= f.kids.Len() {
			stack = stack[:len(stack)-1]
			continue
		}
		kid := f.kids.Index(f.next)
		f.next++
		if err := node(kid); err != nil {
			return err
		}
	}
	return nil
}

// maxFilters bounds a stream's filter chain: the library makes every
// decompressor of the chain (some 40 KB each) before reading.
const maxFilters = 4

// maxColumns bounds a PNG predictor's row, which the library allocates.
const maxColumns = 1 << 20

// open returns a stream's inflated data, read only while the extraction's
// context lasts. It refuses filters that would make the library allocate
// without bound.
func (x *extraction) open(v pdf.Value) (io.Reader, error) {
	filter, params := v.Key("Filter"), v.Key("DecodeParms")
	var err error
	switch filter.Kind() {
	case pdf.Name:
		err = checkPredictor(params)
	case pdf.Array:
		if filter.Len() > maxFilters {
			return nil, fmt.Errorf("unreadable PDF: a stream has %d filters", filter.Len())
		}
		for i := 0; i < filter.Len() && err == nil; i++ {
			err = checkPredictor(params.Index(i))
		}
	}
	if err != nil {
		return nil, err
	}
	return ctxReader{x.ctx, v.Reader()}, nil
}

func checkPredictor(params pdf.Value) error {
	if params.Key("Predictor").IsNull() {
		return nil
	}
	if c := params.Key("Columns").Int64(); c < 0 || c > maxColumns {
		return fmt.Errorf("unreadable PDF: a stream's rows are %d bytes", c)
	}
	return nil
}

// streamsReader reads an array of streams as one, opening each only once
// the one before is read (the library opens them all at once).
type streamsReader struct {
	x   *extraction
	v   pdf.Value
	i   int
	cur io.Reader
}

func (s *streamsReader) Read(p []byte) (int, error) {
	for {
		if s.cur == nil {
			if s.i >= s.v.Len() {
				return 0, io.EOF
			}
			e := s.v.Index(s.i)
			s.i++
			if e.Kind() != pdf.Stream {
				continue
			}
			rd, err := s.x.open(e)
			if err != nil {
				return 0, err
			}
			s.cur = rd
		}
		n, err := s.cur.Read(p)
		if err == io.EOF {
			s.cur = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// operandStack holds an interpreter's operands, counting array elements
// and dictionary entries too.
type operandStack struct {
	vals   []operand
	sizes  []int
	held   int
	popped int // the size of the operand pop returned last
}

// read reads the operand tok begins onto the stack.
func (s *operandStack) read(lex *pdfLexer, tok pdfToken) error {
	o := objectReader{lex: lex, max: maxOperands - s.held}
	v, err := o.object(tok, 0)
	if err != nil {
		return err
	}
	s.push(v, o.count)
	return nil
}

func (s *operandStack) push(v operand, size int) {
	if len(s.vals) == cap(s.vals) {
		// Doubling: append grows large slices by a quarter, and all it
		// leaves behind would add up to five times the stack.
		n := max(16, 2*cap(s.vals))
		s.vals = append(make([]operand, 0, n), s.vals...)
		s.sizes = append(make([]int, 0, n), s.sizes...)
	}
	s.vals = append(s.vals, v)
	s.sizes = append(s.sizes, size)
	s.held += size
}

func (s *operandStack) pop() operand {
	n := len(s.vals)
	if n == 0 {
		s.popped = 0
		return operand{}
	}
	v := s.vals[n-1]
	s.vals[n-1] = operand{}
	s.popped = s.sizes[n-1]
	s.held -= s.popped
	s.vals, s.sizes = s.vals[:n-1], s.sizes[:n-1]
	return v
}

func (s *operandStack) reset() {
	clear(s.vals)
	s.vals, s.sizes, s.held = s.vals[:0], s.sizes[:0], 0
}

func (x *extraction) tooComplex() error {
	return &TooLargeError{Detail: fmt.Sprintf("The PDF's content holds more than %d values for one operator, or nests them more than %d deep", maxOperands, maxNesting)}
}

func (x *extraction) tooLongString() error {
	return &TooLargeError{Detail: fmt.Sprintf("The PDF holds a string, name or comment over %d bytes", x.limits.MaxTextBytes)}
}

func (x *extraction) textTooLarge() error {
	return &TooLargeError{Detail: fmt.Sprintf("The document's text is over %d bytes", x.limits.MaxTextBytes)}
}

// lexEnd is what the end of a lexer's input means: the context's end when
// that cut it short; else the end of the stream (a damaged stream reads as
// far as it goes, and what open refuses was refused when it was measured).
func (x *extraction) lexEnd() error {
	return x.ctx.Err()
}

// extractPage appends a page's text.
func (x *extraction) extractPage(page int, v pdf.Value) error {
	var rd io.Reader
	switch c := v.Key("Contents"); c.Kind() {
	case pdf.Stream:
		var err error
		if rd, err = x.open(c); err != nil {
			return err
		}
	case pdf.Array:
		rd = &streamsReader{x: x, v: c}
	default:
		return nil
	}
	lex := newPDFLexer(rd, x.limits.MaxTextBytes)
	var args operandStack
	dec := nopDecoder
	for {
		tok := lex.token()
		if lex.long {
			return x.tooLongString()
		}
		switch tok.kind {
		case tokEOF:
			return x.lexEnd()
		case tokArrayEnd, tokDictEnd, tokProc, tokProcEnd:
			continue // stray
		case tokKeyword:
			if tok.s != "null" {
				if err := x.op(tok.s, args.vals, &dec, page, lex); err != nil {
					return err
				}
				args.reset()
				continue
			}
		}
		if err := args.read(lex, tok); err != nil {
			return x.tooComplex()
		}
	}
}

// op runs one content operator, of those that show text.
func (x *extraction) op(op string, args []operand, dec **fontDecoder, page int, lex *pdfLexer) error {
	var last operand
	if len(args) > 0 {
		last = args[len(args)-1]
	}
	switch op {
	case "BT":
		return x.emit("\n")
	case "T*":
		return (*dec).decode(x, "\n")
	case "Tf":
		if len(args) > 0 {
			d, err := x.decoder(args[0].name(), page)
			if err != nil {
				return err
			}
			*dec = d
		}
	case "Tj", "'", "\"":
		if last.kind == tokString {
			return (*dec).decode(x, last.s)
		}
	case "TJ":
		for _, e := range last.arr {
			if e.kind == tokString {
				if err := (*dec).decode(x, e.s); err != nil {
					return err
				}
			}
		}
	case "BI":
		skipInlineImage(lex)
	}
	return nil
}

// skipInlineImage passes over an inline image (BI dictionary ID data EI):
// its data is binary, not operators.
func skipInlineImage(lex *pdfLexer) {
	for {
		tok := lex.token()
		if tok.kind == tokEOF {
			return
		}
		if tok.kind == tokKeyword && tok.s == "ID" {
			break
		}
	}
	// One white-space byte follows ID; the data ends at EI between white
	// space (or the end).
	prev := byte(' ')
	for {
		c, ok := lex.next()
		if !ok {
			return
		}
		if c == 'E' && isPDFSpace(prev) {
			if c, ok = lex.next(); !ok {
				return
			}
			if c == 'I' {
				if c, ok = lex.next(); !ok {
					return
				}
				if isPDFSpace(c) || isPDFDelim(c) {
					lex.unread()
					return
				}
			}
		}
		prev = c
	}
}

func (x *extraction) emit(s string) error {
	if x.out.Len()+len(s) > x.limits.MaxTextBytes {
		return x.textTooLarge()
	}
	x.out.WriteString(s)
	return nil
}

func (x *extraction) emitRune(r rune) error {
	n := utf8.RuneLen(r)
	if n < 0 {
		n = utf8.RuneLen(noRune)
	}
	if x.out.Len()+n > x.limits.MaxTextBytes {
		return x.textTooLarge()
	}
	x.out.WriteRune(r)
	return nil
}

// emitUTF16 shows UTF-16BE text.
func (x *extraction) emitUTF16(s string) error {
	return eachUTF16(s, x.emitRune)
}

// A fontDecoder turns a font's codes into text, as the library's
// TextEncoding for that font would.
type fontDecoder struct {
	kind  decoderKind
	table *[256]rune
	cmap  *cmap
}

type decoderKind uint8

const (
	decodeRaw   decoderKind = iota // the bytes as UTF-8 (the library's nopEncoder)
	decodeTable                    // one rune a byte
	decodeUCS2                     // UTF-16BE
	decodeCMap                     // a ToUnicode map
)

var nopDecoder = &fontDecoder{kind: decodeRaw}

func (d *fontDecoder) decode(x *extraction, raw string) error {
	switch d.kind {
	case decodeTable:
		for i := 0; i < len(raw); i++ {
			if err := x.emitRune(d.table[raw[i]]); err != nil {
				return err
			}
		}
	case decodeUCS2:
		return x.emitUTF16(raw)
	case decodeCMap:
		return d.cmap.decode(x, raw)
	default:
		for _, r := range raw { // invalid bytes show as U+FFFD, as the library's do
			if err := x.emitRune(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// decoder is the decoder of the font a page names, parsed on first use.
func (x *extraction) decoder(name string, page int) (*fontDecoder, error) {
	f, ok := x.fonts[name]
	if !ok || f.page > page {
		return nopDecoder, nil
	}
	if f.dec == nil {
		d, err := x.newDecoder(f.v)
		if err != nil {
			return nil, err
		}
		f.dec = d
	}
	return f.dec, nil
}

// newDecoder follows the library's choice of encoding (pdf.Font.Encoder).
func (x *extraction) newDecoder(font pdf.Value) (*fontDecoder, error) {
	enc := font.Key("Encoding")
	switch enc.Kind() {
	case pdf.Name:
		switch enc.Name() {
		case "WinAnsiEncoding", "MacRomanEncoding":
			return x.tableDecoder(enc.Name(), font), nil
		case "Identity-H":
			return x.charmapDecoder(font)
		case "UniGB-UCS2-H":
			return &fontDecoder{kind: decodeUCS2}, nil
		}
	case pdf.Dict:
		if enc.Key("Differences").Len() > maxDifferences {
			return x.tableDecoder("latin1", pdf.Value{}), nil
		}
		return x.tableDecoder("", font), nil
	case pdf.Null:
		return x.charmapDecoder(font)
	}
	return nopDecoder, nil
}

// tableDecoder decodes one byte at a time with the library's own table for
// the font, read by decoding every byte once. shared names a table that is
// the same for every font ("" for a font's own Differences).
func (x *extraction) tableDecoder(shared string, font pdf.Value) *fontDecoder {
	if t, ok := x.tables[shared]; ok && shared != "" {
		return &fontDecoder{kind: decodeTable, table: t}
	}
	t := new([256]rune)
	if shared == "latin1" {
		for i := range t {
			t[i] = rune(i)
		}
	} else {
		var all [256]byte
		for i := range all {
			all[i] = byte(i)
		}
		f := pdf.Font{V: font}
		for i, r := range []rune(f.Encoder().Decode(string(all[:]))) {
			if i < len(t) {
				t[i] = r
			}
		}
	}
	if shared != "" {
		x.tables[shared] = t
	}
	return &fontDecoder{kind: decodeTable, table: t}
}

// charmapDecoder decodes with the font's ToUnicode map, or else the PDF
// document encoding.
func (x *extraction) charmapDecoder(font pdf.Value) (*fontDecoder, error) {
	tu := font.Key("ToUnicode")
	if tu.Kind() != pdf.Stream {
		return x.tableDecoder("pdfdoc", pdf.Value{}), nil // a font with no encoding: the library's PDFDocEncoding
	}
	m, err := x.parseCMap(tu)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nopDecoder, nil
	}
	return &fontDecoder{kind: decodeCMap, cmap: m}, nil
}
