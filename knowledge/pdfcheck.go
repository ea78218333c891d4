package knowledge

import (
	"bytes"
	"compress/zlib"
	"encoding/ascii85"
	"errors"
	"fmt"
	"io"
)

// checkStructure reads what the PDF library reads while opening a file and
// finding its objects — the cross-reference sections, and the object
// streams objects are packed in — and refuses, before the library runs,
// what would make it allocate or loop without bound: a cross-reference
// section naming object 100 000 000 (the library allocates a table entry
// for every number up to it: a 160-byte file takes the process down), field
// widths or rows of gigabytes, an object stream counting 10^12 objects
// (looped over without reading), or one inflating past the content budget
// (it is inflated again each time an object in it is looked up).
//
// It follows the library's reading rather than the PDF standard: where the
// library would fail anyway, it stops checking and lets it.
func (x *extraction) checkStructure(data []byte) error {
	c := structCheck{x: x, data: data, maxObjects: int64(len(data)/8 + 4096), named: map[int64]bool{}}
	start, ok := c.startxref()
	if !ok {
		return nil
	}
	trailer, err := c.sections(start)
	if err != nil || trailer == nil || len(c.streams) == 0 {
		return err
	}
	if trailer["Encrypt"].kind != tokNull {
		// Object streams are encrypted with the rest, and could not be
		// measured.
		return errors.New("unreadable PDF: encrypted PDFs whose objects are compressed are not supported")
	}
	return c.objectStreams()
}

// structCheck is one file's check.
type structCheck struct {
	x          *extraction
	data       []byte
	maxObjects int64 // the highest object number a file of its size may name
	entries    []xrefEntry
	streams    []int64 // object streams named by entries, in order met
	named      map[int64]bool
	ticks      int
}

// xrefEntry is an object's place, as the library's table records it from
// cross-reference streams (the first section to name an object wins).
type xrefEntry struct {
	kind uint8 // 0 unset, entryFree, entryFile or entryStream
	gen  uint16
	off  int64 // entryFile: its offset; entryStream: its object stream
}

const (
	entryFree uint8 = iota + 1
	entryFile
	entryStream
)

// structure dictionaries are bounded by the file; the bound only guards
// against nesting and this tokenizer's own keeping.
const maxStructValues = 1 << 20

// objStmToken bounds a string, name or comment in an object stream: an
// object looked up at an offset inside one is read by the library as
// whatever its bytes say, so what one holds is bounded by what it is.
const objStmToken = 64 << 10

// maxObjectValues bounds the values of one object in an object stream (the
// library holds an object whole each time it is looked up).
const maxObjectValues = 1 << 16

func (c *structCheck) unreadable(format string, args ...any) error {
	return fmt.Errorf("unreadable PDF: "+format, args...)
}

// tick checks the context every few thousand tokens: the check reads
// nothing through the library, so nothing else would stop it.
func (c *structCheck) tick() error {
	if c.ticks++; c.ticks%4096 == 0 {
		return c.x.ctx.Err()
	}
	return nil
}

func (c *structCheck) lexAt(off int64, max int) *pdfLexer {
	l := newPDFLexer(bytes.NewReader(c.data[off:]), max)
	l.base = off
	return l
}

// startxref finds the last cross-reference section as the library does.
func (c *structCheck) startxref() (int64, bool) {
	d := c.data
	const endChunk = 100
	if len(d) < endChunk || !bytes.HasPrefix(d, []byte("%PDF-1.")) || d[7] < '0' || d[7] > '7' || d[8] != '\r' && d[8] != '\n' {
		return 0, false
	}
	tail := bytes.TrimRight(d[len(d)-endChunk:], "\r\n\t ")
	if !bytes.HasSuffix(tail, []byte("%%EOF")) {
		return 0, false
	}
	i := findLastLine(tail, "startxref")
	if i < 0 {
		return 0, false
	}
	lex := c.lexAt(int64(len(d)-endChunk+i), maxStructValues)
	if t := lex.token(); t.kind != tokKeyword || t.s != "startxref" {
		return 0, false
	}
	t := lex.token()
	return t.i, t.kind == tokNumber && t.isInt
}

// findLastLine is the library's: the last s alone on its line.
func findLastLine(buf []byte, s string) int {
	bs := []byte(s)
	end := len(buf)
	for {
		i := bytes.LastIndex(buf[:end], bs)
		if i <= 0 || i+len(bs) >= len(buf) {
			return -1
		}
		if (buf[i-1] == '\n' || buf[i-1] == '\r') && (buf[i+len(bs)] == '\n' || buf[i+len(bs)] == '\r') {
			return i
		}
		end = i
	}
}

