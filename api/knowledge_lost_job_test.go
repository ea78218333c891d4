package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/knowledge"
	"lectern/pgtest"
	"lectern/poll"
)

// refuseReindexJobs makes knowledge_reindex_jobs, in the test's own
// database, refuse every insert: no reindex job can be queued. Each refusal
// draws from the sequence job_refusals, which the failed statement does not
// undo, so the test can tell the refusal happened.
var refuseReindexJobs = []string{
	`CREATE SEQUENCE job_refusals`,
	`CREATE FUNCTION refuse_reindex_job() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM nextval('job_refusals');
		RAISE EXCEPTION 'knowledge_reindex_jobs refuses job %', NEW.job_id;
	END $$`,
	`CREATE TRIGGER refuse_reindex_job BEFORE INSERT ON knowledge_reindex_jobs
		FOR EACH ROW EXECUTE FUNCTION refuse_reindex_job()`,
}

// An upload that is neither indexed (the embedder is out of reach) nor
// queued for indexing (its reindex job cannot be inserted) does not answer
// 201 for a document nobody will ever index: it answers 503 with the
// contract's {"detail": ...} body and a Retry-After. The document is
// recorded all the same, and the same request sent again with its
// Idempotency-Key, once the embedder answers, finds it and indexes it: one
// document, with chunks, that a search finds.
func TestUploadNeitherIndexedNorQueuedAnswersAnError(t *testing.T) {
	t.Parallel()
	if eventStoreURL(t) != "" {
		t.Skip("runs projections on a database of its own: not with the package's shared fake EventStoreDB")
	}
	ctx := context.Background()
	pool := pgtest.Fresh(t) // the refused jobs are this test's alone
	for _, q := range refuseReindexJobs {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	embedder := &flakyEmbedder{offline: knowledge.NewOffline()}
	embedder.down.Store(true)
	// Its own projections (and reindex worker): the shared service's
	// project the package's database, not this one.
	e := startEnv(t, envConfig{pool: pool, projections: true, embedder: embedder})
	t.Cleanup(e.stop)
	e = e.from(t)
	u := e.signUp(t)
	key := uuid.NewString()
	upload := map[string]any{"title": "Cells", "content": cellText}

	res := e.doFailing(t, "POST", documentsPath, upload, u.Access, "Idempotency-Key", key)
	wantDetail(t, res, http.StatusServiceUnavailable,
		"The document was recorded but could not be indexed; retry in a moment (a write with the same Idempotency-Key)")
	wantHeader(t, res, "Retry-After", "1")
	var refusals int64
	if err := pool.QueryRow(ctx, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM job_refusals`).Scan(&refusals); err != nil || refusals != 1 {
		t.Fatalf("the reindex job refused %d times (%v), want once: the error is not the one under test", refusals, err)
	}
	// The document is recorded, with no chunks.
	var listed response
	poll.Must(t, 20*time.Second, "the recorded document listed", func() bool {
		listed = e.do(t, "GET", documentsPath, nil, u.Access)
		wantStatus(t, listed, http.StatusOK)
		return num(t, listed, "total") == 1
	})
	doc := field(t, listed, "items").([]any)[0].(map[string]any)
	id, _ := doc["knowledge_id"].(json.Number).Int64()
	if n, _ := doc["chunks"].(json.Number).Int64(); n != 0 {
		t.Errorf("%s: %d chunks before any indexing, want 0", listed, n)
	}

	// The embedder answers again; the job table still refuses. The retry
	// indexes the document it finds recorded.
	embedder.down.Store(false)
	retry := e.do(t, "POST", documentsPath, upload, u.Access, "Idempotency-Key", key)
	wantStatus(t, retry, http.StatusCreated)
	if got := num(t, retry, "knowledge_id"); got != id {
		t.Errorf("%s: the retry answered document %d, want the recorded %d", retry, got, id)
	}
	if n := num(t, retry, "chunks"); n == 0 {
		t.Errorf("%s: the retry did not index the document", retry)
	}
	// Its answer is the key's now.
	replay := e.do(t, "POST", documentsPath, upload, u.Access, "Idempotency-Key", key)
	wantBody(t, replay, http.StatusCreated, string(retry.Body))
	wantHeader(t, replay, "Idempotent-Replayed", "true")

	// One document, indexed, and found.
	listed = e.do(t, "GET", documentsPath, nil, u.Access, "X-Min-Position", retry.Header.Get("X-Event-Position"))
	wantStatus(t, listed, http.StatusOK)
	if n := num(t, listed, "total"); n != 1 {
		t.Errorf("%s: %d documents, want the one recorded", listed, n)
	}
	if n := num(t, e.do(t, "GET", documentPath(id), nil, u.Access), "chunks"); n == 0 {
		t.Errorf("document %d: no chunks after the retry", id)
	}
	hits := e.do(t, "POST", documentPath(id)+"/search", map[string]any{"query": "powerhouse of the cell"}, u.Access)
	wantStatus(t, hits, http.StatusOK)
	if !strings.Contains(string(hits.Body), "Mitochondria") {
		t.Errorf("%s: want the document's text found", hits)
	}
}

// An upload takes an Idempotency-Key as every create does: the same form
// sent again, under a boundary its client drew afresh (curl and browsers
// do, for each request), is the same request and answers what the first
// did; another file under the key is refused.
func TestUploadTakesAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	form := func(boundary, text string) ([]byte, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		if err := mw.SetBoundary(boundary); err != nil {
			t.Fatal(err)
		}
		part, err := mw.CreateFormFile("file", "cells.txt")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = part.Write([]byte(text))
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes(), mw.FormDataContentType()
	}
	key := uuid.NewString()
	body, ct := form("first-boundary-1111", cellText)
	first := e.send(t, "POST", documentsPath, body, u.Access, "Content-Type", ct, "Idempotency-Key", key)
	wantStatus(t, first, http.StatusCreated)
	body, ct = form("second-boundary-2222", cellText)
	again := e.send(t, "POST", documentsPath, body, u.Access, "Content-Type", ct, "Idempotency-Key", key)
	wantBody(t, again, http.StatusCreated, string(first.Body))
	wantHeader(t, again, "Idempotent-Replayed", "true")
	body, ct = form("third-boundary-3333", "Another text altogether.")
	other := e.send(t, "POST", documentsPath, body, u.Access, "Content-Type", ct, "Idempotency-Key", key)
	wantStatus(t, other, http.StatusUnprocessableEntity)
	listed := e.do(t, "GET", documentsPath, nil, u.Access, "X-Min-Position", first.Header.Get("X-Event-Position"))
	if n := num(t, listed, "total"); n != 1 {
		t.Errorf("%s: %d documents after three sends under one key, want 1", listed, n)
	}
}
