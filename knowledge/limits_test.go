package knowledge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"lectern/knowledge"
	"lectern/knowledge/knowledgetest"
	"lectern/poll"
)

// The content budget when none is set: 4 × the text cap.
var contentCap = 4 * knowledge.DefaultMaxTextBytes

// A decompression bomb is refused once its content passes the cap, without
// inflating the rest; a document under the caps reads whole.
func TestPDFTextWithinLimits(t *testing.T) {
	limits := knowledge.ExtractLimits{}
	for name, bomb := range map[string][]byte{
		"content": knowledgetest.BombPDF(25 << 20),
		"font":    knowledgetest.FontBombPDF(25 << 20),
	} {
		_, err := knowledge.PDFText(context.Background(), bomb, limits)
		var tooLarge *knowledge.TooLargeError
		if !errors.As(err, &tooLarge) || !errors.Is(err, knowledge.ErrTooLarge) {
			t.Fatalf("a 25 MB %s bomb: %v, want a knowledge.TooLargeError", name, err)
		}
		if want := fmt.Sprintf("The PDF's pages decompress to more than %d bytes", contentCap); tooLarge.Detail != want {
			t.Errorf("a 25 MB %s bomb: %q, want %q", name, tooLarge.Detail, want)
		}
	}
	text, err := knowledge.PDFText(context.Background(), knowledgetest.BombPDF(200<<10), limits)
	if err != nil || len(text) < 200<<10 {
		t.Fatalf("200 KB of text: %d bytes, %v", len(text), err)
	}
	if err := limits.CheckText(strings.Repeat("x", knowledge.DefaultMaxTextBytes+1)); !errors.Is(err, knowledge.ErrTooLarge) {
		t.Errorf("text over the cap: %v", err)
	}
	if err := (knowledge.ExtractLimits{MaxChunks: 3}).CheckText(strings.Repeat("x", 5*knowledge.ChunkSize)); !errors.Is(err, knowledge.ErrTooLarge) {
		t.Errorf("text over the chunk cap: %v", err)
	}
	// PDFText applies the chunk cap itself too.
	if _, err := knowledge.PDFText(context.Background(), knowledgetest.BombPDF(8*knowledge.ChunkSize), knowledge.ExtractLimits{MaxChunks: 3}); !errors.Is(err, knowledge.ErrTooLarge) {
		t.Errorf("a PDF over the chunk cap: %v", err)
	}
	if n, want := knowledge.ChunkCount(5*knowledge.ChunkSize, knowledge.ChunkSize, knowledge.ChunkOverlap), len(knowledge.Chunk(strings.Repeat("x ", 5*knowledge.ChunkSize/2), knowledge.ChunkSize, knowledge.ChunkOverlap)); n < want {
		t.Errorf("knowledge.ChunkCount %d is under the %d chunks Chunk makes", n, want)
	}
}

