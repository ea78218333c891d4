package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/blobs"
	"lectern/eventstore"
	"lectern/knowledge"
	"lectern/knowledge/knowledgetest"
	"lectern/pgtest"
	"lectern/poll"
)

const documentsPath = "/user/document"

func documentPath(id int64) string { return fmt.Sprintf("%s/%d", documentsPath, id) }

// uploadDocument uploads a JSON document and expects it to succeed.
func (e *env) uploadDocument(t testing.TB, token, title, content string) response {
	t.Helper()
	res := e.do(t, "POST", documentsPath, map[string]any{"title": title, "content": content}, token)
	wantStatus(t, res, http.StatusCreated)
	return res
}

// uploadFile sends a multipart/form-data upload of one file.
func (e *env) uploadFile(t testing.TB, token, filename, contentType string, data []byte, title string) response {
	t.Helper()
	body, formType := uploadForm(t, filename, contentType, data, title)
	res := e.send(t, "POST", documentsPath, body, token, "Content-Type", formType)
	e.check(t, res)
	return res
}

// uploadForm is the multipart/form-data body of an upload of one file, and
// its Content-Type.
func uploadForm(t testing.TB, filename, contentType string, data []byte, title string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if title != "" {
		if err := mw.WriteField("title", title); err != nil {
			t.Fatal(err)
		}
	}
	if filename != "" {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, filename))
		if contentType != "" {
			h.Set("Content-Type", contentType)
		}
		part, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = part.Write(data)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// Many users uploading PDFs at once get past every per-user limit: the
// extractions (a core each, up to their timeout) are admitted a few at a
// time, and one that waits too long for its turn is a 503 to retry. Not
// parallel: it takes every extraction slot of the test binary.
func TestPDFReadingBusy(t *testing.T) {
	e := sharedEnv(t)
	u := e.signUp(t)
	knowledge.BusyExtractionInTests(t, 20*time.Millisecond)
	body, formType := uploadForm(t, "leaf.pdf", "application/pdf", knowledgetest.TinyPDF("Leaves"), "")
	req, err := http.NewRequestWithContext(context.Background(), "POST", e.srv.URL+documentsPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+u.Access)
	req.Header.Set("Content-Type", formType)
	res, err := e.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	if want := `{"detail":"Too many documents are being read at once; retry in a moment"}`; res.StatusCode != http.StatusServiceUnavailable ||
		strings.TrimSpace(string(got)) != want || res.Header.Get("Retry-After") != "1" {
		t.Errorf("a PDF upload with every extraction slot taken: %d %s (Retry-After %q), want 503 %s", res.StatusCode, got,
			res.Header.Get("Retry-After"), want)
	}
	if n := num(t, e.do(t, "GET", documentsPath, nil, u.Access), "total"); n != 0 {
		t.Errorf("%d documents recorded", n)
	}
}

// A user's PDFs are read one at a time, so that one user's files, each
// taking the whole extraction timeout, cannot hold every slot and keep the
// others' uploads waiting: a PDF whose turn does not come is a 429 to send
// again, nothing recorded; another user's PDF is read meanwhile.
func TestPDFReadOneAtATimePerUser(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, other := e.signUp(t), e.signUp(t)
	knowledge.HoldReaderInTests(t, u.ID, 20*time.Millisecond)
	upload := func(access string) response {
		t.Helper()
		return e.uploadFile(t, access, "leaf.pdf", "application/pdf", knowledgetest.TinyPDF("Leaves"), "")
	}
	res := upload(u.Access)
	wantBody(t, res, http.StatusTooManyRequests,
		`{"detail":"Your other documents are still being read (one at a time); send this one again once they are done"}`)
	if got := res.Header.Get("Retry-After"); got != "15" {
		t.Errorf("Retry-After %q, want 15", got)
	}
	if n := num(t, e.do(t, "GET", documentsPath, nil, u.Access), "total"); n != 0 {
		t.Errorf("%d documents recorded", n)
	}
	wantStatus(t, upload(other.Access), http.StatusCreated)
}

const cellText = "Mitochondria are the powerhouse of the cell. They make ATP through cellular respiration."

