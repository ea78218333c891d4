package knowledge_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ledongthuc/pdf"

	"lectern/knowledge"
	"lectern/knowledge/knowledgetest"
)

// libraryText is how the text was extracted before it was bounded: the PDF
// library's Page.GetPlainText, page by page.
func libraryText(t *testing.T, data []byte) string {
	t.Helper()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	fonts := map[string]*pdf.Font{}
	var out strings.Builder
	for i := 1; i <= r.NumPage(); i++ {
		p := r.Page(i)
		for _, name := range p.Fonts() {
			if _, ok := fonts[name]; !ok {
				f := p.Font(name)
				fonts[name] = &f
			}
		}
		text, err := p.GetPlainText(fonts)
		if err != nil {
			t.Fatalf("the library fails on page %d: %v", i, err)
		}
		out.WriteString(text)
	}
	return strings.ToValidUTF8(strings.ReplaceAll(out.String(), "\x00", ""), "\uFFFD")
}

func stream(content string) string {
	return fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content)
}

// onePage is a page of content with the given fonts (name → object number).
func pages(kids ...int) string {
	var refs []string
	for _, k := range kids {
		refs = append(refs, fmt.Sprintf("%d 0 R", k))
	}
	return fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(refs, " "), len(kids))
}

// objStmPDF packs objects 1..len(packed) in an object stream (object
// len(packed)+len(plain)+1); plain objects follow them in the file, and a
// cross-reference stream ends it. extra goes in the object stream's
// dictionary, trailer in the cross-reference stream's; pad is inflated
// after the objects.
func objStmPDF(packed, plain []string, extra, trailer string, pad []byte) []byte {
	var head, body strings.Builder
	for i, o := range packed {
		fmt.Fprintf(&head, "%d %d ", i+1, body.Len())
		body.WriteString(o + "\n")
	}
	data := append([]byte(head.String()+body.String()), pad...)
	stm := len(packed) + len(plain) + 1
	z := knowledgetest.Flate(data)
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n")
	offsets := map[int]int{}
	for i, o := range plain {
		offsets[len(packed)+i+1] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(packed)+i+1, o)
	}
	offsets[stm] = b.Len()
	fmt.Fprintf(&b, "%d 0 obj\n<< /Type /ObjStm /N %d /First %d /Length %d /Filter /FlateDecode %s >>\nstream\n", stm, len(packed), head.Len(), len(z), extra)
	b.Write(z)
	b.WriteString("\nendstream\nendobj\n")
	xref := stm + 1
	offsets[xref] = b.Len()
	var entries bytes.Buffer
	entry := func(typ byte, f2 uint32, f3 uint16) {
		entries.Write([]byte{typ, byte(f2 >> 24), byte(f2 >> 16), byte(f2 >> 8), byte(f2), byte(f3 >> 8), byte(f3)})
	}
	entry(0, 0, 65535)
	for i := 1; i <= xref; i++ {
		if i <= len(packed) {
			entry(2, uint32(stm), uint16(i-1))
		} else {
			entry(1, uint32(offsets[i]), 0)
		}
	}
	fmt.Fprintf(&b, "%d 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Length %d %s >>\nstream\n", xref, xref+1, entries.Len(), trailer)
	b.Write(entries.Bytes())
	fmt.Fprintf(&b, "\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n", offsets[xref])
	return b.Bytes()
}

// The bounded extraction reads well-formed PDFs as the library did: the
// same fonts, encodings, ToUnicode maps and text operators.
func TestPDFTextMatchesTheLibrary(t *testing.T) {
	cmap := knowledgetest.ToUnicodeMap(
		[]string{"<0003> <0020>", "<0004> <00E9>", "<0005> <D83DDE00>", "<0006> <00660069>"},
		[]string{"<0010> <0019> <0030>", "<0020> <0022> [<0041> <0042> <0043>]", "<0100> <01FF> <4E00>"})
	helvetica := "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"no encoding", knowledgetest.TinyPDF("Mitochondria are the powerhouse of the cell")},
		{"WinAnsi", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
			stream(`BT /F1 12 Tf (caf\351 \223quoted\224 \200 10\260) Tj T* (next line) Tj ET`),
			"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")},
		{"MacRoman", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
			stream(`BT /F1 12 Tf (na\226ve \245 bullet) Tj ET`),
			"<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /Encoding /MacRomanEncoding >>")},
		{"Differences", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
			stream(`BT /F1 12 Tf (ABC abc \001\002) Tj [(A) -120 (a) 30 (Z)] TJ ET`),
			"<< /Type /Font /Subtype /Type1 /BaseFont /X /Encoding << /Type /Encoding /Differences [1 /eacute /germandbls 65 /B /C 97 /Euro] >> >>")},
		{"ToUnicode", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3, 6),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
			stream("BT /F1 12 Tf <00030004000500060010001500190020002100220023> Tj\n[<0003> -200 <0110> 40 <01FF>] TJ T* <0100 0001 00FF> Tj ET"),
			"<< /Type /Font /Subtype /Type0 /BaseFont /ABCDEF+Cid /Encoding /Identity-H /ToUnicode 9 0 R >>",
			"<< /Type /Page /Parent 2 0 R /Contents [7 0 R 8 0 R] /Resources << /Font << /F1 5 0 R /F2 10 0 R >> >> >>",
			stream("BT /F2 10 Tf (second page, first stream) Tj ET"),
			stream("BT /F1 10 Tf <0012> Tj (') Tj /F2 9 Tf (quote) ' ET"),
			knowledgetest.FlateStream("", []byte(cmap)),
			helvetica)},
		{"one-byte ToUnicode", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
			stream("BT /F1 12 Tf (\x01\x02\x03\x04) Tj ET"),
			"<< /Type /Font /Subtype /TrueType /BaseFont /X /ToUnicode 6 0 R >>",
			stream("/CIDInit /ProcSet findresource begin 12 dict begin begincmap 1 begincodespacerange <00> <FF> endcodespacerange\n"+
				"2 beginbfchar <01> <0048> <02> <0069> endbfchar 1 beginbfrange <03> <04> <0021> endbfrange endcmap CMapName currentdict /CMap defineresource pop end end"))},
		{"UCS-2", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
			stream("BT /F1 12 Tf <4E2D6587> Tj ET"),
			"<< /Type /Font /Subtype /Type0 /BaseFont /STSong /Encoding /UniGB-UCS2-H >>")},
		{"unknown encoding", knowledgetest.PDF(
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
			stream(`BT /F1 12 Tf (raw \351\000 bytes) Tj /F9 12 Tf (no such font) Tj ET`),
			"<< /Type /Font /Subtype /Type1 /BaseFont /X /Encoding /StandardEncoding >>")},
		{"object stream", objStmPDF([]string{
			"<< /Type /Catalog /Pages 2 0 R >>", pages(3),
			"<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		}, []string{
			stream("BT /F1 12 Tf (Packed objects read too.) Tj ET"),
			helvetica,
		}, "", "", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := libraryText(t, tc.data)
			got, err := knowledge.PDFText(context.Background(), tc.data, knowledge.ExtractLimits{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%q", got)
			if got != want {
				t.Errorf("text %q, the library's %q", got, want)
			}
		})
	}
}
