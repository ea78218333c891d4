package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ledongthuc/pdf"
)

// ExtractLimits bound what extracting one document may cost: a small PDF
// can inflate to gigabytes (a decompression bomb).
type ExtractLimits struct {
	// MaxTextBytes is the most text a document may hold (default 1 MiB: its
	// text is recorded in one event, which EventStoreDB caps at 1 MiB).
	MaxTextBytes int
	// MaxContentBytes is the most decompressed page content a PDF may hold
	// (default 4 × MaxTextBytes: content is text and the operators that
	// place it). It is measured, streaming, before any text is extracted.
	MaxContentBytes int64
	// MaxChunks is the most chunks a document is cut into (default 5 000).
	MaxChunks int
	// Timeout bounds one extraction (default 10 s).
	Timeout time.Duration
}

// DefaultExtractLimits are the limits when none are set.
var DefaultExtractLimits = ExtractLimits{MaxTextBytes: 1 << 20, MaxChunks: 5000, Timeout: 10 * time.Second}

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

// PDFText extracts the plain text of a PDF document within limits: the
// decompressed content of its pages is first measured without being kept,
// then the text is extracted page by page and refused once over the cap.
func PDFText(ctx context.Context, data []byte, limits ExtractLimits) (string, error) {
	limits = limits.WithDefaults()
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	// The PDF library takes no context: a run past the deadline is left to
	// finish on its own, bounded by the content cap it checks first.
	go func() {
		text, err := pdfText(ctx, data, limits)
		done <- result{text, err}
	}()
	select {
	case r := <-done:
		return r.text, r.err
	case <-ctx.Done():
		return "", &TooLargeError{Detail: fmt.Sprintf("The PDF took more than %s to read", limits.Timeout)}
	}
}

func pdfText(ctx context.Context, data []byte, limits ExtractLimits) (text string, err error) {
	defer func() {
		// The PDF reader panics on some malformed files.
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("unreadable PDF: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("unreadable PDF: %w", err)
	}
	pages := r.NumPage()
	var content int64
	for i := 1; i <= pages; i++ {
		n, err := contentSize(r.Page(i).V.Key("Contents"), limits.MaxContentBytes-content+1)
		if err != nil {
			return "", fmt.Errorf("unreadable PDF: %w", err)
		}
		if content += n; content > limits.MaxContentBytes {
			return "", &TooLargeError{Detail: fmt.Sprintf("The PDF's pages decompress to more than %d bytes", limits.MaxContentBytes)}
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	var out strings.Builder
	fonts := map[string]*pdf.Font{}
	for i := 1; i <= pages; i++ {
		p := r.Page(i)
		for _, name := range p.Fonts() {
			if _, ok := fonts[name]; !ok {
				f := p.Font(name)
				fonts[name] = &f
			}
		}
		pageText, err := p.GetPlainText(fonts)
		if err != nil {
			return "", fmt.Errorf("unreadable PDF: %w", err)
		}
		if out.Len()+len(pageText) > limits.MaxTextBytes {
			return "", &TooLargeError{Detail: fmt.Sprintf("The document's text is over %d bytes", limits.MaxTextBytes)}
		}
		out.WriteString(pageText)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	text = strings.ToValidUTF8(strings.ReplaceAll(out.String(), "\x00", ""), "\uFFFD")
	if strings.TrimSpace(text) == "" {
		return "", errors.New("the PDF holds no text")
	}
	return text, nil
}

// contentSize counts a page's decompressed content, a stream or an array of
// streams, reading at most limit bytes.
func contentSize(v pdf.Value, limit int64) (int64, error) {
	switch v.Kind() {
	case pdf.Stream:
		rc := v.Reader()
		defer rc.Close()
		return io.Copy(io.Discard, io.LimitReader(rc, limit))
	case pdf.Array:
		var total int64
		for i := 0; i < v.Len() && total < limit; i++ {
			n, err := contentSize(v.Index(i), limit-total)
			if err != nil {
				return total, err
			}
			total += n
		}
		return total, nil
	}
	return 0, nil
}