func TestUploadDocument(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	res := e.uploadDocument(t, u.Access, "Biology notes", cellText)
	wantHeader(t, res, "X-Projection-Pending", "")
	id := num(t, res, "knowledge_id")
	stamp := timestamp(t, res, "created_at").Format(wireTime)
	want := fmt.Sprintf(`{"knowledge_id":%d,"user_id":%d,"title":"Biology notes","content_type":"text/plain","size":%d,"chunks":1,"created_at":%q,"updated_at":%q}`,
		id, u.ID, len(cellText), stamp, stamp)
	wantBody(t, res, http.StatusCreated, want)
	wantBody(t, e.do(t, "GET", documentPath(id), nil, u.Access), http.StatusOK, want)
	wantBody(t, e.do(t, "GET", documentsPath, nil, u.Access), http.StatusOK, `{"items":[`+want+`],"total":1,"page":1,"size":50}`)

	// The default search settings (DESIGN §6).
	wantBody(t, e.do(t, "GET", documentPath(id)+"/settings/search", nil, u.Access), http.StatusOK,
		fmt.Sprintf(`{"knowledge_id":%d,"top_k":5,"min_score":"0.0","score_type":"cosine_similarity","reranker_enabled":false,"reranker_model":null,"reranker_top_n":3,"created_at":%q,"updated_at":%q}`,
			id, stamp, stamp))

	// The event carries the text's address; the text is a blob of the
	// owner's, and chunks are derived.
	evs := e.streamEvents(t, fmt.Sprintf("knowledge-%d", id))
	if diff := cmp.Diff([]string{"knowledge.document_uploaded"}, eventTypes(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	sum := sha256.Sum256([]byte(cellText))
	p := payload(t, evs[0])
	if _, inline := p["content"]; inline || p["title"] != "Biology notes" || p["content_hash"] != hex.EncodeToString(sum[:]) ||
		p["content_size"] != jsonNum(int64(len(cellText))) {
		t.Errorf("payload %v: want the text's hash and size, and no text", p)
	}
	if got := e.blob(t, u.ID, hex.EncodeToString(sum[:]), len(cellText)); got != cellText {
		t.Errorf("the document's blob holds %q, want %q", got, cellText)
	}

	// Validation, authentication and ownership.
	res = e.do(t, "POST", documentsPath, map[string]any{"title": strings.Repeat("x", 201)}, u.Access)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if !strings.Contains(string(res.Body), `"string_too_long"`) || !strings.Contains(string(res.Body), `"loc":["body","content"]`) {
		t.Errorf("%s: want string_too_long at title and missing content", res)
	}
	wantStatus(t, e.do(t, "POST", documentsPath, map[string]any{"title": "t", "content": "  "}, u.Access), http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "POST", documentsPath, nil, u.Access), http.StatusUnprocessableEntity)
	wantDetail(t, e.do(t, "POST", documentsPath, map[string]any{"title": "t", "content": "c"}, ""), http.StatusUnauthorized, "Not authenticated")
	wantDetail(t, e.do(t, "GET", documentsPath, nil, ""), http.StatusUnauthorized, "Not authenticated")
	other := e.signUp(t)
	for _, path := range []string{documentPath(id), documentPath(id) + "/settings/search"} {
		wantStatus(t, e.do(t, "GET", path, nil, other.Access), http.StatusNotFound)
	}
	wantStatus(t, e.do(t, "POST", documentPath(id)+"/search", map[string]any{"query": "cell"}, other.Access), http.StatusNotFound)
	wantBody(t, e.do(t, "GET", documentsPath, nil, other.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
	wantStatus(t, e.do(t, "GET", documentPath(0), nil, u.Access), http.StatusUnprocessableEntity)
}

func TestUploadFiles(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	md := "# Tides\n\nThe **moon** pulls the oceans, making tides."
	res := e.uploadFile(t, u.Access, "tides.md", "", []byte(md), "")
	wantStatus(t, res, http.StatusCreated)
	if str(t, res, "content_type") != "text/markdown" || str(t, res, "title") != "tides.md" || num(t, res, "size") != int64(len(md)) {
		t.Errorf("%s: a Markdown file named tides.md", res)
	}

	pdf := knowledgetest.TinyPDF("Photosynthesis turns light into sugar")
	res = e.uploadFile(t, u.Access, "leaf.pdf", "application/pdf", pdf, "Leaves")
	wantStatus(t, res, http.StatusCreated)
	if str(t, res, "content_type") != "application/pdf" || str(t, res, "title") != "Leaves" || num(t, res, "chunks") != 1 {
		t.Errorf("%s: a PDF titled Leaves", res)
	}
	found := e.do(t, "POST", documentPath(num(t, res, "knowledge_id"))+"/search", map[string]any{"query": "photosynthesis"}, u.Access)
	wantStatus(t, found, http.StatusOK)
	if !strings.Contains(string(found.Body), "Photosynthesis turns light into sugar") {
		t.Errorf("%s: the PDF's text is searchable", found)
	}

	res = e.uploadFile(t, u.Access, "", "", nil, "no file")
	wantBody(t, res, http.StatusUnprocessableEntity,
		`{"detail":[{"type":"missing","loc":["body","file"],"msg":"Field required","input":{"title":"no file"}}]}`)
	res = e.uploadFile(t, u.Access, "photo.png", "image/png", []byte("\x89PNG"), "")
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if !strings.Contains(string(res.Body), `"type":"value_error","loc":["body","file"]`) {
		t.Errorf("%s: want value_error at file", res)
	}
	res = e.uploadFile(t, u.Access, "broken.pdf", "application/pdf", []byte("%PDF-1.4 nothing"), "")
	wantStatus(t, res, http.StatusUnprocessableEntity)

	// A title that is not UTF-8 is refused, as in a JSON body, not mended.
	res = e.uploadFile(t, u.Access, "notes.txt", "text/plain", []byte("The moon pulls."), "ab\xffcd")
	wantBody(t, res, http.StatusUnprocessableEntity,
		`{"detail":[{"type":"string_unicode","loc":["body","title"],"msg":"Input should be a valid string, unable to parse raw data as a unicode string","input":"ab`+"\ufffd"+`cd"}]}`)
	// A byte order mark is no text: a file of one alone is blank.
	res = e.uploadFile(t, u.Access, "bom.txt", "text/plain", []byte("\xef\xbb\xbf"), "")
	wantStatus(t, res, http.StatusUnprocessableEntity)
	res = e.uploadFile(t, u.Access, "bom.txt", "text/plain", []byte("\xef\xbb\xbfThe moon pulls the tides."), "")
	wantStatus(t, res, http.StatusCreated)
}

func TestKnowledgeSearchSettings(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	id := num(t, e.uploadDocument(t, u.Access, "Notes", cellText), "knowledge_id")
	path := documentPath(id) + "/settings/search"

	res := e.do(t, "PATCH", path, map[string]any{"top_k": 10, "min_score": 0.25, "reranker_enabled": true,
		"reranker_model": "lexical", "reranker_top_n": 4}, u.Access)
	wantStatus(t, res, http.StatusOK)
	wantHeader(t, res, "X-Projection-Pending", "")
	created := timestamp(t, res, "created_at").Format(wireTime)
	updated := timestamp(t, res, "updated_at").Format(wireTime)
	want := fmt.Sprintf(`{"knowledge_id":%d,"top_k":10,"min_score":"0.25","score_type":"cosine_similarity","reranker_enabled":true,"reranker_model":"lexical","reranker_top_n":4,"created_at":%q,"updated_at":%q}`,
		id, created, updated)
	wantBody(t, res, http.StatusOK, want)
	wantBody(t, e.do(t, "GET", path, nil, u.Access), http.StatusOK, want)

	// Omitted fields keep their value; null resets to the default.
	res = e.do(t, "PATCH", path, map[string]any{"min_score": nil, "reranker_model": nil, "top_k": "7"}, u.Access)
	wantStatus(t, res, http.StatusOK)
	if str(t, res, "min_score") != "0.0" || num(t, res, "top_k") != 7 || field(t, res, "reranker_model") != nil ||
		num(t, res, "reranker_top_n") != 4 || field(t, res, "reranker_enabled") != true {
		t.Errorf("%s: min_score and reranker_model reset, top_k 7, the rest kept", res)
	}
	// Nothing changes: no event.
	before := len(e.streamEvents(t, fmt.Sprintf("knowledge-%d", id)))
	wantStatus(t, e.do(t, "PATCH", path, map[string]any{"top_k": 7}, u.Access), http.StatusOK)
	if after := len(e.streamEvents(t, fmt.Sprintf("knowledge-%d", id))); after != before {
		t.Errorf("a PATCH that changes nothing appended %d events", after-before)
	}

	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"min_score": 1.5},
			`{"detail":[{"type":"less_than_equal","loc":["body","min_score"],"msg":"Input should be less than or equal to 1","input":1.5,"ctx":{"le":1}}]}`},
		{map[string]any{"score_type": "dot"},
			`{"detail":[{"type":"literal_error","loc":["body","score_type"],"msg":"Input should be 'cosine_similarity'","input":"dot","ctx":{"expected":"'cosine_similarity'"}}]}`},
		{map[string]any{"top_k": 0},
			`{"detail":[{"type":"greater_than_equal","loc":["body","top_k"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}]}`},
		// Past an INT column: once accepted, it stopped the knowledge projection for everyone.
		{map[string]any{"top_k": 2147483648},
			`{"detail":[{"type":"less_than_equal","loc":["body","top_k"],"msg":"Input should be less than or equal to 100","input":2147483648,"ctx":{"le":100}}]}`},
		{map[string]any{"top_k": 101},
			`{"detail":[{"type":"less_than_equal","loc":["body","top_k"],"msg":"Input should be less than or equal to 100","input":101,"ctx":{"le":100}}]}`},
		{map[string]any{"reranker_top_n": 2147483648},
			`{"detail":[{"type":"less_than_equal","loc":["body","reranker_top_n"],"msg":"Input should be less than or equal to 100","input":2147483648,"ctx":{"le":100}}]}`},
		{map[string]any{"reranker_top_n": 8},
			`{"detail":[{"type":"value_error","loc":["body","reranker_top_n"],"msg":"Value error, reranker_top_n (8) must be less than or equal to top_k (7)","input":{"reranker_top_n":8,"top_k":7},"ctx":{"error":"reranker_top_n (8) must be less than or equal to top_k (7)"}}]}`},
		{map[string]any{"reranker_enabled": "maybe"},
			`{"detail":[{"type":"bool_parsing","loc":["body","reranker_enabled"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
	} {
		wantBody(t, e.do(t, "PATCH", path, tc.body, u.Access), http.StatusUnprocessableEntity, tc.want)
	}
	// The bound itself is taken, and read back once projected.
	res = e.do(t, "PATCH", path, map[string]any{"top_k": 100, "reranker_top_n": 100}, u.Access)
	wantStatus(t, res, http.StatusOK)
	wantHeader(t, res, "X-Projection-Pending", "")
	wantBody(t, e.do(t, "GET", path, nil, u.Access), http.StatusOK, string(res.Body))
	other := e.signUp(t)
	wantDetail(t, e.do(t, "PATCH", path, map[string]any{"top_k": 3}, other.Access), http.StatusNotFound, "Knowledge document not found")
	wantDetail(t, e.do(t, "PATCH", path, map[string]any{"top_k": 3}, ""), http.StatusUnauthorized, "Not authenticated")
}

func TestSearchDocument(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "Paragraph %d is about rivers, lakes and the water cycle of the planet. ", i)
	}
	b.WriteString("Volcanoes erupt molten lava from the mantle. ")
	for i := range 40 {
		fmt.Fprintf(&b, "Paragraph %d is about forests, trees and the leaves they grow every spring. ", i+40)
	}
	res := e.uploadDocument(t, u.Access, "Earth", b.String())
	id, chunks := num(t, res, "knowledge_id"), num(t, res, "chunks")
	if chunks < 5 {
		t.Fatalf("%s: want several chunks", res)
	}
	search := func(query string) []map[string]any {
		t.Helper()
		res := e.do(t, "POST", documentPath(id)+"/search", map[string]any{"query": query}, u.Access)
		wantStatus(t, res, http.StatusOK)
		if str(t, res, "query") != query {
			t.Errorf("%s: query not echoed", res)
		}
		var out []map[string]any
		for _, r := range field(t, res, "results").([]any) {
			out = append(out, r.(map[string]any))
		}
		return out
	}
	results := search("volcanoes, lava and the planet")
	if len(results) != 5 {
		t.Fatalf("%d results, want top_k 5", len(results))
	}
	if !strings.Contains(results[0]["text"].(string), "Volcanoes erupt") || results[0]["rank"] != json.Number("1") {
		t.Errorf("the best result %v is not the volcano chunk", results[0])
	}
	for i := 1; i < len(results); i++ {
		prev, _ := results[i-1]["score"].(json.Number).Float64()
		cur, _ := results[i]["score"].(json.Number).Float64()
		if cur > prev {
			t.Errorf("results not best first: %v then %v", prev, cur)
		}
	}
	// min_score keeps only close matches; the reranker keeps reranker_top_n.
	wantStatus(t, e.do(t, "PATCH", documentPath(id)+"/settings/search", map[string]any{"min_score": "0.2"}, u.Access), http.StatusOK)
	for _, r := range search("volcanoes, lava and the planet") {
		if s, _ := r["score"].(json.Number).Float64(); s < 0.2 {
			t.Errorf("score %v under min_score 0.2", s)
		}
	}
	wantStatus(t, e.do(t, "PATCH", documentPath(id)+"/settings/search", map[string]any{"min_score": 0, "reranker_enabled": true, "reranker_top_n": 2}, u.Access), http.StatusOK)
	if got := search("forests leaves"); len(got) != 2 {
		t.Errorf("%d results, want reranker_top_n 2", len(got))
	}
	res = e.do(t, "POST", documentPath(id)+"/search", map[string]any{}, u.Access)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "POST", documentPath(id+1000000)+"/search", map[string]any{"query": "x"}, u.Access), http.StatusNotFound)
}

// awaitJob polls a reindex job until it ends.
func (e *env) awaitJob(t testing.TB, token, path string) response {
	t.Helper()
	var res response
	poll.Until(10*time.Second, func() bool {
		res = e.do(t, "GET", path, nil, token)
		wantStatus(t, res, http.StatusOK)
		s := str(t, res, "status")
		return s == "completed" || s == "failed"
	})
	return res
}

func TestReindex(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	doc := e.uploadDocument(t, u.Access, "Notes", strings.Repeat("Cells divide by mitosis and meiosis. ", 100))
	id, chunks := num(t, doc, "knowledge_id"), num(t, doc, "chunks")

	res := e.do(t, "POST", documentPath(id)+"/reindex", nil, u.Access)
	wantStatus(t, res, http.StatusAccepted)
	job := num(t, res, "job_id")
	requested := timestamp(t, res, "requested_at").Format(wireTime)
	wantBody(t, res, http.StatusAccepted, fmt.Sprintf(`{"job_id":%d,"knowledge_id":%d,"status":"queued","requested_at":%q,"started_at":null,"finished_at":null,"chunks_total":0,"chunks_done":0,"error":null}`,
		job, id, requested))

	jobPath := fmt.Sprintf("%s/reindex/%d", documentPath(id), job)
	done := e.awaitJob(t, u.Access, jobPath)
	if str(t, done, "status") != "completed" || num(t, done, "chunks_total") != chunks || num(t, done, "chunks_done") != chunks ||
		field(t, done, "error") != nil {
		t.Fatalf("%s: want completed with %d chunks", done, chunks)
	}
	started, finished := timestamp(t, done, "started_at"), timestamp(t, done, "finished_at")
	if started.Before(timestamp(t, res, "requested_at")) || finished.Before(started) {
		t.Errorf("%s: requested ≤ started ≤ finished", done)
	}
	wantBody(t, e.do(t, "GET", documentPath(id), nil, u.Access), http.StatusOK, string(mustJSON(t, doc)))
	evs := e.streamEvents(t, fmt.Sprintf("knowledge-%d", id))
	if diff := cmp.Diff([]string{"knowledge.document_uploaded", "knowledge.reindex_requested", "knowledge.reindex_finished"}, eventTypes(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	other := e.signUp(t)
	wantStatus(t, e.do(t, "POST", documentPath(id)+"/reindex", nil, other.Access), http.StatusNotFound)
	wantStatus(t, e.do(t, "GET", jobPath, nil, other.Access), http.StatusNotFound)
	wantStatus(t, e.do(t, "GET", fmt.Sprintf("%s/reindex/%d", documentPath(id), job+100000), nil, u.Access), http.StatusNotFound)
	wantDetail(t, e.do(t, "POST", documentPath(id)+"/reindex", nil, ""), http.StatusUnauthorized, "Not authenticated")
}

func mustJSON(t testing.TB, res response) []byte {
	t.Helper()
	return res.Body
}

// A job a stopped process left running (its lease ran out) is taken up again.
func TestReindexResumesAnAbandonedJob(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	doc := e.uploadDocument(t, u.Access, "Notes", cellText)
	id := num(t, doc, "knowledge_id")
	var job int64
	if err := e.pool.QueryRow(t.Context(), `SELECT nextval('knowledge_job_ids')`).Scan(&job); err != nil {
		t.Fatal(err)
	}
	// The request the job came with, recorded first: a job requested an
	// hour ago whose request a worker does not find is dropped (see
	// TestReindexWaitsForItsRequest), and the worker may look in between.
	e.requestReindex(t, id, job)
	if _, err := e.pool.Exec(t.Context(), `
		INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, chunks_total, chunks_done, lease_until)
		VALUES ($1, $2, $3, 'running', now() - interval '1 hour', now() - interval '1 hour', 1, 0, now() - interval '1 minute')`,
		job, id, u.ID); err != nil {
		t.Fatal(err)
	}
	done := e.awaitJob(t, u.Access, fmt.Sprintf("%s/reindex/%d", documentPath(id), job))
	if str(t, done, "status") != "completed" || num(t, done, "chunks_done") != 1 {
		t.Errorf("%s: the abandoned job is resumed and completed", done)
	}
}

// requestReindex appends the request of job for document id, as
// RequestReindex does after writing the job.
func (e *env) requestReindex(t testing.TB, id, job int64) {
	t.Helper()
	stream := fmt.Sprintf("knowledge-%d", id)
	if _, err := e.events(t).Append(context.Background(), stream, eventstore.Exact(int64(len(e.streamEvents(t, stream)))), []eventstore.EventData{{
		ID: uuid.New(), Type: "knowledge.reindex_requested", SchemaVersion: 1,
		Data: json.RawMessage(fmt.Sprintf(`{"knowledge_id":%d,"job_id":%d}`, id, job)), RecordedAt: time.Now().UTC(),
	}}); err != nil {
		t.Fatal(err)
	}
}

// A job runs only once its request is recorded: a job whose request is
// still being appended waits for it, and one whose request never was
// (its append failed, and its process stopped before it withdrew the job)
// is dropped after ten minutes, never run.
func TestReindexWaitsForItsRequest(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	id := num(t, e.uploadDocument(t, u.Access, "Notes", cellText), "knowledge_id")
	job := func(requestedAt string) int64 {
		t.Helper()
		var job int64
		if err := e.pool.QueryRow(t.Context(), `
			INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at)
			VALUES (nextval('knowledge_job_ids'), $1, $2, 'queued', now() - $3::interval) RETURNING job_id`, id, u.ID, requestedAt).Scan(&job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	exists := func(job int64) bool {
		var n int
		if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM knowledge_reindex_jobs WHERE job_id = $1`, job).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	lost := job("20 minutes")
	poll.Must(t, 10*time.Second, "the job whose request was never recorded is dropped", func() bool { return !exists(lost) })

	// A job still waiting for its request holds up no other: a reindex
	// requested after it runs meanwhile.
	waiting := job("0 seconds")
	other := num(t, e.uploadDocument(t, u.Access, "Other notes", cellText), "knowledge_id")
	res := e.do(t, "POST", documentPath(other)+"/reindex", nil, u.Access)
	wantStatus(t, res, http.StatusAccepted)
	if done := e.awaitJob(t, u.Access, fmt.Sprintf("%s/reindex/%d", documentPath(other), num(t, res, "job_id"))); str(t, done, "status") != "completed" {
		t.Errorf("%s: a job requested after one that waits runs meanwhile", done)
	}
	e.requestReindex(t, id, waiting)
	done := e.awaitJob(t, u.Access, fmt.Sprintf("%s/reindex/%d", documentPath(id), waiting))
	if str(t, done, "status") != "completed" {
		t.Errorf("%s: the job runs once its request is recorded", done)
	}
	if diff := cmp.Diff([]string{"knowledge.document_uploaded", "knowledge.reindex_requested", "knowledge.reindex_finished"},
		eventTypes(e.streamEvents(t, fmt.Sprintf("knowledge-%d", id)))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSessionGroundedInDocument(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	doc := e.uploadDocument(t, c.student.Access, "Cells", cellText)
	id := num(t, doc, "knowledge_id")
	noise := e.uploadDocument(t, c.student.Access, "Noise", "Completely unrelated words about sailing boats.")
	wantStatus(t, e.do(t, "PATCH", documentPath(num(t, noise, "knowledge_id"))+"/settings/search",
		map[string]any{"min_score": 0.5}, c.student.Access), http.StatusOK)

	prompt := "What do mitochondria make?"
	_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": prompt,
		"knowledge_ids": []int64{id, num(t, noise, "knowledge_id")}})
	evs := e.streamEvents(t, fmt.Sprintf("session-%d", turn.SessionID))
	var recorded struct {
		Messages []struct{ Role, Content string } `json:"messages"`
		Passages []struct {
			KnowledgeID int64   `json:"knowledge_id"`
			ChunkID     int64   `json:"chunk_id"`
			Score       float64 `json:"score"`
			Rank        int     `json:"rank"`
		} `json:"passages"`
	}
	if err := json.Unmarshal(evs[1].Data, &recorded); err != nil {
		t.Fatal(err)
	}
	want := []struct{ Role, Content string }{
		{"system", "Use these passages:\n[1] " + cellText},
		{"user", prompt},
	}
	if diff := cmp.Diff(want, recorded.Messages); diff != "" {
		t.Errorf("the messages the model received (-want +got):\n%s", diff)
	}
	if len(recorded.Passages) != 1 || recorded.Passages[0].KnowledgeID != id || recorded.Passages[0].ChunkID < 1 ||
		recorded.Passages[0].Score <= 0 || recorded.Passages[0].Rank != 1 {
		t.Errorf("passages %+v: want the cell chunk (the noise document's min_score drops its chunk)", recorded.Passages)
	}

	// A chat retrieves again for the new prompt.
	res := e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "cellular respiration"}, c.student.Access)
	wantStatus(t, res, http.StatusOK)
	evs = e.streamEvents(t, fmt.Sprintf("session-%d", turn.SessionID))
	if !strings.Contains(string(evs[2].Data), `"passages":[{"knowledge_id":`+fmt.Sprint(id)) {
		t.Errorf("the chat turn records no passage: %s", evs[2].Data)
	}

	// Another user's document, or one named twice, is refused at its index.
	other := e.signUp(t)
	theirs := num(t, e.uploadDocument(t, other.Access, "Theirs", "secret"), "knowledge_id")
	res = e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "hi", "knowledge_ids": []int64{theirs}}, c.student.Access)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if !strings.Contains(string(res.Body), `"loc":["body","knowledge_ids",0]`) {
		t.Errorf("%s: want an error at knowledge_ids[0]", res)
	}
}

