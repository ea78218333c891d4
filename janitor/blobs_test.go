package janitor_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lectern/blobs"
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
