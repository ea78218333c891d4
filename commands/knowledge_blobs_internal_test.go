package commands

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/aggregates"
	"lectern/blobs"
	"lectern/eventstore"
	"lectern/knowledge"
	"lectern/pgtest"
)

// downStore refuses appends while down is set, as a store out of reach.
type downStore struct {
	eventstore.Store
	down atomic.Bool
}

func (s *downStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if s.down.Load() {
		return eventstore.AppendResult{}, eventstore.ErrUnavailable
	}
	return s.Store.Append(ctx, stream, expected, events)
}

// blobRefs are the knowledge ids of owner's blob refs.
func blobRefs(t *testing.T, pool *pgxpool.Pool, owner int64) []int64 {
	t.Helper()
	var ids []int64
	if err := pool.QueryRow(context.Background(), `SELECT COALESCE(array_agg(knowledge_id ORDER BY knowledge_id), '{}') FROM document_blob_refs WHERE owner_id = $1`,
		owner).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

func ownerBlobs(t *testing.T, pool *pgxpool.Pool, owner int64) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM document_blobs WHERE owner_id = $1`, owner).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An upload whose append failed leaves its text's blob and a ref of its
// id; once past the grace, the sweep (reading the document's stream
// through the event store, either one) deletes both. A recorded upload's
// blob stays, and so does a blob a recorded document shares with a failed
// one.
func TestSweepDeletesTheTextOfAFailedUpload(t *testing.T) {
	pool := pgtest.Fresh(t)
	owner := int64(100)
	for name, inner := range idempotencyStores(t, pool) {
		owner++
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := &downStore{Store: inner}
			d := process(t, pool, store)
			d.Embedder, d.Blobs = knowledge.NewOffline(), blobs.New(pool, nil)
			k, err := NewKnowledge(d)
			if err != nil {
				t.Fatal(err)
			}
			upload := func(text string) (int64, error) {
				doc, _, _, err := k.Upload(ctx, aggregates.UploadKnowledgeDocument{OwnerID: owner, Title: "notes",
					ContentType: "text/plain", Size: int64(len(text)), Content: text})
				return doc.ID, err
			}
			sweep := func() blobs.Swept {
				t.Helper()
				if _, err := pool.Exec(ctx, `UPDATE document_blob_refs SET created_at = created_at - interval '2 hours' WHERE owner_id = $1`, owner); err != nil {
					t.Fatal(err)
				}
				swept, err := blobs.Sweep(ctx, pool, blobs.RecordedIn(store), blobs.RefGrace, blobs.SweepLimit, 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				return swept
			}

			// Failed alone: swept.
			store.down.Store(true)
			if _, err := upload("a draft the user was told was not uploaded"); !errors.Is(err, eventstore.ErrUnavailable) {
				t.Fatalf("the upload with the store down: %v", err)
			}
			if n, refs := ownerBlobs(t, pool, owner), blobRefs(t, pool, owner); n != 1 || len(refs) != 1 {
				t.Fatalf("after the failed upload: %d blobs, refs %v; want its blob and its ref", n, refs)
			}
			if swept := sweep(); swept != (blobs.Swept{Refs: 1, Blobs: 1}) {
				t.Errorf("swept %+v, want the failed upload's ref and blob", swept)
			}
			if n, refs := ownerBlobs(t, pool, owner), blobRefs(t, pool, owner); n != 0 || len(refs) != 0 {
				t.Errorf("after the sweep: %d blobs, refs %v; want none", n, refs)
			}

			// Recorded, then the same text failed: the failed one's ref goes.
			store.down.Store(false)
			recorded, err := upload("the same notes, twice")
			if err != nil {
				t.Fatal(err)
			}
			store.down.Store(true)
			if _, err := upload("the same notes, twice"); !errors.Is(err, eventstore.ErrUnavailable) {
				t.Fatalf("the second upload with the store down: %v", err)
			}
			if refs := blobRefs(t, pool, owner); len(refs) != 2 {
				t.Fatalf("refs %v, want both uploads'", refs)
			}
			store.down.Store(false)
			if swept := sweep(); swept != (blobs.Swept{Refs: 1}) {
				t.Errorf("swept %+v, want the failed upload's ref alone", swept)
			}
			if refs := blobRefs(t, pool, owner); len(refs) != 1 || refs[0] != recorded {
				t.Errorf("refs %v, want the recorded document %d's", refs, recorded)
			}
			if text, err := k.DocumentText(ctx, owner, recorded); err != nil || text != "the same notes, twice" {
				t.Errorf("the recorded document's text: %q, %v", text, err)
			}
		})
	}
}

// An erasure deletes the user's blobs' refs with the blobs.
func TestErasureDeletesBlobRefs(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	store := blobs.New(pool, nil)
	for _, owner := range []int64{7, 8} {
		if _, err := store.Put(ctx, owner, owner*10, []byte(indexedText)); err != nil {
			t.Fatal(err)
		}
	}
	if err := (&Erasure{d: Deps{DB: pool}}).forget(ctx, aggregates.User{ID: 7}); err != nil {
		t.Fatal(err)
	}
	if n, refs := ownerBlobs(t, pool, 7), blobRefs(t, pool, 7); n != 0 || len(refs) != 0 {
		t.Errorf("the erased user's: %d blobs, refs %v; want none", n, refs)
	}
	if n, refs := ownerBlobs(t, pool, 8), blobRefs(t, pool, 8); n != 1 || len(refs) != 1 {
		t.Errorf("another user's: %d blobs, refs %v; want theirs kept", n, refs)
	}
}