// A decompression bomb (a 25 KB PDF of 25 MB of text) is refused with 413
// and nothing of it is stored; so is a text over the caps.
func TestUploadBombRefused(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	res := e.uploadFile(t, u.Access, "bomb.pdf", "application/pdf", knowledgetest.BombPDF(25<<20), "")
	wantDetail(t, res, http.StatusRequestEntityTooLarge, "The PDF's pages decompress to more than 8388608 bytes")
	// Text under the content cap but over the text cap.
	res = e.uploadFile(t, u.Access, "big.pdf", "application/pdf", knowledgetest.BombPDF(3<<20), "")
	wantDetail(t, res, http.StatusRequestEntityTooLarge, "The document's text is over 2097152 bytes")
	wantBody(t, e.do(t, "GET", documentsPath, nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
	var events int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM knowledge_documents WHERE user_id = $1`, u.ID).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 0 {
		t.Errorf("%d documents stored of refused uploads", events)
	}
}

// A document whose event would exceed EventStoreDB's 1 MiB append is
// refused with 413 on either store, and nothing of it is stored: a text full
// of line separators (U+2028: three bytes in the request, escaped to six in
// the event) fits the 1 MiB body but not the append.
// A document's text is a blob, not part of its event: a text whose event
// would have passed EventStoreDB's 1 MiB append limit (JSON escapes \u2028
// in six bytes) is recorded, on either store, in an event of a few hundred
// bytes, and a reindex reads it back.
func TestUploadBeyondTheAppendLimit(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	// Sent as it is: json.Marshal would escape the body past its 1 MiB limit.
	res := e.do(t, "POST", documentsPath, `{"title":"Lines","content":"`+strings.Repeat("x\u2028", 160000)+`"}`, u.Access)
	wantStatus(t, res, http.StatusCreated)
	id, chunks := num(t, res, "knowledge_id"), num(t, res, "chunks")
	evs := e.streamEvents(t, fmt.Sprintf("knowledge-%d", id))
	if len(evs) != 1 || len(evs[0].Data) > 1024 {
		t.Fatalf("%d events, the first of %d bytes: want one small event", len(evs), len(evs[0].Data))
	}
	job := num(t, e.do(t, "POST", documentPath(id)+"/reindex", nil, u.Access), "job_id")
	done := e.awaitJob(t, u.Access, fmt.Sprintf("%s/reindex/%d", documentPath(id), job))
	if str(t, done, "status") != "completed" || num(t, done, "chunks_total") != chunks {
		t.Errorf("%s: want the reindex to complete with %d chunks, from the blob", done, chunks)
	}
}

// blob is the text stored for owner under hash, opened with the owner's key.
func (e *env) blob(t testing.TB, owner int64, hash string, size int) string {
	t.Helper()
	content, err := blobs.New(e.pool, e.keys(t)).Get(context.Background(), owner, blobs.Ref{Hash: hash, Size: int64(size)})
	if err != nil {
		t.Fatalf("the blob %s of user %d: %v", hash, owner, err)
	}
	return string(content)
}

// A document uploaded before blobs has its text in its event (schema
// version 1): it is listed, and a reindex reads its text from the event.
func TestDocumentFromBeforeBlobs(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	var id int64
	if err := e.pool.QueryRow(context.Background(), `SELECT nextval('knowledge_ids')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	data := fmt.Sprintf(`{"knowledge_id":%d,"user_id":%d,"title":"Old notes","content_type":"text/plain","size":%d,"content":%q,`+
		`"settings":{"top_k":5,"min_score":"0.0","score_type":"cosine_similarity","reranker_enabled":false,"reranker_model":null,"reranker_top_n":3}}`,
		id, u.ID, len(cellText), cellText)
	if _, err := e.events(t).Append(context.Background(), fmt.Sprintf("knowledge-%d", id), eventstore.NoStream, []eventstore.EventData{{
		ID: uuid.New(), Type: "knowledge.document_uploaded", SchemaVersion: 1, Data: json.RawMessage(data), RecordedAt: time.Now().UTC(),
	}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(pgtest.ConsistencyWait, func() bool {
		return e.do(t, "GET", documentPath(id), nil, u.Access).Status == http.StatusOK
	})
	res := e.do(t, "POST", documentPath(id)+"/reindex", nil, u.Access)
	wantStatus(t, res, http.StatusAccepted)
	done := e.awaitJob(t, u.Access, fmt.Sprintf("%s/reindex/%d", documentPath(id), num(t, res, "job_id")))
	if str(t, done, "status") != "completed" || num(t, done, "chunks_total") != 1 {
		t.Errorf("%s: want the reindex to complete with the event's text in 1 chunk", done)
	}
	hits := e.do(t, "POST", documentPath(id)+"/search", map[string]any{"query": "powerhouse of the cell"}, u.Access)
	wantStatus(t, hits, http.StatusOK)
	if !strings.Contains(string(hits.Body), "Mitochondria") {
		t.Errorf("%s: want the old document's text found", hits)
	}
}

// flakyEmbedder is the offline embedder, failing while down is set.
type flakyEmbedder struct {
	down    atomic.Bool
	offline knowledge.Embedder
}

func (f *flakyEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if f.down.Load() {
		return nil, errors.New("embedder: 503 Service Unavailable")
	}
	return f.offline.Embed(ctx, texts)
}

// An upload whose indexing fails (the embedder out of reach) has still
// recorded the document: it answers 201, once, with no chunks yet, and a
// reindex job (here the package's worker) indexes it afterwards.
func TestUploadOutlivesTheEmbedder(t *testing.T) {
	t.Parallel()
	embedder := &flakyEmbedder{offline: knowledge.NewOffline()}
	embedder.down.Store(true)
	e := newEnv(t, envConfig{embedder: embedder})
	u := e.signUp(t)
	res := e.uploadDocument(t, u.Access, "Cells", cellText)
	if n := num(t, res, "chunks"); n != 0 {
		t.Errorf("%s: %d chunks, want 0 until the document is indexed", res, n)
	}
	id := num(t, res, "knowledge_id")
	// The list shows the document as its own GET does. The package's worker
	// may index it at any moment, so the list is compared with two reads of
	// the document, one on either side of it, that agree.
	poll.Must(t, 20*time.Second, "the document holds still across a list read", func() bool {
		before := e.do(t, "GET", documentPath(id), nil, u.Access).Body
		list := e.do(t, "GET", documentsPath, nil, u.Access)
		if !bytes.Equal(before, e.do(t, "GET", documentPath(id), nil, u.Access).Body) {
			return false
		}
		wantBody(t, list, http.StatusOK, `{"items":[`+string(before)+`],"total":1,"page":1,"size":50}`)
		return true
	})
	// (The package's worker, whose embedder answers, may have finished the
	// job already.)
	if got := eventTypes(e.streamEvents(t, fmt.Sprintf("knowledge-%d", id))); len(got) < 2 ||
		!slices.Equal(got[:2], []string{"knowledge.document_uploaded", "knowledge.reindex_requested"}) {
		t.Errorf("the document's events: %v", got)
	}
	poll.Must(t, 20*time.Second, "the reindex job indexes the document", func() bool {
		return num(t, e.do(t, "GET", documentPath(id), nil, u.Access), "chunks") > 0
	})
}

// hangingEmbedder is the offline embedder, hanging until its caller gives
// up while down is set: an embedder that takes the connection and never
// answers.
type hangingEmbedder struct {
	down    atomic.Bool
	offline knowledge.Embedder
}

func (h *hangingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if h.down.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.offline.Embed(ctx, texts)
}

// An upload whose indexing outlasts the write's bound (an embedder that
// never answers) has recorded the document all the same: the reindex job
// that takes its indexing over is queued even though the bound has passed,
// and indexes it once the embedder answers.
func TestUploadOutlivesAHangingEmbedder(t *testing.T) {
	t.Parallel()
	embedder := &hangingEmbedder{offline: knowledge.NewOffline()}
	embedder.down.Store(true)
	e := newEnv(t, envConfig{embedder: embedder, writeWait: time.Second})
	u := e.signUp(t)
	res := e.uploadDocument(t, u.Access, "Cells", cellText)
	if n := num(t, res, "chunks"); n != 0 {
		t.Errorf("%s: %d chunks, want 0 until the document is indexed", res, n)
	}
	id := num(t, res, "knowledge_id")
	// (The package's worker, whose embedder answers, may have finished the
	// job already.)
	if got := eventTypes(e.streamEvents(t, fmt.Sprintf("knowledge-%d", id))); len(got) < 2 ||
		!slices.Equal(got[:2], []string{"knowledge.document_uploaded", "knowledge.reindex_requested"}) {
		t.Errorf("the document's events: %v", got)
	}
	embedder.down.Store(false)
	poll.Must(t, 20*time.Second, "the reindex job indexes the document", func() bool {
		return num(t, e.do(t, "GET", documentPath(id), nil, u.Access), "chunks") > 0
	})
}
