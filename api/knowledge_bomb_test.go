package api_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"lectern/knowledge"
	"lectern/knowledge/knowledgetest"
)

// wantNothingStored checks that u has no document, as the API and the
// database see it.
func wantNothingStored(t *testing.T, e *env, u user) {
	t.Helper()
	wantBody(t, e.do(t, "GET", documentsPath, nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
	var stored int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM knowledge_documents WHERE user_id = $1`, u.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("%d documents stored of refused uploads", stored)
	}
}

// An upload under the byte cap but over the chunk cap (LECTERN_MAX_CHUNKS)
// is refused with 413, a PDF or a text alike, and nothing of it is stored.
func TestUploadOverTheChunkCap(t *testing.T) {
	t.Parallel()
	const maxChunks = 3
	e := newEnv(t, envConfig{extract: knowledge.ExtractLimits{MaxChunks: maxChunks}})
	u := e.signUp(t)

	pdf := knowledgetest.BombPDF(8 * knowledge.ChunkSize)
	text, err := knowledge.PDFText(context.Background(), pdf, knowledge.ExtractLimits{})
	if err != nil {
		t.Fatal(err)
	}
	detail := func(n int) string {
		return fmt.Sprintf("The document would make %d chunks, over the %d allowed",
			knowledge.ChunkCount(n, knowledge.ChunkSize, knowledge.ChunkOverlap), maxChunks)
	}
	res := e.uploadFile(t, u.Access, "long.pdf", "application/pdf", pdf, "")
	wantDetail(t, res, http.StatusRequestEntityTooLarge, detail(len(text)))

	content := strings.Repeat("Cells divide by mitosis. ", 5*knowledge.ChunkSize/25)
	res = e.do(t, "POST", documentsPath, map[string]any{"title": "Long", "content": content}, u.Access)
	wantDetail(t, res, http.StatusRequestEntityTooLarge, detail(len(content)))

	wantNothingStored(t, e, u)
}

// heapSampler records the most heap memory in use while it runs, read
// every millisecond (runtime/metrics, which stops nothing).
type heapSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func heapInUse() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), peak: heapInUse()}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			h.peak = max(h.peak, heapInUse())
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// end stops the sampler and returns the peak it saw.
func (h *heapSampler) end() uint64 {
	close(h.stop)
	h.done.Wait()
	return max(h.peak, heapInUse())
}

// A decompression bomb uploaded over HTTP — in page content or in a font's
// ToUnicode map — is refused with 413 before anything is stored, and the
// server's heap grows by no more than the text cap plus 8 MiB meanwhile.
// Not parallel: no other test's requests run while the heap is sampled.
func TestUploadBombPeakMemory(t *testing.T) {
	e := sharedEnv(t)
	u := e.signUp(t)
	want := fmt.Sprintf("The PDF's pages decompress to more than %d bytes", 4*knowledge.DefaultMaxTextBytes)
	for _, b := range []struct {
		name string
		pdf  []byte
	}{
		{"content", knowledgetest.BombPDF(2 * contentBudget)},
		{"font", knowledgetest.FontBombPDF(2 * contentBudget)},
	} {
		runtime.GC()
		before := heapInUse()
		h := sampleHeap()
		start := time.Now()
		res := e.uploadFile(t, u.Access, b.name+".pdf", "application/pdf", b.pdf, "")
		took := time.Since(start)
		growth := int64(h.end()) - int64(before)
		wantDetail(t, res, http.StatusRequestEntityTooLarge, want)
		t.Logf("a %s bomb of %d bytes (%d MiB inflated): 413 in %s, heap +%.1f MiB at most",
			b.name, len(b.pdf), 2*contentBudget>>20, took.Round(time.Millisecond), float64(growth)/(1<<20))
		// The allowance: what the request itself holds (its body, parsed
		// twice over by the multipart reader), the inflaters' windows and
		// buffers, the text built before a refusal (up to the cap), and the
		// allocations of the service's background work meanwhile.
		if limit := int64(knowledge.DefaultMaxTextBytes) + 8<<20; growth > limit {
			t.Errorf("a %s bomb: the heap grew %d bytes, over the %d MiB text cap by more than 8 MiB",
				b.name, growth, knowledge.DefaultMaxTextBytes>>20)
		}
	}
	wantNothingStored(t, e, u)
}

// contentBudget is the content budget when none is set.
const contentBudget = 4 * knowledge.DefaultMaxTextBytes
