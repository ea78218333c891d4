package api_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// A page of a list is written item by item as it goes out, never held
// whole as JSON: a user who fills the largest page (200 few-shot examples)
// with texts that JSON escapes to six bytes a character (control
// characters; '<', '>' and '&' are not escaped at all) gets an answer of
// about 156 MB, and the server's heap grows by about the rows it read, not
// by the answer. Marshalled whole, it grew by 462 MB. Not parallel: the heap
// is the process's.
func TestAListPageIsNotHeldWhole(t *testing.T) {
	e := sharedEnv(t)
	u := e.signUp(t)
	text := strings.Repeat("\x01", 65_000) // \u0001 in JSON: two of them, 780 KB, fit one write
	const examples = 200
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				res := e.do(t, "POST", "/user/practice/few-shot-examples",
					map[string]any{"title": fmt.Sprint(i), "input_text": text, "output_text": text}, u.Access)
				wantStatus(t, res, http.StatusCreated)
			}
		})
	}
	for i := range examples {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// get reads a page as it streams in, and returns its Content-Length
	// (-1: chunked) and how many bytes came.
	get := func(token string, size int) (length, n int64) {
		res := e.open(t, fmt.Sprintf("/user/practice/few-shot-examples?size=%d", size), token)
		defer res.Body.Close()
		n, err := io.Copy(io.Discard, res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET a page of %d: %d, %d bytes, %v", size, res.StatusCode, n, err)
		}
		return res.ContentLength, n
	}
	// A page of usual size goes out with its length, in one write.
	other := e.signUp(t)
	wantStatus(t, e.do(t, "POST", "/user/practice/few-shot-examples",
		map[string]any{"title": "t", "input_text": "2+2?", "output_text": "4 <&>"}, other.Access), http.StatusCreated)
	if length, n := get(other.Access, 50); length != n || n == 0 {
		t.Errorf("a page of one short example: Content-Length %d, %d bytes read", length, n)
	}

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	before := heapInUse()
	h := sampleHeap()
	length, n := get(u.Access, examples)
	growth := int64(h.end()) - int64(before)
	t.Logf("a page of %d examples: %.1f MB answered (Content-Length %d), heap +%.1f MiB at most", examples,
		float64(n)/1e6, length, float64(growth)/(1<<20))
	if want := int64(examples * 2 * len(text) * 6); n < want {
		t.Fatalf("the page answered %d bytes, want over %d: the texts did not come back", n, want)
	}
	if growth > n/2 {
		t.Errorf("answering %d bytes grew the heap by %d: the answer was held whole", n, growth)
	}
}
