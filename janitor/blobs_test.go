package janitor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lectern/blobs"
	"lectern/blobs/blobstest"
	"lectern/pgtest"
)

// A run sweeps the text of an upload whose event was never appended (its
// blob and ref, once past blobs.RefGrace) and counts it; a recorded
// document's text stays. Without DocumentRecorded nothing is swept.
func TestRunSweepsTheTextOfUploadsNeverRecorded(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	for id, text := range map[int64]string{1: "recorded text", 2: "text of a failed upload"} {
		if _, err := store.Put(ctx, 7, id, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	execAll(t, db, `UPDATE document_blob_refs SET created_at = now() - interval '2 hours'`)
	j := newJanitor(t, db, time.Now())
	if _, err := j.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM document_blobs`); n != 2 {
		t.Fatalf("with no DocumentRecorded, %d blobs left, want both", n)
	}

	j.DocumentRecorded = func(_ context.Context, id int64) (bool, error) { return id == 1, nil }
	deleted, err := j.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deleted["document_blob_refs"] != 1 || deleted["document_blobs"] != 1 {
		t.Errorf("deleted %v, want one ref and one blob", deleted)
	}
	if got := testutil.ToFloat64(j.Deleted("document_blobs")); got != 1 {
		t.Errorf("document_blobs counter %v, want 1", got)
	}
	if _, err := store.Get(ctx, 7, blobs.RefOf([]byte("text of a failed upload"))); err != blobs.ErrNotFound { //nolint:errorlint // the sentinel itself
		t.Errorf("the failed upload's text: %v, want it gone", err)
	}
	got, err := store.Get(ctx, 7, blobs.RefOf([]byte("recorded text")))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("recorded text", string(got)); diff != "" {
		t.Errorf("the recorded document's text (-want +got):\n%s", diff)
	}
}

// A run bounds each check of the sweep by its StatementTimeout: a check
// that hangs (an event store that never answers for a stream) is cut, its
// ref skipped and the run failed, after the sweep went on with the other
// refs.
func TestRunCutsADocumentCheckThatHangs(t *testing.T) {
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	for id, text := range map[int64]string{1: "text whose check hangs", 2: "text of a failed upload"} {
		if _, err := store.Put(context.Background(), 7, id, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	execAll(t, db, `UPDATE document_blob_refs SET created_at = now() - interval '2 hours' - knowledge_id * interval '1 minute'`)
	j := newJanitor(t, db, time.Now())
	j.StatementTimeout = time.Second
	hang := blobstest.HangOn(1)
	j.DocumentRecorded = hang.Check
	// Only a safety net, should the run not cut the check.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deleted, err := j.RunOnce(ctx)
	if !hang.Asked() {
		t.Fatal("the check of document 1 was never made")
	}
	if ctx.Err() != nil {
		t.Fatalf("the run went on until its context ended: %v, %v", deleted, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RunOnce: %v, want %v", err, context.DeadlineExceeded)
	}
	if deleted["document_blob_refs"] != 1 || deleted["document_blobs"] != 1 {
		t.Errorf("deleted %v, want the failed upload's ref and blob", deleted)
	}
	if refs := count(t, db, `SELECT count(*) FROM document_blob_refs WHERE knowledge_id = 1 AND NOT recorded`); refs != 1 {
		t.Errorf("%d refs of the document whose check hung, want its own, as it was", refs)
	}
}