// onePage is a PDF of one page: content is object 4, its font F1 object 5,
// more objects follow.
func onePage(content, font string, more ...string) []byte {
	return knowledgetest.PDF(append([]string{
		"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
		"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		content, font}, more...)...)
}

// cidFont is a font F1 of two-byte codes whose ToUnicode map is object 6.
const cidFont = "<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /ToUnicode 6 0 R >>"

const helvetica = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"

// withPrev is objStmPDF's file with its cross-reference stream's Prev
// pointing at itself.
func withPrev(packed, plain []string) []byte {
	data := objStmPDF(packed, plain, "", "", nil)
	var at int
	if _, err := fmt.Sscanf(string(data[bytes.LastIndex(data, []byte("startxref")):]), "startxref\n%d", &at); err != nil {
		panic(err)
	}
	return objStmPDF(packed, plain, "", fmt.Sprintf("/Prev %d", at), nil)
}

// Every way found for a small PDF to make its extraction allocate or run
// without bound is refused, quickly (past the default 10 s a case would
// fail with the timeout's detail instead) and with a detail that says why.
func TestPDFBombsAreRefused(t *testing.T) {
	packed := []string{
		"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
		"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
	}
	plain := []string{stream("BT /F1 12 Tf (Packed.) Tj ET"), helvetica}
	flate := func(s string) string { return knowledgetest.FlateStream("", []byte(s)) }
	bigMap := knowledgetest.ToUnicodeMap(nil, nil)
	bigMap = strings.Replace(bigMap, "endcmap", strings.Repeat("100 beginbfchar\n"+strings.Repeat("<0001> <0041>\n", 100)+"endbfchar\n", 1400)+"endcmap", 1)
	kids := strings.Repeat("3 0 R ", 100)
	contentDetail := fmt.Sprintf("The PDF's pages decompress to more than %d bytes", contentCap)
	for _, tc := range []struct {
		name string
		pdf  []byte
		want string // the TooLargeError's detail, or the start of another error
	}{
		{"content bomb", knowledgetest.BombPDF(25 << 20), contentDetail},
		{"font bomb", knowledgetest.FontBombPDF(25 << 20), contentDetail},
		// The library reads a page's content each time the page is named.
		{"content read by 100 pages", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>",
			fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count 100 >>", kids),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>",
			flate(strings.Repeat("q Q\n", contentCap/400+1024))), contentDetail},
		{"content named 100 times", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /Contents [%s] >>", strings.Repeat("4 0 R ", 100)),
			flate(strings.Repeat("q Q\n", contentCap/400+1024))), contentDetail},
		{"page tree of 10^9 pages", knowledgetest.PageTreeBombPDF(10, 9), fmt.Sprintf("The PDF has more than %d pages", contentCap/1024)},
		{"operands without operators", onePage(flate(strings.Repeat("1 ", 1500000)), helvetica), "The PDF's content holds more than 16384 values for one operator, or nests them more than 100 deep"},
		{"arrays nested 200 deep", onePage(flate(strings.Repeat("[", 200)+" TJ"), helvetica), "The PDF's content holds more than 16384 values for one operator, or nests them more than 100 deep"},
		{"a string over the text cap", onePage(flate("BT ("+strings.Repeat("A", knowledge.DefaultMaxTextBytes+1)+") Tj ET"), helvetica), fmt.Sprintf("The PDF holds a string, name or comment over %d bytes", knowledge.DefaultMaxTextBytes)},
		{"CMap of 140 000 codes", onePage(stream("BT /F1 12 Tf <0001> Tj ET"), cidFont, flate(bigMap)), "The PDF's fonts map more than 131072 character codes"},
		{"CMap operators pushing forever", onePage(stream("BT /F1 12 Tf <0001> Tj ET"), cidFont, flate(strings.Repeat("begincmap ", 100000))), "The PDF's content holds more than 16384 values"},
		{"100 filters", onePage(fmt.Sprintf("<< /Length 0 /Filter [%s] >>\nstream\n\nendstream", strings.Repeat("/FlateDecode ", 100)), helvetica), "unreadable PDF: a stream has 100 filters"},
		{"rows of 10 GB", onePage(fmt.Sprintf("<< /Length 1 /Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns %d >> >>\nstream\nx\nendstream", int64(10)<<30), helvetica), "unreadable PDF: a stream's rows are"},
		{"cross-reference table naming object 10^7", []byte(xrefIndexBomb(10_000_000)), "unreadable PDF: it names object 10000000"},
		{"cross-reference stream of 10^8 objects", objStmPDF(packed, plain, "", "/Size 100000000", nil), "unreadable PDF: it names object 100000000"},
		{"cross-reference stream indexing 10^8", objStmPDF(packed, plain, "", "/Index [0 8 100000000 1]", nil), "unreadable PDF: it names object 100000000"},
		{"cross-reference fields of 10^12 bytes", objStmPDF(packed, plain, "", "/W [1 1000000000000 2]", nil), "unreadable PDF: a cross-reference stream has fields of"},
		{"cross-reference sections in a loop", withPrev(packed, plain), "unreadable PDF: its cross-reference sections loop"},
		{"object stream bomb", objStmPDF(packed, plain, "", "", bytes.Repeat([]byte(" "), 25<<20)), fmt.Sprintf("The PDF decompresses to more than %d bytes", contentCap)},
		{"object stream of 10^12 objects", objStmPDF(packed, plain, "/N 1000000000000", "", nil), "unreadable PDF: an object stream counts 1000000000000 objects"},
		{"object of 100 000 values", objStmPDF(append(packed[:3:3], "["+strings.Repeat("1 ", 100000)+"]"), plain, "", "", nil), "unreadable PDF: an object holds more than 65536 values"},
		{"array hidden in a comment", objStmPDF(packed, plain, "", "", []byte("%["+strings.Repeat("1 ", 100000)+"]")), "unreadable PDF: an object stream holds a string, name or comment over 65536 bytes"},
		// The reader indexes past its buffer: its runtime error is no answer.
		{"startxref before the file", negativeStartxref(onePage(stream("BT (Hello) Tj ET"), helvetica)), "unreadable PDF: the file is malformed"},
		{"encrypted object streams", objStmPDF(packed, plain, "", "/Encrypt << /Filter /Standard /V 1 /R 2 >> /ID [(a) (a)]", nil), "unreadable PDF: encrypted PDFs whose objects are compressed are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := knowledge.PDFText(context.Background(), tc.pdf, knowledge.ExtractLimits{})
			var tooLarge *knowledge.TooLargeError
			switch {
			case err == nil:
				t.Fatalf("a %d-byte file is read", len(tc.pdf))
			case errors.As(err, &tooLarge):
				if !strings.HasPrefix(tooLarge.Detail, tc.want) {
					t.Errorf("refused with %q, want %q", tooLarge.Detail, tc.want)
				}
			case !strings.HasPrefix(err.Error(), tc.want):
				t.Errorf("refused with %v, want %q", err, tc.want)
			}
		})
	}
}