func isInt(t pdfToken) bool { return t.kind == tokNumber && t.isInt }

// sections checks the chain of cross-reference sections from the one at
// off, and returns the first's trailer (nil where the library fails).
func (c *structCheck) sections(off int64) (map[string]operand, error) {
	seen := map[int64]bool{}
	var trailer map[string]operand
	stream := false
	size := int64(-1)
	for first := true; ; first = false {
		if off < 0 || off >= int64(len(c.data)) {
			return nil, nil
		}
		if seen[off] {
			// The library would read them round and round.
			return nil, c.unreadable("its cross-reference sections loop")
		}
		seen[off] = true
		lex := c.lexAt(off, maxStructValues)
		if first {
			t := lex.token()
			stream = isInt(t)
			lex.pushBack(t)
		}
		var (
			dict map[string]operand
			err  error
		)
		if stream {
			dict, err = c.streamSection(lex, &size, first)
		} else {
			dict, err = c.tableSection(lex)
		}
		if err != nil || dict == nil {
			return nil, err
		}
		if first {
			trailer = dict
		}
		prev, ok := dict["Prev"]
		if !ok || prev.kind == tokNull {
			return trailer, nil
		}
		if !isInt(prev.pdfToken) {
			return nil, nil
		}
		off = prev.i
	}
}

func (c *structCheck) tooManyObjects(n int64) error {
	return c.unreadable("it names object %d, more than a file of %d bytes holds", n, len(c.data))
}

// structObject reads a dictionary, or any value, of the file's structure.
func (c *structCheck) structObject(lex *pdfLexer, t pdfToken) (operand, error) {
	o := objectReader{lex: lex, keepDict: true, refs: true, max: maxStructValues}
	v, err := o.object(t, 0)
	if err != nil {
		return v, c.unreadable("an object is nested too deep")
	}
	return v, nil
}

// tableSection checks a classic cross-reference table: each entry makes the
// library's table reach its number.
func (c *structCheck) tableSection(lex *pdfLexer) (map[string]operand, error) {
	if t := lex.token(); t.kind != tokKeyword || t.s != "xref" {
		return nil, nil
	}
	for {
		if err := c.tick(); err != nil {
			return nil, err
		}
		start := lex.token()
		if start.kind == tokKeyword && start.s == "trailer" {
			break
		}
		n := lex.token()
		if !isInt(start) || !isInt(n) {
			return nil, nil
		}
		for i := int64(0); i < n.i; i++ {
			if err := c.tick(); err != nil {
				return nil, err
			}
			off, gen, alloc := lex.token(), lex.token(), lex.token()
			if !isInt(off) || !isInt(gen) || alloc.kind != tokKeyword || alloc.s != "f" && alloc.s != "n" {
				return nil, nil
			}
			if x := start.i + i; x > c.maxObjects {
				return nil, c.tooManyObjects(x)
			}
		}
	}
	t := lex.token()
	if t.kind != tokDict {
		return nil, nil
	}
	v, err := c.structObject(lex, t)
	return v.dict, err
}

// streamObject reads "id gen obj << … >> stream" and returns the
// dictionary and where the data starts; ok is false where the library
// reads something else.
func (c *structCheck) streamObject(lex *pdfLexer) (id int64, gen int64, dict map[string]operand, data int64, ok bool, err error) {
	idt, gent, obj := lex.token(), lex.token(), lex.token()
	if !isInt(idt) || !isInt(gent) || obj.kind != tokKeyword || obj.s != "obj" {
		return 0, 0, nil, 0, false, nil
	}
	t := lex.token()
	if t.kind != tokDict {
		return 0, 0, nil, 0, false, nil
	}
	v, err := c.structObject(lex, t)
	if err != nil {
		return 0, 0, nil, 0, false, err
	}
	if s := lex.token(); s.kind != tokKeyword || s.s != "stream" {
		return 0, 0, nil, 0, false, nil
	}
	switch b, _ := lex.next(); b {
	case '\r':
		if b, ok := lex.next(); ok && b != '\n' {
			lex.unread()
		}
	case '\n':
	default:
		return 0, 0, nil, 0, false, nil
	}
	return idt.i, gent.i, v.dict, lex.offset(), true, nil
}

