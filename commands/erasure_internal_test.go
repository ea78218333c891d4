package commands

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/aggregates"
	"lectern/blobs"
	"lectern/knowledge"
	"lectern/personal"
	"lectern/pgtest"
	"lectern/poll"
)

// gatedEmbedder embeds offline once its gate opens, and says when it is
// waiting there.
type gatedEmbedder struct{ waiting, gate chan struct{} }

func (g gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	g.waiting <- struct{}{}
	<-g.gate
	return knowledge.NewOffline().Embed(ctx, texts)
}

const indexedText = "The cell divides. Its halves part."

// An erasure that comes while a document of the user is being embedded
// leaves none of its chunks: the indexing finds the text's blob gone and
// writes nothing.
func TestErasureDuringEmbeddingLeavesNoChunks(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	store := blobs.New(pool, nil)
	ref, err := store.Put(ctx, 7, 70, []byte(indexedText))
	if err != nil {
		t.Fatal(err)
	}
	embedThroughAnErasure(t, pool, store, &ref, func() error {
		return (&Erasure{d: Deps{DB: pool}}).forget(ctx, aggregates.User{ID: 7})
	})
}

// embedThroughAnErasure indexes user 7's document 70 (its text stored at
// ref, or nil for none) with an embedder held until erase has run, and
// checks that the indexing wrote no chunk and said why.
func embedThroughAnErasure(t *testing.T, pool *pgxpool.Pool, store *blobs.Store, ref *blobs.Ref, erase func() error) {
	t.Helper()
	g := gatedEmbedder{waiting: make(chan struct{}, 1), gate: make(chan struct{})}
	ix := indexer{db: pool, embedder: g, blobs: store}
	indexed := make(chan error, 1)
	go func() {
		_, err := ix.index(context.Background(), 70, 7, ref, indexedText, nil)
		indexed <- err
	}()
	<-g.waiting
	if err := erase(); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	if err := <-indexed; !errors.Is(err, personal.ErrSubjectErased) {
		t.Errorf("indexing after the erasure: %v, want %v", err, personal.ErrSubjectErased)
	}
	if n := ownerChunks(t, pool, 7); n != 0 {
		t.Errorf("%d chunks of the erased user's document were written", n)
	}
}

// An erasure that comes while a document's chunks are being written waits
// for them, then deletes them.
func TestErasureDuringChunkWritesDeletesThem(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	store := blobs.New(pool, nil)
	ref, err := store.Put(ctx, 7, 70, []byte(indexedText))
	if err != nil {
		t.Fatal(err)
	}
	// An earlier index's chunk, locked here: the new index stops at it
	// once it holds the blob, with its chunks not yet written.
	if _, err := pool.Exec(ctx, `INSERT INTO knowledge_chunks (id, knowledge_id, owner_id, ord, text, embedding)
		VALUES (nextval('knowledge_chunk_ids'), 70, 7, 0, 'old', '{}')`); err != nil {
		t.Fatal(err)
	}
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM knowledge_chunks WHERE knowledge_id = 70 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ix := indexer{db: pool, embedder: knowledge.NewOffline(), blobs: store}
	indexed := make(chan error, 1)
	go func() {
		_, err := ix.index(ctx, 70, 7, &ref, indexedText, nil)
		indexed <- err
	}()
	waitingAt(t, pool, "DELETE FROM knowledge_chunks WHERE knowledge_id")
	erased := make(chan error, 1)
	go func() { erased <- (&Erasure{d: Deps{DB: pool}}).forget(ctx, aggregates.User{ID: 7}) }()
	waitingAt(t, pool, "DELETE FROM document_blobs")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-indexed; err != nil {
		t.Fatalf("the indexing the erasure waited for: %v", err)
	}
	if err := <-erased; err != nil {
		t.Fatal(err)
	}
	if n := ownerChunks(t, pool, 7); n != 0 {
		t.Errorf("%d chunks of the erased user's document are left", n)
	}
}

