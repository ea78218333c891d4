package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
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
	// An env of its own: its read model gets rows no event made (the
	// creation of 200 examples of 780 KB through the API took a minute
	// under -race, and what is measured is their reading).
	e := newEnv(t, envConfig{})
	u := e.signUp(t)
	text := strings.Repeat("\x01", 65_000) // \u0001 in JSON, six bytes each: what one write could hold of two such texts
	const examples = 200
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO few_shot_examples
		(id, user_id, title, input_text, output_text, meta, is_active, created_at, updated_at, version)
		SELECT nextval('fewshot_ids'), $1, n::text, $2, $2, '{}', true, now(), now(), 1 FROM generate_series(1, $3) AS n`,
		u.ID, text, examples); err != nil {
		t.Fatal(err)
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
