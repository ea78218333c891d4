package knowledge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ledongthuc/pdf"
)

// PDFText extracts the plain text of a PDF document.
func PDFText(data []byte) (text string, err error) {
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
	plain, err := r.GetPlainText()
	if err != nil {
		return "", fmt.Errorf("unreadable PDF: %w", err)
	}
	raw, err := io.ReadAll(plain)
	if err != nil {
		return "", fmt.Errorf("unreadable PDF: %w", err)
	}
	text = strings.ToValidUTF8(strings.ReplaceAll(string(raw), "\x00", ""), "\uFFFD")
	if strings.TrimSpace(text) == "" {
		return "", errors.New("the PDF holds no text")
	}
	return text, nil
}