// streamSection checks a cross-reference stream, and records its entries.
func (c *structCheck) streamSection(lex *pdfLexer, size *int64, first bool) (map[string]operand, error) {
	_, _, hdr, dataAt, ok, err := c.streamObject(lex)
	if !ok || err != nil {
		return nil, err
	}
	if hdr["Type"].name() != "XRef" {
		return nil, nil
	}
	sz, ok := hdr["Size"]
	if first {
		if !ok || !isInt(sz.pdfToken) || sz.i < 0 {
			return nil, nil
		}
		if sz.i > c.maxObjects {
			return nil, c.tooManyObjects(sz.i) // the library allocates Size entries
		}
		*size = sz.i
	} else if sz.int() > *size {
		return nil, nil
	}
	n := sz.int()
	index := []operand{{pdfToken: pdfToken{kind: tokNumber, isInt: true}}, {pdfToken: pdfToken{kind: tokNumber, isInt: true, i: n}}}
	if ix, ok := hdr["Index"]; ok && ix.kind == tokArray {
		index = ix.arr
	}
	if len(index)%2 != 0 {
		return nil, nil
	}
	var total int64
	for i := 0; i < len(index); i += 2 {
		start, n := index[i], index[i+1]
		if !isInt(start.pdfToken) || !isInt(n.pdfToken) || start.i < 0 {
			return nil, nil
		}
		// The library reads n entries, allocating up to start+n.
		if total += max(n.i, 0); start.i+n.i-1 > c.maxObjects || total > c.maxObjects {
			return nil, c.tooManyObjects(max(start.i+n.i-1, total))
		}
	}
	w := hdr["W"]
	if w.kind != tokArray || len(w.arr) < 3 {
		return nil, nil
	}
	var widths []int
	for _, e := range w.arr {
		if !isInt(e.pdfToken) {
			return nil, nil
		}
		if e.i < 0 || e.i > 8 {
			return nil, c.unreadable("a cross-reference stream has fields of %d bytes", e.i)
		}
		widths = append(widths, int(e.i))
	}
	// At this point the library resolves nothing: an indirect Length,
	// Filter or DecodeParms reads as null.
	direct := func(v operand) (operand, error) {
		if v.kind == tokRef {
			return operand{}, nil
		}
		return v, nil
	}
	length, _ := direct(hdr["Length"])
	filter, _ := direct(hdr["Filter"])
	params, _ := direct(hdr["DecodeParms"])
	rd, ok, err := c.decode(filter, params, dataAt, length.int(), direct)
	if !ok || err != nil {
		return nil, err
	}
	wtotal := 0
	for _, w := range widths {
		wtotal += w
	}
	buf := make([]byte, wtotal)
	field := func(b []byte) int64 {
		var v int64
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		return v
	}
	for i := 0; i < len(index); i += 2 {
		start, n := index[i].i, index[i+1].i
		for j := int64(0); j < n; j++ {
			if err := c.tick(); err != nil {
				return nil, err
			}
			if _, err := io.ReadFull(rd, buf); err != nil {
				return nil, c.x.ctx.Err() // the library fails, unless the deadline cut it short
			}
			typ := field(buf[:widths[0]])
			if widths[0] == 0 {
				typ = 1
			}
			f2 := field(buf[widths[0] : widths[0]+widths[1]])
			f3 := field(buf[widths[0]+widths[1] : widths[0]+widths[1]+widths[2]])
			c.record(start+j, typ, f2, f3)
		}
	}
	return hdr, nil
}

// record keeps an entry as the library's table would.
func (c *structCheck) record(x, typ, f2, f3 int64) {
	if x >= int64(len(c.entries)) {
		c.entries = append(c.entries, make([]xrefEntry, x-int64(len(c.entries))+1)...)
	}
	if c.entries[x].kind != 0 {
		return
	}
	switch typ {
	case 0:
		c.entries[x] = xrefEntry{kind: entryFree}
	case 1:
		c.entries[x] = xrefEntry{kind: entryFile, gen: uint16(f3), off: f2}
	case 2:
		s := int64(uint32(f2))
		c.entries[x] = xrefEntry{kind: entryStream, off: s}
		if !c.named[s] {
			c.named[s] = true
			c.streams = append(c.streams, s)
		}
	}
}

