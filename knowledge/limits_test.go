package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"lectern/knowledge"
	"lectern/knowledge/knowledgetest"
)

// A decompression bomb is refused once its content passes the cap, without
// inflating the rest; a document under the caps reads whole.
func TestPDFTextWithinLimits(t *testing.T) {
	limits := knowledge.ExtractLimits{MaxTextBytes: 1 << 20}
	_, err := knowledge.PDFText(context.Background(), knowledgetest.BombPDF(25<<20), limits)
	var tooLarge *knowledge.TooLargeError
	if !errors.As(err, &tooLarge) || !errors.Is(err, knowledge.ErrTooLarge) {
		t.Fatalf("a 25 MB bomb: %v, want a knowledge.TooLargeError", err)
	}
	text, err := knowledge.PDFText(context.Background(), knowledgetest.BombPDF(200<<10), limits)
	if err != nil || len(text) < 200<<10 {
		t.Fatalf("200 KB of text: %d bytes, %v", len(text), err)
	}
	if err := limits.CheckText(strings.Repeat("x", 1<<20+1)); !errors.Is(err, knowledge.ErrTooLarge) {
		t.Errorf("text over the cap: %v", err)
	}
	if err := (knowledge.ExtractLimits{MaxChunks: 3}).CheckText(strings.Repeat("x", 5*knowledge.ChunkSize)); !errors.Is(err, knowledge.ErrTooLarge) {
		t.Errorf("text over the chunk cap: %v", err)
	}
	if n, want := knowledge.ChunkCount(5*knowledge.ChunkSize, knowledge.ChunkSize, knowledge.ChunkOverlap), len(knowledge.Chunk(strings.Repeat("x ", 5*knowledge.ChunkSize/2), knowledge.ChunkSize, knowledge.ChunkOverlap)); n < want {
		t.Errorf("knowledge.ChunkCount %d is under the %d chunks Chunk makes", n, want)
	}
}

// Peak memory while a bomb is refused stays near the cap: measured in a
// child process, whose high-water mark (VmHWM) no other test has raised.
func TestPDFBombPeakMemory(t *testing.T) {
	if os.Getenv("LECTERN_BOMB_CHILD") == "1" {
		bomb := knowledgetest.BombPDF(25 << 20)
		before := vmHWM(t)
		_, err := knowledge.PDFText(context.Background(), bomb, knowledge.ExtractLimits{MaxTextBytes: 2 << 20})
		if !errors.Is(err, knowledge.ErrTooLarge) {
			t.Fatalf("the bomb: %v", err)
		}
		fmt.Printf("HWM-GROWTH %d\n", vmHWM(t)-before)
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status to read peak memory from")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPDFBombPeakMemory$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LECTERN_BOMB_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var growth int64
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := fmt.Sscanf(line, "HWM-GROWTH %d", &growth); err == nil {
			break
		}
	}
	t.Logf("peak memory grew %.1f MiB while a 25 MB bomb was refused (text cap 2 MiB)", float64(growth)/(1<<20))
	if growth > 8<<20 {
		t.Errorf("peak memory grew %d bytes: over the 2 MiB cap by more than a few MiB", growth)
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
