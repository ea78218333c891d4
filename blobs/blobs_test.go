package blobs_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"lectern/blobs"
	"lectern/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Cleanup()
	os.Exit(code)
}

func TestPutAndGet(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Pool(t)
	text := []byte("Cells divide by mitosis.")
	ref, err := blobs.Put(ctx, db, 7, text)
	if err != nil {
		t.Fatal(err)
	}
	if ref != blobs.RefOf(text) || ref.Size != int64(len(text)) || len(ref.Hash) != 64 {
		t.Errorf("Put returned %+v, want the address of the text", ref)
	}
	// The same content again is stored once.
	if again, err := blobs.Put(ctx, db, 7, text); err != nil || again != ref {
		t.Errorf("Put again: %+v, %v", again, err)
	}
	var rows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM document_blobs WHERE owner_id = 7`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("%d rows (%v), want 1", rows, err)
	}
	got, err := blobs.Get(ctx, db, 7, ref)
	if err != nil || string(got) != string(text) {
		t.Errorf("Get: %q, %v", got, err)
	}
	// Another owner's address finds nothing, even for the same text.
	if _, err := blobs.Get(ctx, db, 8, ref); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("another owner's Get: %v, want ErrNotFound", err)
	}
	// Content that no longer matches its address is an error, not a text.
	if _, err := db.Exec(ctx, `UPDATE document_blobs SET content = 'tampered' WHERE owner_id = 7`); err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Get(ctx, db, 7, ref); err == nil || errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Get of tampered content: %v, want a hash mismatch", err)
	}
}
