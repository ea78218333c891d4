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
	"time"

	"lectern/commands"
	"lectern/ratelimit"
)

// GET /user/me/export writes a user's documents one at a time: the heap
// grows by a few documents' worth while it answers, however many the user
// has. Two users' exports, of 4 and of 20 documents, grow it by about as
// much; what the whole process allocates meanwhile (its live heap sets how
// much garbage waits for a collection) is in both, and cancels. Not
// parallel: the heap is the process's.
func TestExportMemoryStaysFlat(t *testing.T) {
	e := newEnv(t, envConfig{limits: commands.Limits{Uploads: ratelimit.Rate{N: 100, Per: time.Minute}}})
	const size = 900 << 10 // under the 1 MiB body cap
	few, many := e.signUp(t), e.signUp(t)
	upload := func(token string, documents int) {
		for i := range documents {
			marker := fmt.Sprintf("DOC%02dMARK ", i)
			text := marker + strings.Repeat("Cells divide and grow. ", size/len("Cells divide and grow. "))
			e.uploadDocument(t, token, fmt.Sprintf("Notes %d", i), text)
		}
	}
	upload(few.Access, 4)
	upload(many.Access, 20)

	// Garbage counts in the heap until it is collected: collect often, so
	// that what is measured is mostly what the export holds.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	export := func(token string, documents int) int64 {
		runtime.GC()
		before := heapInUse()
		h := sampleHeap()
		texts := readExportDocuments(t, e, token)
		growth := int64(h.end()) - int64(before)
		t.Logf("an export of %d documents, %.1f MiB of text: heap +%.1f MiB at most (from %.1f MiB)", documents,
			float64(documents*size)/(1<<20), float64(growth)/(1<<20), float64(before)/(1<<20))
		if len(texts) != documents {
			t.Fatalf("the export holds %d documents, want %d", len(texts), documents)
		}
		for i, d := range texts {
			if want := fmt.Sprintf("DOC%02dMARK ", i); d.start != want || d.size < size-64 {
				t.Errorf("document %d: %d bytes starting %q, want %d starting %q", i, d.size, d.start, size, want)
			}
		}
		return growth
	}
	small, large := export(few.Access, 4), export(many.Access, 20)
	// Sixteen documents more add nothing held at once: allow half of them
	// (noise). Holding them would add their texts and their JSON at least
	// (the export built whole: +50 MiB for 16 documents, against +8 MiB).
	if more, limit := large-small, int64(8*size); more > limit {
		t.Errorf("16 documents more grew the export's heap by %.1f MiB more (+%.1f against +%.1f MiB), want under %.1f MiB",
			float64(more)/(1<<20), float64(large)/(1<<20), float64(small)/(1<<20), float64(limit)/(1<<20))
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
	resp := e.open(t, "/user/me/export", token)
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

// A document listed for the export but gone by its turn (deleted between
// the two reads: here, a read-model row whose stream has no such document)
// is left out; the export is whole otherwise, not cut short. Not parallel:
// the row exists only while it runs, so that no other test sees it.
func TestExportLeavesOutWhatVanished(t *testing.T) {
	e := sharedEnv(t)
	u := e.signUp(t)
	e.uploadDocument(t, u.Access, "Kept", "KEPTMARK mitochondria make ATP.")
	vanished := 8_000_000_000_000 + time.Now().UnixNano()%1_000_000_000
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
		VALUES ($1, $2, 'Vanished', 'text/plain', 1, now(), now(), 1)`, vanished, u.ID); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = e.pool.Exec(context.Background(), `DELETE FROM knowledge_documents WHERE id = $1`, vanished)
	}()
	texts := readExportDocuments(t, e, u.Access)
	if len(texts) != 1 || texts[0].start != "KEPTMARK m" {
		t.Errorf("the export's documents: %+v, want the kept one alone", texts)
	}
}

// A session listed for the export whose stream holds no such session (as
// one deleted between the two reads) gives no sent messages; the export is
// whole otherwise. Not parallel, for the same reason as above.
func TestExportLeavesOutTheMessagesOfAVanishedSession(t *testing.T) {
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "KEPTMARK what is ATP?"})
	vanished := 8_000_000_000_000 + time.Now().UnixNano()%1_000_000_000
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO practice_sessions (id, user_id, knowledge_ids, title, created_at, updated_at, version)
		VALUES ($1, $2, '{}', 'Vanished', now(), now(), 1)`, vanished, c.student.ID); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = e.pool.Exec(context.Background(), `DELETE FROM practice_sessions WHERE id = $1`, vanished)
	}()
	res := e.do(t, "GET", "/user/me/export", nil, c.student.Access)
	wantStatus(t, res, http.StatusOK)
	var export struct {
		Sessions []struct {
			ID int64 `json:"id"`
		} `json:"practice_sessions"`
		Sent []struct {
			SessionID int64 `json:"session_id"`
			Messages  []struct {
				Content string `json:"content"`
			} `json:"messages"`
		} `json:"sent_messages"`
	}
	if err := json.Unmarshal(res.Body, &export); err != nil {
		t.Fatalf("%s: %v", res, err)
	}
	if len(export.Sent) != 1 || export.Sent[0].SessionID != turn.SessionID ||
		len(export.Sent[0].Messages) == 0 || !strings.Contains(export.Sent[0].Messages[len(export.Sent[0].Messages)-1].Content, "KEPTMARK") {
		t.Errorf("the export's sent messages: %+v, want the kept session's turn alone", export.Sent)
	}
	if len(export.Sessions) == 0 {
		t.Errorf("the export lists no session: %s", res)
	}
}

// open sends a GET of path with token and returns the answer with its body
// unread, for a test that reads it as it streams in (and closes it).
func (e *env) open(t *testing.T, path, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "GET", e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := e.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