// waitingAt waits until a statement starting with prefix waits for a lock.
func waitingAt(t *testing.T, pool *pgxpool.Pool, prefix string) {
	t.Helper()
	poll.Must(t, 10*time.Second, "a statement "+prefix+"... waiting for a lock", func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(ltrim(query), $1)`, prefix).Scan(&n)
		return err == nil && n > 0
	})
}

// ownerChunks counts the chunks of owner's documents.
func ownerChunks(t *testing.T, pool *pgxpool.Pool, owner int64) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM knowledge_chunks WHERE owner_id = $1`, owner).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// beforeKeyErased is a SubjectEraser that runs first before it erases:
// what a request in flight does between an erasure's first pass and the
// key's deletion.
type beforeKeyErased struct {
	*personal.Keys
	first func()
}

func (b beforeKeyErased) Erase(ctx context.Context, subject string) error {
	b.first()
	return b.Keys.Erase(ctx, subject)
}

// sealingKeys is a key store with user 7's key made.
func sealingKeys(t *testing.T, pool *pgxpool.Pool) *personal.Keys {
	t.Helper()
	keys, err := personal.NewKeys(pool, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Key(context.Background(), personal.UserSubject(7), true); err != nil {
		t.Fatal(err)
	}
	return keys
}

// An upload that stores its text and writes its chunks after the erasure's
// first pass (its text was being extracted then), while the key still
// stands, leaves nothing: the erasure goes over the user's documents again
// once the key is gone.
func TestAnUploadBetweenTheFirstPassAndTheKeysErasureIsForgotten(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	keys := sealingKeys(t, pool)
	store := blobs.New(pool, keys)
	upload := func() {
		ref, err := store.Put(ctx, 7, 70, []byte(indexedText))
		if err != nil {
			t.Fatal(err)
		}
		ix := indexer{db: pool, embedder: knowledge.NewOffline(), blobs: store}
		if n, err := ix.index(ctx, 70, 7, &ref, indexedText, nil); err != nil || n == 0 {
			t.Fatalf("indexing before the key went: %d chunks, %v", n, err)
		}
	}
	x := &Erasure{d: Deps{DB: pool}, keys: beforeKeyErased{keys, upload}}
	if err := x.eraseOutsideTheLog(ctx, aggregates.User{ID: 7}); err != nil {
		t.Fatal(err)
	}
	if n, b := ownerChunks(t, pool, 7), ownerBlobs(t, pool, 7); n != 0 || b != 0 {
		t.Errorf("%d chunks and %d texts of the erased user's upload are left", n, b)
	}
	// Nor is any text stored once the key is gone, by a replica that
	// cached the key before and has not heard of the erasure yet.
	replica, err := personal.NewKeys(pool, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Key(ctx, personal.UserSubject(8), true); err != nil {
		t.Fatal(err)
	}
	if err := keys.Erase(ctx, personal.UserSubject(8)); err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.New(pool, replica).Put(ctx, 8, 71, []byte(indexedText)); !errors.Is(err, personal.ErrSubjectErased) {
		t.Errorf("storing a text of an erased user with a key cached before: %v, want %v", err, personal.ErrSubjectErased)
	}
	if b := ownerBlobs(t, pool, 8); b != 0 {
		t.Errorf("%d texts stored", b)
	}
}

// A document with no stored text (version 1: its text in its upload event)
// being embedded for a reindex when its owner is erased gets no chunks: the
// chunks' transaction finds the key erased. Its text was checked by no blob.
func TestErasureDuringTheEmbeddingOfADocumentWithoutAStoredTextLeavesNoChunks(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	keys := sealingKeys(t, pool)
	x := &Erasure{d: Deps{DB: pool}, keys: keys}
	embedThroughAnErasure(t, pool, blobs.New(pool, keys), nil, func() error {
		return x.eraseOutsideTheLog(ctx, aggregates.User{ID: 7})
	})
}

// Chunks being written when the key's erasure comes are waited for, and
// then deleted by the erasure's second pass: the key's erasure cannot
// commit while a chunk transaction that found the key standing is open.
func TestTheKeysErasureWaitsForChunksBeingWrittenThenTheyGo(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	keys := sealingKeys(t, pool)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	indexed := make(chan error, 1)
	// After the first pass: an earlier index's chunk, locked by hold, at
	// which the indexing stops once it holds the key, with its chunks not
	// yet written.
	inTheWindow := func() {
		if _, err := pool.Exec(ctx, `INSERT INTO knowledge_chunks (id, knowledge_id, owner_id, ord, text, embedding)
			VALUES (nextval('knowledge_chunk_ids'), 70, 7, 0, 'old', '{}')`); err != nil {
			t.Error(err)
		}
		if _, err := hold.Exec(ctx, `SELECT 1 FROM knowledge_chunks WHERE knowledge_id = 70 FOR UPDATE`); err != nil {
			t.Error(err)
		}
		go func() {
			ix := indexer{db: pool, embedder: knowledge.NewOffline(), blobs: blobs.New(pool, keys)}
			_, err := ix.index(ctx, 70, 7, nil, indexedText, nil)
			indexed <- err
		}()
		waitingAt(t, pool, "DELETE FROM knowledge_chunks WHERE knowledge_id")
	}
	x := &Erasure{d: Deps{DB: pool}, keys: beforeKeyErased{keys, inTheWindow}}
	erased := make(chan error, 1)
	go func() { erased <- x.eraseOutsideTheLog(ctx, aggregates.User{ID: 7}) }()
	waitingAt(t, pool, "WITH erased AS") // the key's erasure, behind the indexing
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-indexed; err != nil {
		t.Fatalf("the indexing the key's erasure waited for: %v", err)
	}
	if err := <-erased; err != nil {
		t.Fatal(err)
	}
	if n := ownerChunks(t, pool, 7); n != 0 {
		t.Errorf("%d chunks of the erased user's document are left", n)
	}
}
