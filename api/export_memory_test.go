package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// GET /user/me/export writes a user's documents one at a time: the heap
// grows by a few documents' worth while it answers, not by all of them
// (and their JSON) at once. Not parallel: the heap is the process's.
func TestExportMemoryStaysFlat(t *testing.T) {
	e := sharedEnv(t)
	u := e.signUp(t)
	const documents, size = 24, 900 << 10 // under the 1 MiB body cap each
	for i := range documents {
		marker := fmt.Sprintf("DOC%02dMARK ", i)
		text := marker + strings.Repeat("Cells divide and grow. ", size/len("Cells divide and grow. "))
		e.uploadDocument(t, u.Access, fmt.Sprintf("Notes %d", i), text)
	}
	total := documents * size

	// Garbage counts in the heap until it is collected: collect often, so
	// that what is measured is what the export holds.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	before := heapInUse()
	h := sampleHeap()
	texts := readExportDocuments(t, e, u.Access)
	growth := int64(h.end()) - int64(before)
	t.Logf("an export of %d documents, %d MiB of text: heap +%.1f MiB at most (from %.1f MiB)", documents, total>>20,
		float64(growth)/(1<<20), float64(before)/(1<<20))

	if len(texts) != documents {
		t.Fatalf("the export holds %d documents, want %d", len(texts), documents)
	}
	for i, d := range texts {
		if want := fmt.Sprintf("DOC%02dMARK ", i); d.start != want || d.size < size-64 {
			t.Errorf("document %d: %d bytes starting %q, want %d starting %q", i, d.size, d.start, size, want)
		}
	}
	// The allowance: one document's text a few times over (its blob read
	// and opened, the text, its JSON, and this test's client decoding it
	// again, with the decoder's buffer), whatever the number of documents.
	// Holding every text once would pass it; the export held them all, and
	// their JSON, before it was written as it goes (+50 MiB for 16 documents).
	if limit := int64(16 * size); growth > limit || total <= 16*size {
		t.Errorf("the heap grew %.1f MiB during an export of %d MiB of documents, want under %.1f MiB (16 documents' worth)",
			float64(growth)/(1<<20), total>>20, float64(limit)/(1<<20))
	}
}

// exportedText is what the test keeps of a document's text: its start and
// its length.
type exportedText struct {
	start string
	size  int
}

// readExportDocuments reads the caller's export as it streams in, holding
// one document at a time, and returns what it keeps of each one's text.
func readExportDocuments(t *testing.T, e *env, token string) []exportedText {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "GET", e.srv.URL+"/user/me/export", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := e.client
	if client == nil {
		client = e.srv.Client()
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /user/me/export: %d %s", resp.StatusCode, body)
	}
	dec := json.NewDecoder(resp.Body)
	var texts []exportedText
	want := func(delim json.Delim) {
		t.Helper()
		if tok, err := dec.Token(); err != nil || tok != delim {
			t.Fatalf("the export: %v (%v), want %v", tok, err, delim)
		}
	}
	want('{')
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		if key != "knowledge_documents" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatalf("the export's %v: %v", key, err)
			}
			continue
		}
		want('[')
		for dec.More() {
			var d struct {
				Text string `json:"text"`
			}
			if err := dec.Decode(&d); err != nil {
				t.Fatal(err)
			}
			// The marker and the length: not the text, which is let go.
			texts = append(texts, exportedText{start: strings.Clone(d.Text[:min(len(d.Text), len("DOC00MARK "))]), size: len(d.Text)})
		}
		want(']')
	}
	want('}')
	return texts
}
