package knowledgetest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"strings"
)

// PDF assembles a PDF from the bodies of its objects, numbered from 1 (the
// catalog), with a cross-reference table.
func PDF(objects ...string) []byte {
	var b strings.Builder
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return []byte(b.String())
}

// Flate compresses data as a FlateDecode stream holds it.
func Flate(data []byte) []byte {
	var b bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&b, zlib.BestCompression)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return b.Bytes()
}

// FlateStream is the body of a stream object holding data compressed, with
// extra entries in its dictionary.
func FlateStream(extra string, data []byte) string {
	z := Flate(data)
	return fmt.Sprintf("<< /Length %d /Filter /FlateDecode %s >>\nstream\n%s\nendstream", len(z), extra, z)
}

// repeatFlate compresses unit repeated until n bytes, without holding them.
func repeatFlate(head, unit, tail string, n int) []byte {
	var b bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&b, zlib.BestCompression)
	_, _ = io.WriteString(zw, head)
	chunk := strings.Repeat(unit, max(1, (64<<10)/len(unit)))
	for written := 0; written < n; written += len(chunk) {
		_, _ = io.WriteString(zw, chunk)
	}
	_, _ = io.WriteString(zw, tail)
	_ = zw.Close()
	return b.Bytes()
}

// FontBombPDF is a one-page PDF of one short line whose font's ToUnicode map
// — a Flate-compressed stream — inflates to about cmapBytes (a decompression
// bomb in a font: 25 MB of map make a file of about 25 KB).
func FontBombPDF(cmapBytes int) []byte {
	block := "100 beginbfchar\n" + strings.Repeat("<0001> <0041>\n", 100) + "endbfchar\n"
	cmap := repeatFlate(toUnicodeHead, block, toUnicodeTail, cmapBytes)
	content := "BT /F1 12 Tf 72 720 Td <00010001> Tj ET"
	return PDF(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type0 /BaseFont /Bomb /Encoding /Identity-H /ToUnicode 6 0 R >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", len(cmap), cmap),
	)
}

const (
	toUnicodeHead = "/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n" +
		"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n" +
		"/CMapName /Adobe-Identity-UCS def /CMapType 2 def\n" +
		"1 begincodespacerange <0000> <FFFF> endcodespacerange\n"
	toUnicodeTail = "endcmap CMapName currentdict /CMap defineresource pop end end\n"
)

// ToUnicodeMap is a ToUnicode CMap of two-byte codes with the given bfchar
// and bfrange lines (e.g. "<0003> <0020>", "<0010> <0012> <0041>").
func ToUnicodeMap(chars, ranges []string) string {
	var b strings.Builder
	b.WriteString(toUnicodeHead)
	if len(chars) > 0 {
		fmt.Fprintf(&b, "%d beginbfchar\n%s\nendbfchar\n", len(chars), strings.Join(chars, "\n"))
	}
	if len(ranges) > 0 {
		fmt.Fprintf(&b, "%d beginbfrange\n%s\nendbfrange\n", len(ranges), strings.Join(ranges, "\n"))
	}
	b.WriteString(toUnicodeTail)
	return b.String()
}

// PageTreeBombPDF is a PDF whose page tree shares its nodes: fanout kids at
// each of depth levels, all the same node, name fanout^depth pages in a
// few hundred bytes, each showing the same line.
func PageTreeBombPDF(fanout, depth int) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>"}
	for level := 0; level < depth; level++ {
		kid := fmt.Sprintf("%d 0 R ", len(objs)+2)
		count := 1
		for range depth - level {
			count *= fanout
		}
		objs = append(objs, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Repeat(kid, fanout), count))
	}
	content := "BT /F1 12 Tf 72 720 Td (A page among many.) Tj ET"
	n := len(objs) + 1
	objs = append(objs,
		fmt.Sprintf("<< /Type /Page /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>", n+1, n+2),
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	)
	return PDF(objs...)
}
