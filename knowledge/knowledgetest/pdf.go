// Package knowledgetest holds fixtures for the tests of knowledge documents.
package knowledgetest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"strings"
)

// TinyPDF is a valid one-page PDF that shows text in Helvetica.
func TinyPDF(text string) []byte {
	content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
	return onePagePDF(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
}

// BombPDF is a one-page PDF whose Flate-compressed content stream inflates
// to textBytes of shown text (a decompression bomb: 25 MB of text make a
// file of about 25 KB).
func BombPDF(textBytes int) []byte {
	var raw bytes.Buffer
	line := "BT /F1 12 Tf 72 720 Td (" + strings.Repeat("A", 1000) + ") Tj ET\n"
	zw := zlib.NewWriter(&raw)
	for n := 0; n < textBytes; n += 1000 {
		_, _ = io.WriteString(zw, line)
	}
	_ = zw.Close()
	return onePagePDF(fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", raw.Len(), raw.String()))
}

func onePagePDF(contentObj string) []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		contentObj,
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b strings.Builder
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return []byte(b.String())
}