// decode returns a stream's data as the library's Value.Reader inflates
// it; ok is false where the library panics instead.
// resolve reads an indirect value as the library would at that point.
func (c *structCheck) decode(filter, params operand, at, length int64, resolve func(operand) (operand, error)) (io.Reader, bool, error) {
	if length <= 0 {
		return bytes.NewReader(nil), true, nil
	}
	end := min(at+length, int64(len(c.data)))
	var rd io.Reader = bytes.NewReader(c.data[min(at, end):end])
	var names []operand
	var ps []operand
	switch filter.kind {
	case tokNull:
	case tokName:
		names, ps = []operand{filter}, []operand{params}
	case tokArray:
		if len(filter.arr) > maxFilters {
			return nil, false, c.unreadable("a stream has %d filters", len(filter.arr))
		}
		names = filter.arr
		for i := range names {
			var p operand
			if params.kind == tokArray && i < len(params.arr) {
				p = params.arr[i]
			}
			ps = append(ps, p)
		}
	default:
		return nil, false, nil
	}
	for i, f := range names {
		f, err := resolve(f)
		if err != nil {
			return nil, false, err
		}
		p, err := resolve(ps[i])
		if err != nil {
			return nil, false, err
		}
		switch f.name() {
		case "FlateDecode":
			zr, err := zlib.NewReader(rd)
			if err != nil {
				return nil, false, nil
			}
			rd = zr
			pred, err := resolve(p.dict["Predictor"])
			if err != nil {
				return nil, false, err
			}
			if pred.kind == tokNull {
				continue
			}
			if pred.int() != 12 {
				return nil, false, nil
			}
			cols, err := resolve(p.dict["Columns"])
			if err != nil {
				return nil, false, err
			}
			if cols.int() < 0 || cols.int() > maxColumns {
				return nil, false, c.unreadable("a stream's rows are %d bytes", cols.int())
			}
			rd = &pngUp{r: rd, row: make([]byte, 1+cols.int()), hist: make([]byte, 1+cols.int())}
		case "ASCII85Decode":
			if p.kind == tokDict {
				return nil, false, nil
			}
			rd = ascii85.NewDecoder(&ascii85Only{r: rd})
		default:
			return nil, false, nil
		}
	}
	return ctxReader{c.x.ctx, rd}, true, nil
}

// pngUp undoes the PNG "Up" predictor, as the library does.
type pngUp struct {
	r         io.Reader
	row, hist []byte
	pend      []byte
}

func (p *pngUp) Read(b []byte) (int, error) {
	if len(p.pend) == 0 {
		if _, err := io.ReadFull(p.r, p.row); err != nil {
			return 0, err
		}
		if p.row[0] != 2 {
			return 0, errors.New("malformed PNG-Up encoding")
		}
		for i, v := range p.row {
			p.hist[i] += v
		}
		p.pend = p.hist[1:]
	}
	n := copy(b, p.pend)
	p.pend = p.pend[n:]
	return n, nil
}

// ascii85Only keeps the ASCII85 digits of a stream up to its "~", as the
// library's reader does.
type ascii85Only struct {
	r   io.Reader
	eod bool
}

func (a *ascii85Only) Read(p []byte) (int, error) {
	if a.eod {
		return 0, io.EOF
	}
	n, err := a.r.Read(p)
	out := 0
	for _, b := range p[:n] {
		if b == '~' {
			a.eod = true
			return out, io.EOF
		}
		if b >= '!' && b <= 'u' || b == 'z' {
			p[out] = b
			out++
		}
	}
	return out, err
}

// resolve is an object of the file, where the library can read it from the
// file itself; ok is false for one packed in an object stream.
func (c *structCheck) resolve(v operand) (operand, bool, error) {
	if v.kind != tokRef {
		return v, true, nil
	}
	if v.i < 0 || v.i >= int64(len(c.entries)) {
		return operand{}, true, nil
	}
	switch e := c.entries[v.i]; e.kind {
	case entryFile:
		if e.off <= 0 || e.off >= int64(len(c.data)) {
			return operand{}, true, nil
		}
		lex := c.lexAt(e.off, maxStructValues)
		id, gen, obj := lex.token(), lex.token(), lex.token()
		if !isInt(id) || !isInt(gen) || obj.kind != tokKeyword || obj.s != "obj" || id.i != v.i {
			return operand{}, true, nil
		}
		o, err := c.structObject(lex, lex.token())
		return o, true, err
	case entryStream:
		return operand{}, false, nil
	}
	return operand{}, true, nil
}