// A loop of Parents, where a page's resources are looked for, is read as
// far as a page tree may be deep (the library follows it for ever).
func TestPDFParentLoop(t *testing.T) {
	data := knowledgetest.PDF(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 2 0 R >>",
		"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>",
		stream("BT (Parents all the way up.) Tj ET"))
	text, err := knowledge.PDFText(context.Background(), data, knowledge.ExtractLimits{})
	if err != nil || text != "\nParents all the way up." {
		t.Errorf("%q, %v", text, err)
	}
}

// xrefIndexBomb is a PDF whose one cross-reference entry is numbered n: the
// library allocates an entry for every number up to it.
func xrefIndexBomb(n int) string {
	var b strings.Builder
	b.WriteString("%PDF-1.4\n")
	off := b.Len()
	b.WriteString("1 0 obj\n<< /Type /Catalog >>\nendobj\n")
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 1\n0000000000 65535 f \n%d 1\n%010d 00000 n \n", n, off)
	fmt.Fprintf(&b, "trailer\n<< /Size 2 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", xref)
	return b.String()
}

// A ToUnicode map is searched, not scanned: 100 000 codes and 500 000
// characters that none of them maps (the library scans them all for each
// character: about 30 minutes) read in well under the 10 s timeout.
func TestPDFTextLargeCMap(t *testing.T) {
	cmap := knowledgetest.ToUnicodeMap(nil, []string{"<0002> <0002> <0042>"})
	cmap = strings.Replace(cmap, "1 beginbfrange", strings.Repeat("100 beginbfchar\n"+strings.Repeat("<0001> <0041>\n", 100)+"endbfchar\n", 1000)+"1 beginbfrange", 1)
	content := "BT /F1 12 Tf <" + strings.Repeat("0002", 500000) + "> Tj ET"
	data := onePage(knowledgetest.FlateStream("", []byte(content)), cidFont, knowledgetest.FlateStream("", []byte(cmap)))
	text, err := knowledge.PDFText(context.Background(), data, knowledge.ExtractLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "\n" + strings.Repeat("B", 500000); text != want {
		t.Errorf("%d bytes of text, want %d", len(text), len(want))
	}
}

// Past the timeout the extraction is refused, and its goroutine stops
// working soon after, instead of running on for the minutes a tree of 10^7
// pages takes; a caller gone away gets its context's error.
func TestPDFTimeoutStopsTheWork(t *testing.T) {
	tree := knowledgetest.PageTreeBombPDF(10, 7)
	limits := knowledge.ExtractLimits{MaxContentBytes: 1 << 40, Timeout: 50 * time.Millisecond}
	start := time.Now()
	_, done, err := knowledge.PDFTextAsync(context.Background(), tree, limits)
	returned := time.Since(start)
	var tooLarge *knowledge.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Detail != "The PDF took more than 50ms to read" {
		t.Fatalf("past the timeout: %v", err)
	}
	poll.Must(t, 5*time.Second, "the extraction's goroutine returned", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	t.Logf("refused after %s; the work stopped %s later", returned, time.Since(start)-returned)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := knowledge.PDFText(ctx, tree, limits); !errors.Is(err, context.Canceled) {
		t.Errorf("with its caller gone: %v", err)
	}
}

// Peak memory while a bomb is refused stays near the text cap: measured in
// a child process, whose high-water mark (VmHWM) no other test has raised,
// reset after each bomb is built (writing 5 to /proc/self/clear_refs). (A
// page-tree bomb keeps nothing either, but the library allocates a buffer
// for every object it looks up: some 45 MB of garbage in 4 096 pages, whose
// peak is the garbage collector's pacing, not the extraction's.)
func TestPDFBombPeakMemory(t *testing.T) {
	if os.Getenv("LECTERN_BOMB_CHILD") == "1" {
		packed := []string{"<< /Type /Catalog /Pages 2 0 R >>", pages(3), "<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>"}
		plain := []string{stream("BT (x) Tj ET"), helvetica}
		flate := func(s string) string { return knowledgetest.FlateStream("", []byte(s)) }
		bombs := []struct {
			name string
			pdf  func() []byte
		}{
			{"content", func() []byte { return knowledgetest.BombPDF(25 << 20) }},
			{"font", func() []byte { return knowledgetest.FontBombPDF(25 << 20) }},
			{"operands", func() []byte { return onePage(flate(strings.Repeat("1 ", 1500000)), helvetica) }},
			{"object-stream", func() []byte { return objStmPDF(packed, plain, "", "", bytes.Repeat([]byte(" "), 25<<20)) }},
		}
		for _, b := range bombs {
			pdf := b.pdf()
			runtime.GC()
			debug.FreeOSMemory()
			if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
				t.Skipf("cannot reset the peak: %v", err)
			}
			before := vmHWM(t)
			start := time.Now()
			_, err := knowledge.PDFText(context.Background(), pdf, knowledge.ExtractLimits{})
			if !errors.Is(err, knowledge.ErrTooLarge) {
				t.Fatalf("the %s bomb: %v", b.name, err)
			}
			fmt.Printf("BOMB %s %d %d %d\n", b.name, len(pdf), vmHWM(t)-before, time.Since(start).Microseconds())
		}
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status to read peak memory from")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPDFBombPeakMemory$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LECTERN_BOMB_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("child: %s", out)
	}
	// The text cap, plus 6 MiB for the runtime's own (heap arenas, GC
	// metadata, zlib windows) and the text built before a refusal.
	limit := int64(knowledge.DefaultMaxTextBytes) + 6<<20
	bombs := 0
	for _, line := range strings.Split(string(out), "\n") {
		var name string
		var size, growth, micros int64
		if _, err := fmt.Sscanf(line, "BOMB %s %d %d %d", &name, &size, &growth, &micros); err != nil {
			continue
		}
		bombs++
		t.Logf("%s bomb of %d bytes: refused in %s, peak memory +%.1f MiB", name, size, time.Duration(micros)*time.Microsecond, float64(growth)/(1<<20))
		if growth > limit {
			t.Errorf("the %s bomb: peak memory grew %d bytes, over the %d MiB text cap by more than 6 MiB", name, growth, knowledge.DefaultMaxTextBytes>>20)
		}
	}
	if bombs != 4 {
		t.Fatalf("the child reported %d bombs:\n%s", bombs, out)
	}
}

// vmHWM is the process's peak resident memory, in bytes.
func vmHWM(t *testing.T) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// An extraction that finds every slot taken for longer than its wait is
// refused with ErrBusy, having read nothing; one whose caller goes away
// while it waits gets its context's error. Once the slots come free, the
// same document is read.
func TestPDFExtractionsThatFindNoSlotGiveUp(t *testing.T) {
	pdf := knowledgetest.TinyPDF("Cells divide")
	t.Run("busy", func(t *testing.T) {
		knowledge.BusyExtractionInTests(t, 20*time.Millisecond)
		if _, err := knowledge.PDFText(context.Background(), pdf, knowledge.ExtractLimits{}); !errors.Is(err, knowledge.ErrBusy) {
			t.Errorf("with every slot taken: %v, want %v", err, knowledge.ErrBusy)
		}
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := knowledge.PDFText(gone, pdf, knowledge.ExtractLimits{}); !errors.Is(err, context.Canceled) {
			t.Errorf("a caller gone while it waits: %v, want context.Canceled", err)
		}
	})
	if text, err := knowledge.PDFText(context.Background(), pdf, knowledge.ExtractLimits{}); err != nil || !strings.Contains(text, "Cells divide") {
		t.Errorf("with the slots free again: %q, %v", text, err)
	}
}

// negativeStartxref is pdf with its startxref offset negated.
func negativeStartxref(pdf []byte) []byte {
	return regexp.MustCompile(`startxref\s+(\d+)`).ReplaceAll(pdf, []byte("startxref\n-$1"))
}
