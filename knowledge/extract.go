package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledongthuc/pdf"

	"lectern/admit"
)

// DefaultMaxTextBytes is the default cap on a document's extracted text:
// 2 MiB (the text is a blob, not part of an event, so EventStoreDB's 1 MiB
// append limit does not bound it). The content budget, and the tests,
// follow it.
const DefaultMaxTextBytes = 2 << 20

// ExtractLimits bound what extracting one document may cost: a small PDF
// can inflate to gigabytes (a decompression bomb).
type ExtractLimits struct {
	// MaxTextBytes is the most text a document may hold (default
	// DefaultMaxTextBytes).
	MaxTextBytes int
	// MaxContentBytes is the most a PDF may decompress to (default 4 ×
	// MaxTextBytes: content is text and the operators that place it): its
	// pages' content, counted each time a page reads it, its fonts'
	// ToUnicode maps and its object streams, all measured, streaming,
	// before any text is extracted. It also bounds the pages: each counts as
	// at least 1 KiB.
	MaxContentBytes int64
	// MaxChunks is the most chunks a document is cut into (default 5 000).
	MaxChunks int
	// Timeout bounds one extraction (default 10 s); the work stops when it
	// passes.
	Timeout time.Duration
}

// DefaultExtractLimits are the limits when none are set.
var DefaultExtractLimits = ExtractLimits{MaxTextBytes: DefaultMaxTextBytes, MaxChunks: 5000, Timeout: 10 * time.Second}

// WithDefaults fills the unset limits.
func (l ExtractLimits) WithDefaults() ExtractLimits {
	d := DefaultExtractLimits
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = d.MaxTextBytes
	}
	if l.MaxContentBytes <= 0 {
		l.MaxContentBytes = 4 * int64(l.MaxTextBytes)
	}
	if l.MaxChunks <= 0 {
		l.MaxChunks = d.MaxChunks
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	return l
}

// ErrTooLarge is a document over its ExtractLimits.
var ErrTooLarge = errors.New("document over the extraction limits")

// TooLargeError says which limit a document passed.
type TooLargeError struct{ Detail string }

func (e *TooLargeError) Error() string { return e.Detail }

// Unwrap makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// CheckText refuses a text over the limits: its size, or the chunks it
// would be cut into.
func (l ExtractLimits) CheckText(text string) error {
	l = l.WithDefaults()
	if len(text) > l.MaxTextBytes {
		return &TooLargeError{Detail: fmt.Sprintf("The document's text is over %d bytes", l.MaxTextBytes)}
	}
	if n := ChunkCount(len(text), ChunkSize, ChunkOverlap); n > l.MaxChunks {
		return &TooLargeError{Detail: fmt.Sprintf("The document would make %d chunks, over the %d allowed", n, l.MaxChunks)}
	}
	return nil
}

// ChunkCount bounds from above how many chunks Chunk cuts n bytes into.
func ChunkCount(n, size, overlap int) int {
	if n <= size {
		return 1
	}
	step := size - overlap
	return (n-overlap+step-1)/step + 1
}

// Extracting a PDF takes a core for up to its timeout. The limits per user
// bound how often one user has a document read, not how many are read at
// once across users: extractSlots does, half the cores and at least one, so
// that extraction leaves cores to the rest of the service. An extraction
// waits for a slot up to MaxExtractWait (or its context's end) and then
// fails with ErrBusy.
var extractSlots = admit.New(runtime.GOMAXPROCS(0)/2, MaxExtractWait, ErrBusy)

// MaxExtractWait bounds an extraction's wait for a slot, and for its
// reader's turn: longer than an extraction may take (the default timeout),
// so that a document behind one that takes all of it still gets its turn.
const MaxExtractWait = 15 * time.Second

// ErrBusy is returned when no extraction slot came free in time.
var ErrBusy = errors.New("knowledge: too many documents being read at once")

// BusyExtractionInTests takes every extraction slot until t ends and
// shortens the wait for one to wait: PDFText then fails with ErrBusy after
// it (admit.Slots.HoldAllInTests).
func BusyExtractionInTests(t testing.TB, wait time.Duration) { extractSlots.HoldAllInTests(t, wait) }

// PDFText extracts the plain text of a PDF document within limits: what
// its text is read from is first inflated into nothing and measured, then
// the text is extracted and refused once over the cap. Over a limit, the
// error is a *TooLargeError.
func PDFText(ctx context.Context, data []byte, limits ExtractLimits) (string, error) {
	text, _, err := pdfTextAsync(ctx, data, limits)
	return text, err
}

// PDFTextFor is PDFText for reader (a user), whose documents are read one
// at a time. The slots are taken in the order asked for, so a reader with
// many documents waiting would hold them all, one after the other, and
// every other reader's document behind them (ten uploads of a file that
// takes the whole timeout, and the one slot of a small machine was that
// reader's for the next hundred seconds). A reader whose turn did not come
// within MaxExtractWait gets ErrReaderBusy.
func PDFTextFor(ctx context.Context, reader int64, data []byte, limits ExtractLimits) (string, error) {
	release, err := readerTurns.take(ctx, reader)
	if err != nil {
		return "", err
	}
	text, done, err := pdfTextAsync(ctx, data, limits)
	go func() { <-done; release() }() // once the work has stopped, as the slot
	return text, err
}

