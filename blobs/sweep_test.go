package blobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/blobs"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// recordedOnly is a Recorded that knows the documents ids, and counts its
// calls.
type recordedOnly struct {
	mu    sync.Mutex
	ids   map[int64]bool
	calls int
}

func (r *recordedOnly) check(_ context.Context, id int64) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.ids[id], nil
}

func recorded(ids ...int64) *recordedOnly {
	r := &recordedOnly{ids: map[int64]bool{}}
	for _, id := range ids {
		r.ids[id] = true
	}
	return r
}

// age puts the ref of document knowledgeID past the sweep's grace, as if
// its upload were two hours old.
func age(t *testing.T, db *pgxpool.Pool, knowledgeID int64) {
	t.Helper()
	tag, err := db.Exec(context.Background(), `UPDATE document_blob_refs SET created_at = now() - interval '2 hours' WHERE knowledge_id = $1`, knowledgeID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("ageing the ref of document %d: %d rows, %v", knowledgeID, tag.RowsAffected(), err)
	}
}

func count(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func blobsOf(t *testing.T, db *pgxpool.Pool, owner int64) int {
	t.Helper()
	return count(t, db, `SELECT count(*) FROM document_blobs WHERE owner_id = $1`, owner)
}

func refsOf(t *testing.T, db *pgxpool.Pool, owner int64) []int64 {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT knowledge_id FROM document_blob_refs WHERE owner_id = $1 ORDER BY 1`, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func sweep(t *testing.T, db *pgxpool.Pool, r blobs.Recorded, limit int) blobs.Swept {
	t.Helper()
	swept, err := blobs.Sweep(context.Background(), db, r, blobs.RefGrace, limit)
	if err != nil {
		t.Fatal(err)
	}
	return swept
}

// An upload whose append failed leaves its blob and its ref; past the
// grace, the sweep deletes both. Within it, they stay: the append may be
// under way.
func TestSweepDeletesTheBlobOfAnUnrecordedUpload(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	if _, err := store.Put(ctx, 7, 1, []byte("a draft the user was told was not uploaded")); err != nil {
		t.Fatal(err)
	}
	if n, refs := blobsOf(t, db, 7), refsOf(t, db, 7); n != 1 || len(refs) != 1 || refs[0] != 1 {
		t.Fatalf("after Put: %d blobs, refs %v; want the blob and its ref of document 1", n, refs)
	}
	none := recorded()
	if swept := sweep(t, db, none.check, blobs.SweepLimit); swept != (blobs.Swept{}) || blobsOf(t, db, 7) != 1 {
		t.Errorf("a sweep within the grace deleted %+v", swept)
	}
	age(t, db, 1)
	if swept := sweep(t, db, none.check, blobs.SweepLimit); swept != (blobs.Swept{Refs: 1, Blobs: 1}) {
		t.Errorf("the sweep past the grace: %+v, want the ref and the blob", swept)
	}
	if n, refs := blobsOf(t, db, 7), refsOf(t, db, 7); n != 0 || len(refs) != 0 {
		t.Errorf("after the sweep: %d blobs, refs %v; want none", n, refs)
	}
}

// A recorded document's blob is kept; its ref is marked recorded and not
// looked at again (so that recorded refs, which stay, never fill a sweep's
// limit).
func TestSweepKeepsARecordedDocumentsBlob(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	ref, err := store.Put(ctx, 7, 2, []byte("a recorded document"))
	if err != nil {
		t.Fatal(err)
	}
	age(t, db, 2)
	r := recorded(2)
	for range 2 {
		if swept := sweep(t, db, r.check, blobs.SweepLimit); swept != (blobs.Swept{}) {
			t.Errorf("the sweep deleted %+v of a recorded document", swept)
		}
	}
	if r.calls != 1 {
		t.Errorf("the event store was asked %d times, want once", r.calls)
	}
	if got, err := store.Get(ctx, 7, ref); err != nil || string(got) != "a recorded document" {
		t.Errorf("the recorded document's text: %q, %v", got, err)
	}
	if refs := refsOf(t, db, 7); len(refs) != 1 {
		t.Errorf("refs %v, want the recorded document's", refs)
	}
}

// Two documents of the same text share a blob: when one's append failed,
// the sweep deletes its ref only, and the blob stays for the other.
func TestSweepKeepsABlobSharedWithARecordedDocument(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	text := []byte("the same notes, uploaded twice")
	for _, id := range []int64{3, 4} {
		if _, err := store.Put(ctx, 7, id, text); err != nil {
			t.Fatal(err)
		}
		age(t, db, id)
	}
	if swept := sweep(t, db, recorded(3).check, blobs.SweepLimit); swept != (blobs.Swept{Refs: 1}) {
		t.Errorf("swept %+v, want the failed upload's ref alone", swept)
	}
	if refs := refsOf(t, db, 7); len(refs) != 1 || refs[0] != 3 {
		t.Errorf("refs %v, want the recorded document 3's", refs)
	}
	if got, err := store.Get(ctx, 7, blobs.RefOf(text)); err != nil || string(got) != string(text) {
		t.Errorf("the shared text: %q, %v", got, err)
	}
}

// A blob stored before refs has none, and stays; a new upload of its text
// whose append fails takes its own ref, not the old document's text.
func TestSweepKeepsBlobsFromBeforeRefs(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	text := []byte("uploaded before refs")
	ref := blobs.RefOf(text)
	// As the migration left it: no refs_complete given, no refs.
	if _, err := db.Exec(ctx, `INSERT INTO document_blobs (owner_id, hash, size, content, sealed, created_at)
		VALUES (7, $1, $2, $3, false, now() - interval '1 year')`, ref.Hash, ref.Size, text); err != nil {
		t.Fatal(err)
	}
	none := recorded()
	if swept := sweep(t, db, none.check, blobs.SweepLimit); swept != (blobs.Swept{}) || blobsOf(t, db, 7) != 1 {
		t.Errorf("swept %+v of a blob from before refs", swept)
	}
	store := blobs.New(db, nil)
	if _, err := store.Put(ctx, 7, 5, text); err != nil {
		t.Fatal(err)
	}
	age(t, db, 5)
	if swept := sweep(t, db, none.check, blobs.SweepLimit); swept != (blobs.Swept{Refs: 1}) {
		t.Errorf("swept %+v, want the failed upload's ref alone", swept)
	}
	if got, err := store.Get(ctx, 7, ref); err != nil || string(got) != string(text) {
		t.Errorf("the old document's text: %q, %v", got, err)
	}
}

// A retry of an upload (its Idempotency-Key draws the same id) stores the
// text again and renews the ref: its append is under way again, and the
// sweep leaves it its grace.
func TestSweepLeavesARetriedUploadItsGrace(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	text := []byte("retried")
	if _, err := store.Put(ctx, 7, 6, text); err != nil {
		t.Fatal(err)
	}
	age(t, db, 6)
	if _, err := store.Put(ctx, 7, 6, text); err != nil {
		t.Fatal(err)
	}
	if swept := sweep(t, db, recorded().check, blobs.SweepLimit); swept != (blobs.Swept{}) {
		t.Errorf("swept %+v of an upload being retried", swept)
	}
	if n, refs := blobsOf(t, db, 7), refsOf(t, db, 7); n != 1 || len(refs) != 1 {
		t.Errorf("%d blobs, refs %v; want the retried upload's", n, refs)
	}
}

// One sweep looks at limit refs at most, oldest first; the next goes on.
func TestSweepIsBounded(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	for id := int64(1); id <= 5; id++ {
		if _, err := store.Put(ctx, 7, id, fmt.Appendf(nil, "document %d", id)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `UPDATE document_blob_refs SET created_at = now() - interval '2 hours' - make_interval(mins => $2)
			WHERE knowledge_id = $1`, id, 6-id); err != nil {
			t.Fatal(err)
		}
	}
	// The two oldest are recorded: marked, they do not hold back the rest.
	r := recorded(1, 2)
	for i, want := range []blobs.Swept{{}, {Refs: 2, Blobs: 2}, {Refs: 1, Blobs: 1}, {}} {
		r.calls = 0
		if swept := sweep(t, db, r.check, 2); swept != want || r.calls > 2 {
			t.Errorf("sweep %d: %+v after %d reads of the event store, want %+v after 2 at most", i+1, swept, r.calls, want)
		}
	}
	if refs := refsOf(t, db, 7); len(refs) != 2 || refs[0] != 1 || refs[1] != 2 {
		t.Errorf("refs %v, want the recorded documents 1 and 2", refs)
	}
}

// A sweep that cannot tell whether a document is recorded deletes nothing
// of it, and says why.
func TestSweepStopsWhenTheEventStoreDoesNotAnswer(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	if _, err := blobs.New(db, nil).Put(ctx, 7, 1, []byte("text")); err != nil {
		t.Fatal(err)
	}
	age(t, db, 1)
	down := errors.New("the event store is down")
	swept, err := blobs.Sweep(ctx, db, func(context.Context, int64) (bool, error) { return false, down }, blobs.RefGrace, blobs.SweepLimit)
	if !errors.Is(err, down) || swept != (blobs.Swept{}) {
		t.Errorf("Sweep: %+v, %v; want nothing deleted and %v", swept, err, down)
	}
	if n, refs := blobsOf(t, db, 7), refsOf(t, db, 7); n != 1 || len(refs) != 1 {
		t.Errorf("%d blobs, refs %v; want both kept", n, refs)
	}
}

// A Put racing a sweep of the same blob never leaves a ref without its
// blob: the sweep deletes the blob with its last ref, and the Put's new
// ref is either seen by it (the blob stays) or written after it (with the
// blob again).
func TestPutRacingSweepNeverLeavesARefWithoutItsBlob(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	store := blobs.New(db, nil)
	text := []byte("raced")
	none := recorded()
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	for owner := int64(1); owner <= int64(iterations); owner++ {
		if _, err := store.Put(ctx, owner, 1, text); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `UPDATE document_blob_refs SET created_at = now() - interval '2 hours' WHERE owner_id = $1`, owner); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make(chan error, 2)
		go func() {
			<-start
			_, err := store.Put(ctx, owner, 2, text)
			errs <- err
		}()
		go func() {
			<-start
			_, err := blobs.Sweep(ctx, db, none.check, blobs.RefGrace, blobs.SweepLimit)
			errs <- err
		}()
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if refs := refsOf(t, db, owner); len(refs) != 1 || refs[0] != 2 {
			t.Fatalf("iteration %d: refs %v, want the new upload's alone", owner, refs)
		}
		if n := blobsOf(t, db, owner); n != 1 {
			t.Fatalf("iteration %d: the new upload's ref is left without its blob", owner)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM document_blob_refs r
		WHERE NOT EXISTS (SELECT 1 FROM document_blobs b WHERE b.owner_id = r.owner_id AND b.hash = r.hash)`); n != 0 {
		t.Errorf("%d refs without their blob", n)
	}
}

