package blobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/blobs"
	"lectern/blobs/blobstest"
	"lectern/events"
	"lectern/eventstore"
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

// opTimeout is the sweeps' timeout of an operation, as the janitor's.
const opTimeout = 30 * time.Second

func sweep(t *testing.T, db *pgxpool.Pool, r blobs.Recorded, limit int) blobs.Swept {
	t.Helper()
	swept, err := blobs.Sweep(context.Background(), db, r, blobs.RefGrace, limit, opTimeout)
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
// looked at again (so that recorded refs, which stay, are not read again
// at every sweep).
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

// ageAt sets the ref of document knowledgeID's created_at to at (past the
// grace: long ago).
func ageAt(t *testing.T, db *pgxpool.Pool, knowledgeID int64, at string) {
	t.Helper()
	tag, err := db.Exec(context.Background(), `UPDATE document_blob_refs SET created_at = $2::timestamptz WHERE knowledge_id = $1`, knowledgeID, at)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("ageing the ref of document %d: %d rows, %v", knowledgeID, tag.RowsAffected(), err)
	}
}

// putAll stores a text of each document of ids, owner 7.
func putAll(t *testing.T, db *pgxpool.Pool, ids ...int64) {
	t.Helper()
	store := blobs.New(db, nil)
	for _, id := range ids {
		if _, err := store.Put(context.Background(), 7, id, fmt.Appendf(nil, "document %d", id)); err != nil {
			t.Fatal(err)
		}
	}
}

// One sweep goes through the whole backlog of refs past the grace, page
// after page of limit refs, and asks the event store once about each: refs
// of the same age (ordered by owner, hash and knowledge id after it) are
// neither read twice nor passed over where a page ends among them, and
// recorded refs, marked, are not looked at again.
func TestSweepGoesThroughAWholeBacklogInOneCall(t *testing.T) {
	db := pgtest.Fresh(t)
	putAll(t, db, 1, 2, 3, 4, 5, 6, 7)
	for id, at := range map[int64]string{1: "2026-01-01 00:00Z", 2: "2026-01-01 00:01Z",
		3: "2026-01-01 00:02Z", 4: "2026-01-01 00:02Z", 5: "2026-01-01 00:02Z", 6: "2026-01-01 00:03Z"} {
		ageAt(t, db, id, at)
	}
	// 7 is within its grace; 1 and 4 are recorded.
	r := recorded(1, 4)
	if swept := sweep(t, db, r.check, 2); swept != (blobs.Swept{Refs: 4, Blobs: 4}) || r.calls != 6 {
		t.Errorf("a sweep of 6 refs 2 a page: %+v after %d reads of the event store, want the 4 unrecorded refs and their blobs after 6",
			swept, r.calls)
	}
	if refs := refsOf(t, db, 7); len(refs) != 3 || refs[0] != 1 || refs[1] != 4 || refs[2] != 7 {
		t.Errorf("refs %v, want the recorded documents 1 and 4 and 7, within its grace", refs)
	}
	r.calls = 0
	if swept := sweep(t, db, r.check, 2); swept != (blobs.Swept{}) || r.calls != 0 {
		t.Errorf("the next sweep: %+v after %d reads of the event store, want nothing after none", swept, r.calls)
	}
}

// failing is a Recorded that answers err for the documents of failing and
// false (never recorded) for the others, and counts its calls.
type failing struct {
	mu      sync.Mutex
	failing map[int64]error
	calls   map[int64]int
}

func (f *failing) check(_ context.Context, id int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id]++
	return false, f.failing[id]
}

// A ref whose check fails is skipped, left as it was, and the sweep goes on
// with the refs after it, on later pages too; the error is returned with
// what was swept. The next sweep looks at the ref again: a ref that always
// fails holds back none after it.
func TestSweepSkipsARefWhoseCheckFails(t *testing.T) {
	db := pgtest.Fresh(t)
	putAll(t, db, 1, 2, 3, 4, 5)
	for id := int64(1); id <= 5; id++ {
		ageAt(t, db, id, fmt.Sprintf("2026-01-01 00:0%dZ", id))
	}
	down := errors.New("the event store answers an error for this stream")
	f := &failing{failing: map[int64]error{1: down}, calls: map[int64]int{}}
	for run := 1; run <= 2; run++ {
		want := blobs.Swept{Refs: 4, Blobs: 4, Skipped: 1}
		if run == 2 {
			want = blobs.Swept{Skipped: 1}
		}
		swept, err := blobs.Sweep(context.Background(), db, f.check, blobs.RefGrace, 2, opTimeout)
		if !errors.Is(err, down) || swept != want {
			t.Errorf("sweep %d: %+v, %v; want %+v and %v", run, swept, err, want, down)
		}
		if refs := refsOf(t, db, 7); len(refs) != 1 || refs[0] != 1 {
			t.Errorf("sweep %d: refs %v, want the failing document 1's alone", run, refs)
		}
	}
	if f.calls[1] != 2 {
		t.Errorf("the failing ref was checked %d times in 2 sweeps, want once a sweep", f.calls[1])
	}
	for id := int64(2); id <= 5; id++ {
		if f.calls[id] != 1 {
			t.Errorf("document %d was checked %d times, want once", id, f.calls[id])
		}
	}
}