// objectStreams checks each object stream an entry names, and those they
// extend: each is inflated into nothing against the content budget, and
// its objects' values are counted.
func (c *structCheck) objectStreams() error {
	seen := map[int64]bool{}
	for i := 0; i < len(c.streams); i++ {
		s := c.streams[i]
		if seen[s] {
			continue
		}
		seen[s] = true
		if err := c.x.ctx.Err(); err != nil {
			return err
		}
		// Each costs the library a decompressor however little it holds:
		// their number is bounded as pages are.
		if c.x.left -= pageCost; c.x.left < 0 {
			return c.overBudget()
		}
		if s >= int64(len(c.entries)) {
			continue
		}
		e := c.entries[s]
		if e.kind == entryStream {
			return c.unreadable("an object stream is packed in an object stream")
		}
		if e.kind != entryFile || e.gen != 0 || e.off <= 0 || e.off >= int64(len(c.data)) {
			continue // the library finds no stream there, and fails
		}
		ext, err := c.objectStream(s, e.off)
		if err != nil {
			return err
		}
		if ext >= 0 {
			c.streams = append(c.streams, ext)
		}
	}
	return nil
}

// objectStream checks one object stream and returns the one it extends
// (or -1).
func (c *structCheck) objectStream(s, off int64) (int64, error) {
	id, _, hdr, dataAt, ok, err := c.streamObject(c.lexAt(off, maxStructValues))
	if !ok || err != nil || id != s {
		return -1, err
	}
	get := func(key string) (operand, error) {
		v, ok, err := c.resolve(hdr[key])
		if err == nil && !ok {
			err = c.unreadable("an object stream's %s is packed in an object stream", key)
		}
		return v, err
	}
	typ, err := get("Type")
	if err != nil || typ.name() != "ObjStm" {
		return -1, err
	}
	n, err := get("N")
	if err != nil {
		return -1, err
	}
	if n.int() > c.maxObjects {
		// The library loops over them, reading nothing once past the end.
		return -1, c.unreadable("an object stream counts %d objects, more than a file of %d bytes holds", n.int(), len(c.data))
	}
	length, err := get("Length")
	if err != nil {
		return -1, err
	}
	filter, err := get("Filter")
	if err != nil {
		return -1, err
	}
	params, err := get("DecodeParms")
	if err != nil {
		return -1, err
	}
	resolve := func(v operand) (operand, error) {
		v, ok, err := c.resolve(v)
		if err == nil && !ok {
			err = c.unreadable("an object stream's filter is packed in an object stream")
		}
		return v, err
	}
	rd, ok, err := c.decode(filter, params, dataAt, length.int(), resolve)
	if !ok || err != nil {
		return -1, err
	}
	if err := c.objects(rd); err != nil {
		return -1, err
	}
	if ext, ok := hdr["Extends"]; ok && ext.kind == tokRef {
		return ext.i, nil
	}
	return -1, nil
}

func (c *structCheck) overBudget() error {
	return &TooLargeError{Detail: fmt.Sprintf("The PDF decompresses to more than %d bytes", c.x.limits.MaxContentBytes)}
}

// budgetReader counts what it reads against the extraction's content
// budget.
type budgetReader struct {
	x *extraction
	r io.Reader
}

var errOverBudget = errors.New("over the content budget")

func (b budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.x.left -= int64(n); b.x.left < 0 {
		return n, errOverBudget
	}
	return n, err
}

// objects reads an object stream's inflated data, counting the values of
// each object in it.
func (c *structCheck) objects(rd io.Reader) error {
	lex := newPDFLexer(budgetReader{c.x, rd}, objStmToken)
	depth, values := 0, 0
	for {
		if err := c.tick(); err != nil {
			return err
		}
		t := lex.token()
		if lex.long {
			return c.unreadable("an object stream holds a string, name or comment over %d bytes", objStmToken)
		}
		switch t.kind {
		case tokEOF:
			if c.x.left < 0 {
				return c.overBudget()
			}
			return c.x.ctx.Err()
		case tokArray, tokDict:
			if depth++; depth > maxNesting {
				return c.unreadable("an object is nested too deep")
			}
		case tokArrayEnd, tokDictEnd:
			depth = max(depth-1, 0)
		}
		if depth == 0 {
			values = 0
		} else if values++; values > maxObjectValues {
			return c.unreadable("an object holds more than %d values", maxObjectValues)
		}
	}
}
