package blobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"lectern/blobs"
	"lectern/personal"
	"lectern/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestPutAndGet(t *testing.T) {
	t.Run("in clear", func(t *testing.T) { testPutAndGet(t, false) })
	t.Run("sealed", func(t *testing.T) { testPutAndGet(t, true) })
}

func testPutAndGet(t *testing.T, sealed bool) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	var src personal.KeySource
	if sealed {
		// The keys in the same fresh database: a key made under another
		// run's master key would not unwrap (go test -count=3).
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		keys, err := personal.NewKeys(db, key)
		if err != nil {
			t.Fatal(err)
		}
		src = keys
	}
	store := blobs.New(db, src)
	text := []byte("Cells divide by mitosis.")
	ref, err := store.Put(ctx, 7, 1, text)
	if err != nil {
		t.Fatal(err)
	}
	if ref != blobs.RefOf(text) || ref.Size != int64(len(text)) || len(ref.Hash) != 64 {
		t.Errorf("Put returned %+v, want the address of the text", ref)
	}
	// The same content again is stored once.
	if again, err := store.Put(ctx, 7, 1, text); err != nil || again != ref {
		t.Errorf("Put again: %+v, %v", again, err)
	}
	var rows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM document_blobs WHERE owner_id = 7`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("%d rows (%v), want 1", rows, err)
	}
	got, err := store.Get(ctx, 7, ref)
	if err != nil || string(got) != string(text) {
		t.Errorf("Get: %q, %v", got, err)
	}
	// Another owner's address finds nothing, even for the same text.
	if _, err := store.Get(ctx, 8, ref); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("another owner's Get: %v, want ErrNotFound", err)
	}
	if sealed {
		var stored []byte
		if err := db.QueryRow(ctx, `SELECT content FROM document_blobs WHERE owner_id = 7`).Scan(&stored); err != nil ||
			bytes.Contains(stored, []byte("mitosis")) {
			t.Errorf("the stored blob %q (%v): want it sealed", stored, err)
		}
	}
	// Content that no longer matches its address is an error, not a text.
	if _, err := db.Exec(ctx, `UPDATE document_blobs SET content = 'tampered', sealed = false WHERE owner_id = 7`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, 7, ref); err == nil || errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Get of tampered content: %v, want a hash mismatch", err)
	}
}

// Once its owner is erased, a sealed blob reads as not found.
func TestErasedOwnersBlobsAreUnreadable(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keys, err := personal.NewKeys(db, key)
	if err != nil {
		t.Fatal(err)
	}
	store := blobs.New(db, keys)
	ref, err := store.Put(ctx, 9, 1, []byte("a student's essay"))
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Erase(ctx, "user-9"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, 9, ref); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Get after erasure: %v, want ErrNotFound", err)
	}
	if _, err := store.Put(ctx, 9, 2, []byte("more")); !errors.Is(err, personal.ErrErased) {
		t.Errorf("Put after erasure: %v, want ErrErased", err)
	}
}