// A sweep in which every check fails returns a few of the errors and how
// many refs it skipped, not one error a ref.
func TestSweepReturnsAFewOfItsErrors(t *testing.T) {
	db := pgtest.Fresh(t)
	const n = 20
	f := &failing{failing: map[int64]error{}, calls: map[int64]int{}}
	for id := int64(1); id <= n; id++ {
		putAll(t, db, id)
		age(t, db, id)
		f.failing[id] = fmt.Errorf("document %d: the event store is down", id)
	}
	swept, err := blobs.Sweep(context.Background(), db, f.check, blobs.RefGrace, 3, opTimeout)
	if swept != (blobs.Swept{Skipped: n}) || err == nil {
		t.Fatalf("Sweep: %+v, %v; want %d refs skipped and an error", swept, err, n)
	}
	joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) > 5 || !strings.Contains(err.Error(), fmt.Sprintf("%d refs skipped", n)) {
		t.Errorf("the error of %d refs skipped: %v", n, err)
	}
}

// A check that hangs (an event store that never answers) is cut by the
// timeout and its ref skipped; the sweep goes on with the next.
func TestSweepCutsACheckThatHangs(t *testing.T) {
	db := pgtest.Fresh(t)
	putAll(t, db, 1, 2, 3)
	for id := int64(1); id <= 3; id++ {
		ageAt(t, db, id, fmt.Sprintf("2026-01-01 00:0%dZ", id))
	}
	hang := blobstest.HangOn(2)
	// Only a safety net, should the sweep not cut the check.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	swept, err := blobs.Sweep(ctx, db, hang.Check, blobs.RefGrace, blobs.SweepLimit, time.Second)
	if !hang.Asked() {
		t.Fatal("the check of document 2 was never made")
	}
	if ctx.Err() != nil {
		t.Fatalf("the sweep ran until its caller's context ended: %+v, %v", swept, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || swept != (blobs.Swept{Refs: 2, Blobs: 2, Skipped: 1}) {
		t.Errorf("Sweep: %+v, %v; want documents 1's and 3's refs and blobs, 2's skipped, and %v", swept, err, context.DeadlineExceeded)
	}
	if refs := refsOf(t, db, 7); len(refs) != 1 || refs[0] != 2 {
		t.Errorf("refs %v, want the hung document 2's alone", refs)
	}
}

// The sweep ends when its context does: it looks at no ref after, and
// says why.
func TestSweepEndsWithItsContext(t *testing.T) {
	db := pgtest.Fresh(t)
	putAll(t, db, 1, 2, 3, 4)
	for id := int64(1); id <= 4; id++ {
		age(t, db, id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	ends := func(ctx context.Context, _ int64) (bool, error) {
		calls++
		cancel()
		return false, ctx.Err()
	}
	swept, err := blobs.Sweep(ctx, db, ends, blobs.RefGrace, 2, opTimeout)
	if !errors.Is(err, context.Canceled) || swept != (blobs.Swept{}) || calls != 1 {
		t.Errorf("Sweep: %+v, %v after %d checks; want nothing done, %v, after 1", swept, err, calls, context.Canceled)
	}
	if refs := refsOf(t, db, 7); len(refs) != 4 {
		t.Errorf("refs %v, want all 4", refs)
	}
}

// A sweep that cannot tell whether a document is recorded deletes nothing
// of it, and says why.
func TestSweepKeepsWhatItCannotCheck(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	if _, err := blobs.New(db, nil).Put(ctx, 7, 1, []byte("text")); err != nil {
		t.Fatal(err)
	}
	age(t, db, 1)
	down := errors.New("the event store is down")
	swept, err := blobs.Sweep(ctx, db, func(context.Context, int64) (bool, error) { return false, down }, blobs.RefGrace, blobs.SweepLimit, opTimeout)
	if !errors.Is(err, down) || swept != (blobs.Swept{Skipped: 1}) {
		t.Errorf("Sweep: %+v, %v; want nothing deleted, the ref skipped, and %v", swept, err, down)
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
			_, err := blobs.Sweep(ctx, db, none.check, blobs.RefGrace, blobs.SweepLimit, opTimeout)
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
	for name, store := range map[string]eventstore.Store{"postgres": pg, "esdbfake": esdbfake.OpenStore(t)} {
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

// A sweep's pages read the index of the refs not yet found recorded
// (document_blob_refs_unrecorded), not the table whole: on a table most of
// whose refs are recorded (as a live service's are), a page after a ref
// seen scans that index from that ref on.
func TestSweepPagesReadTheIndex(t *testing.T) {
	db := pgtest.Fresh(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO document_blob_refs (owner_id, hash, knowledge_id, recorded, created_at)
		SELECT i % 1000, md5(i::text), i, i % 100 <> 0, timestamptz '2026-01-01Z' + i * interval '1 s'
		FROM generate_series(1, 100000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE document_blob_refs`); err != nil {
		t.Fatal(err)
	}
	last := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	plan := pgtest.Explain(t, db, blobs.SweepNextPage, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), blobs.SweepLimit,
		last, int64(600), "a hash", int64(600))
	t.Logf("the next page:\n%s", plan)
	if !strings.Contains(plan, " using document_blob_refs_unrecorded on document_blob_refs") || strings.Contains(plan, "Seq Scan") {
		t.Errorf("a page does not read the index document_blob_refs_unrecorded (or reads the table whole):\n%s", plan)
	}
}