// RecordedIn tells a document whose stream holds an event from one whose
// stream is empty, on either event store.
func TestRecordedInReadsTheDocumentsStream(t *testing.T) {
	db := pgtest.Fresh(t)
	pg := postgres.New(db, nil)
	t.Cleanup(pg.Close)
	srv, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	es, err := esdb.Open(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = es.Close() })
	for name, store := range map[string]eventstore.Store{"postgres": pg, "esdbfake": es} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			data, _ := json.Marshal(events.KnowledgeDocumentUploaded{KnowledgeID: 10, UserID: 7, Title: "t"})
			e := events.KnowledgeDocumentUploaded{}
			if _, err := store.Append(ctx, eventstore.StreamName(events.CategoryKnowledge, 10), eventstore.NoStream, []eventstore.EventData{{
				ID: uuid.New(), Type: e.EventType(), SchemaVersion: e.SchemaVersion(), Data: data, RecordedAt: time.Now().UTC(),
			}}); err != nil {
				t.Fatal(err)
			}
			check := blobs.RecordedIn(store)
			if ok, err := check(ctx, 10); err != nil || !ok {
				t.Errorf("document 10, recorded: %v, %v", ok, err)
			}
			if ok, err := check(ctx, 11); err != nil || ok {
				t.Errorf("document 11, never recorded: %v, %v", ok, err)
			}
		})
	}
}