// ErrReaderBusy is returned when a reader's earlier documents were still
// being read after MaxExtractWait.
var ErrReaderBusy = errors.New("knowledge: this reader's other documents are being read")

// readerTurns holds each reader's turn: one slot, kept while someone holds
// or waits for it.
var readerTurns = turns{m: map[int64]*turn{}}

type turns struct {
	mu sync.Mutex
	m  map[int64]*turn
}

type turn struct {
	slot  *admit.Slots
	users int
}

// HoldReaderInTests takes reader's turn until t ends and shortens the wait
// for a turn to wait: PDFTextFor then fails with ErrReaderBusy for reader
// after it (admit.Slots.HoldAllInTests).
func HoldReaderInTests(t testing.TB, reader int64, wait time.Duration) {
	tn, done := readerTurns.join(reader)
	t.Cleanup(done) // registered first, so run after the hold's own cleanup gives the turn back
	tn.slot.HoldAllInTests(t, wait)
}

// join is reader's turn, counted as used until done is called.
func (ts *turns) join(reader int64) (t *turn, done func()) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t = ts.m[reader]
	if t == nil {
		t = &turn{slot: admit.New(1, MaxExtractWait, ErrReaderBusy)}
		ts.m[reader] = t
	}
	t.users++
	return t, func() {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if t.users--; t.users == 0 {
			delete(ts.m, reader)
		}
	}
}

// take waits for reader's turn (ErrReaderBusy past MaxExtractWait).
func (ts *turns) take(ctx context.Context, reader int64) (release func(), err error) {
	t, done := ts.join(reader)
	if err := t.slot.Take(ctx); err != nil {
		done()
		return nil, err
	}
	return func() { t.slot.Release(); done() }, nil
}

// pdfTextAsync is PDFText, and a channel closed once the extraction's
// goroutine has returned: past the deadline its reads fail, so it stops
// soon after PDFText has returned.
func pdfTextAsync(ctx context.Context, data []byte, limits ExtractLimits) (string, <-chan struct{}, error) {
	limits = limits.WithDefaults()
	parent := ctx
	if err := extractSlots.Take(ctx); err != nil {
		done := make(chan struct{})
		close(done)
		return "", done, err
	}
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	type result struct {
		text string
		err  error
	}
	results := make(chan result, 1)
	done := make(chan struct{})
	// The PDF library takes no context: its reads fail once ctx is done,
	// and it runs apart so that the deadline holds even in a stretch of its
	// work that reads nothing.
	go func() {
		defer close(done)
		defer extractSlots.Release() // once the work has stopped, not when PDFText returns
		text, err := pdfText(ctx, data, limits)
		results <- result{text, err}
	}()
	var r result
	select {
	case r = <-results:
		if r.err == nil || ctx.Err() == nil {
			return r.text, done, r.err
		}
	case <-ctx.Done():
	}
	if err := parent.Err(); err != nil {
		return "", done, err
	}
	return "", done, &TooLargeError{Detail: fmt.Sprintf("The PDF took more than %s to read", limits.Timeout)}
}

// extraction is one document's: its limits, and what it has spent.
type extraction struct {
	ctx       context.Context
	limits    ExtractLimits
	left      int64 // of MaxContentBytes
	fonts     map[string]*fontEntry
	tables    map[string]*[256]rune
	cmapCodes int
	out       strings.Builder
}

// unreadable is the answer to a PDF the reader failed on. A runtime error
// (an index out of range, which the reader recovers from itself too) is
// its bug, met on a malformed file: its text says nothing to the user.
func unreadable(err error) error {
	var re runtime.Error
	if errors.As(err, &re) {
		return errors.New("unreadable PDF: the file is malformed")
	}
	return fmt.Errorf("unreadable PDF: %w", err)
}

func pdfText(ctx context.Context, data []byte, limits ExtractLimits) (text string, err error) {
	defer func() {
		// The PDF reader panics on some malformed files, and on reads that
		// fail once the deadline has passed.
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("%v", r)
			}
			text, err = "", unreadable(e)
		}
	}()
	x := &extraction{ctx: ctx, limits: limits, left: limits.MaxContentBytes,
		fonts: map[string]*fontEntry{}, tables: map[string]*[256]rune{}}
	if err := x.checkStructure(data); err != nil {
		return "", err
	}
	r, err := pdf.NewReader(ctxReaderAt{ctx, bytes.NewReader(data)}, int64(len(data)))
	if err != nil {
		return "", unreadable(err)
	}
	root := r.Trailer().Key("Root").Key("Pages")
	if err := x.walkPages(root, x.measurePage); err != nil {
		return "", err
	}
	if err := x.walkPages(root, x.extractPage); err != nil {
		return "", err
	}
	text = strings.ToValidUTF8(strings.ReplaceAll(x.out.String(), "\x00", ""), "\uFFFD")
	if strings.TrimSpace(text) == "" {
		return "", errors.New("the PDF holds no text")
	}
	if err := limits.CheckText(text); err != nil {
		return "", err
	}
	return text, nil
}

// ctxReaderAt is the PDF file as the library reads it: reads fail once ctx
// is done, which ends the library's work.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}

// ctxReader is an inflated stream, read while ctx lasts.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
