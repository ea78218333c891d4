package commands

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"lectern/aggregates"
	"lectern/blobs"
	"lectern/clocktest"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/knowledge"
	"lectern/pgtest"
	"lectern/queries"
)

const cellsText = "Mitochondria are the powerhouse of the cell. The cell divides."

// knowledgeDeps are the dependencies of the knowledge commands on a fresh
// database; wrap, if set, wraps the event store.
func knowledgeDeps(t *testing.T, wrap func(eventstore.Store) eventstore.Store) Deps {
	t.Helper()
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	var store eventstore.Store = pg
	if wrap != nil {
		store = wrap(pg)
	}
	return Deps{Store: store, Registry: events.NewRegistry(), DB: pool, Now: time.Now, IDs: NewSequences(pool),
		Embedder: knowledge.NewOffline(), Blobs: blobs.New(pool, nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func uploadCells(t *testing.T, k *Knowledge, owner int64) int64 {
	t.Helper()
	doc, _, _, err := k.Upload(context.Background(), aggregates.UploadKnowledgeDocument{OwnerID: owner, Title: "cells",
		ContentType: "text/plain", Size: int64(len(cellsText)), Content: cellsText})
	if err != nil {
		t.Fatal(err)
	}
	return doc.ID
}

// A document's text never changes, so a reindex of it that has not
// finished does what another would: a burst of requests gets that one job,
// not one each queued ahead of every other user's (jobs run oldest first).
func TestABurstOfReindexRequestsQueuesOneJob(t *testing.T) {
	ctx := context.Background()
	d := knowledgeDeps(t, nil)
	k, err := NewKnowledge(d)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := NewKnowledgeJobs(d)
	if err != nil {
		t.Fatal(err)
	}
	noisy, other := uploadCells(t, k, 7), uploadCells(t, k, 8)
	first, _, err := k.RequestReindex(ctx, 7, noisy)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		again, _, err := k.RequestReindex(ctx, 7, noisy)
		if err != nil || again.JobID != first.JobID || again.Status != aggregates.JobQueued {
			t.Fatalf("request %d: job %d %q, %v; want the queued job %d", i+2, again.JobID, again.Status, err, first.JobID)
		}
	}
	var rows int
	if err := d.DB.QueryRow(ctx, `SELECT count(*) FROM knowledge_reindex_jobs WHERE knowledge_id = $1`, noisy).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d jobs of the document; want 1", rows)
	}
	theirs, _, err := k.RequestReindex(ctx, 8, other)
	if err != nil || theirs.JobID == first.JobID {
		t.Fatalf("another user's request: job %d, %v", theirs.JobID, err)
	}
	for range 2 {
		if worked, err := jobs.RunOneJob(ctx); err != nil || !worked {
			t.Fatalf("worked %v, %v", worked, err)
		}
	}
	for _, j := range []queries.ReindexJob{first, theirs} {
		owner := map[int64]int64{noisy: 7, other: 8}[j.KnowledgeID]
		row, err := queries.New(d.DB).ReindexJob(ctx, owner, j.KnowledgeID, j.JobID)
		if err != nil || row.Status != aggregates.JobCompleted {
			t.Errorf("job %d after two runs: %q, %v; want completed", j.JobID, row.Status, err)
		}
	}
	// Finished: the next request is a new job.
	next, _, err := k.RequestReindex(ctx, 7, noisy)
	if err != nil || next.JobID == first.JobID || next.Status != aggregates.JobQueued {
		t.Errorf("a request after the job finished: job %d %q, %v; want a new queued job", next.JobID, next.Status, err)
	}
}

// reindexAppends answers the appends of reindex requests with err, after
// appending them for real if commit is set; while *failing, when given.
type reindexAppends struct {
	eventstore.Store
	commit  bool
	err     error
	failing *bool // nil: always
}

func (s reindexAppends) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	if len(evs) == 0 || evs[0].Type != (events.KnowledgeReindexRequested{}).EventType() || (s.failing != nil && !*s.failing) {
		return s.Store.Append(ctx, stream, expected, evs)
	}
	if s.commit {
		if _, err := s.Store.Append(ctx, stream, expected, evs); err != nil {
			return eventstore.AppendResult{}, err
		}
	}
	return eventstore.AppendResult{}, s.err
}

// A request whose append may have committed (its answer lost: a time-out)
// keeps its job, which runs once its request is read; one that surely wrote
// nothing (its version taken every time) withdraws it.
func TestAReindexRequestWhoseAnswerWasLostKeepsItsJob(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		store    reindexAppends
		wantErr  error
		wantJobs int
	}{
		{"answer lost after the commit", reindexAppends{commit: true, err: context.DeadlineExceeded}, context.DeadlineExceeded, 1},
		{"version taken every time", reindexAppends{err: eventstore.ErrWrongExpectedVersion}, derrors.ErrConflict, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := knowledgeDeps(t, func(s eventstore.Store) eventstore.Store { tc.store.Store = s; return tc.store })
			k, err := NewKnowledge(d)
			if err != nil {
				t.Fatal(err)
			}
			doc := uploadCells(t, k, 7)
			if _, _, err := k.RequestReindex(ctx, 7, doc); !errors.Is(err, tc.wantErr) {
				t.Fatalf("request: %v; want %v", err, tc.wantErr)
			}
			rows, err := d.DB.Query(ctx, `SELECT job_id FROM knowledge_reindex_jobs WHERE knowledge_id = $1`, doc)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil || len(ids) != tc.wantJobs {
				t.Fatalf("jobs %v (%v); want %d", ids, err, tc.wantJobs)
			}
			if tc.wantJobs == 0 {
				return
			}
			jobs, err := NewKnowledgeJobs(d)
			if err != nil {
				t.Fatal(err)
			}
			if worked, err := jobs.RunOneJob(ctx); err != nil || !worked {
				t.Fatalf("worked %v, %v", worked, err)
			}
			row, err := queries.New(d.DB).ReindexJob(ctx, 7, doc, ids[0])
			state, _, _, lerr := load(ctx, d, knowledgeStream(doc), aggregates.EvolveKnowledgeDocument)
			if err != nil || lerr != nil || row.Status != aggregates.JobCompleted || state.Jobs[ids[0]] != aggregates.JobCompleted {
				t.Errorf("job %d: row %q (%v), history %q (%v); want both completed", ids[0], row.Status, err, state.Jobs[ids[0]], lerr)
			}
		})
	}
}

// stalledEmbedder holds its callers at gate (after telling waiting), then
// answers as an embedder that timed out.
type stalledEmbedder struct{ waiting, gate chan struct{} }

func (b stalledEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	b.waiting <- struct{}{}
	<-b.gate
	return nil, errors.New("embeddings: context deadline exceeded")
}

// A worker whose job outlived its lease (its embedder slower than the
// lease) has lost it: another worker takes the job over and finishes it,
// and the first, when its call ends at last, leaves that outcome alone, in
// the job's row as in its history.
func TestAWorkerPastItsLeaseLeavesTheJobToItsNewWorker(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Now().UTC())
	d := knowledgeDeps(t, nil)
	d.Now = clock.Now
	k, err := NewKnowledge(d)
	if err != nil {
		t.Fatal(err)
	}
	doc := uploadCells(t, k, 7)
	job, _, err := k.RequestReindex(ctx, 7, doc)
	if err != nil {
		t.Fatal(err)
	}
	slow := stalledEmbedder{waiting: make(chan struct{}, 1), gate: make(chan struct{})}
	stale := d
	stale.Embedder = slow
	a, err := NewKnowledgeJobs(stale)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewKnowledgeJobs(d)
	if err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.RunOneJob(ctx)
		aDone <- err
	}()
	<-slow.waiting // A holds the job, waiting on its embedder
	clock.Advance(time.Minute + time.Second)
	if worked, err := b.RunOneJob(ctx); err != nil || !worked {
		t.Fatalf("worker B: worked %v, %v", worked, err)
	}
	close(slow.gate)
	if err := <-aDone; err != nil {
		t.Fatalf("worker A: %v", err)
	}
	row, err := queries.New(d.DB).ReindexJob(ctx, 7, doc, job.JobID)
	state, _, _, lerr := load(ctx, d, knowledgeStream(doc), aggregates.EvolveKnowledgeDocument)
	if err != nil || lerr != nil || row.Status != aggregates.JobCompleted || row.Error != nil || state.Jobs[job.JobID] != aggregates.JobCompleted {
		t.Errorf("job %d: row %q (error %v; %v), history %q (%v); want both completed, as worker B finished it",
			job.JobID, row.Status, row.Error, err, state.Jobs[job.JobID], lerr)
	}
}

// crashAfterUploadAppend appends for real, then dies (as a process killed at
// failpoint.AppendCommitted) on the append of an upload.
type crashAfterUploadAppend struct{ eventstore.Store }

type crashed struct{}

func (s crashAfterUploadAppend) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.Store.Append(ctx, stream, expected, evs)
	if err == nil && len(evs) > 0 && evs[0].Type == (events.KnowledgeDocumentUploaded{}).EventType() {
		panic(crashed{})
	}
	return res, err
}

// An upload whose process died once its document was recorded, before its
// indexing, left a listed document that nothing indexed: the worker now
// queues its job once it is past unindexedGrace. A document indexing has
// not had its time yet, and one whose job failed (its owner's to ask
// again), are left alone.
func TestAnUploadCutShortAfterItsAppendIsIndexedLater(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Now().UTC().Truncate(time.Microsecond))
	d := knowledgeDeps(t, nil)
	d.Now = clock.Now
	dying := d
	dying.Store = crashAfterUploadAppend{d.Store}
	cut, err := NewKnowledge(dying)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if _, ok := recover().(crashed); !ok {
				t.Fatal("the upload did not die after its append")
			}
		}()
		_, _, _, _ = cut.Upload(ctx, aggregates.UploadKnowledgeDocument{OwnerID: 7, Title: "cells", ContentType: "text/plain",
			Size: int64(len(cellsText)), Content: cellsText})
	}()
	k, err := NewKnowledge(d)
	if err != nil {
		t.Fatal(err)
	}
	failed := uploadCells(t, k, 8)
	if _, err := d.DB.Exec(ctx, `DELETE FROM knowledge_chunks WHERE knowledge_id = $1`, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DB.Exec(ctx, `INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, finished_at, error)
		VALUES (999, $1, 8, 'failed', $2, $2, 'embeddings: status 503')`, failed, clock.Now()); err != nil {
		t.Fatal(err)
	}
	// The documents' rows, as the knowledge projection writes them.
	listed := func(id, owner int64) {
		t.Helper()
		if _, err := d.DB.Exec(ctx, `INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
			VALUES ($1, $2, 'cells', 'text/plain', 10, $3, $3, 1) ON CONFLICT (id) DO NOTHING`, id, owner, clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	const cutShort = int64(1)
	listed(cutShort, 7)
	listed(failed, 8)

	jobs, err := NewKnowledgeJobs(d)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := jobs.QueueUnindexed(ctx); err != nil || n != 0 {
		t.Fatalf("within the grace: %d queued, %v; want none", n, err)
	}
	clock.Advance(unindexedGrace + time.Second)
	if n, err := jobs.QueueUnindexed(ctx); err != nil || n != 1 {
		t.Fatalf("past the grace: %d queued, %v; want the document cut short", n, err)
	}
	if n, err := jobs.QueueUnindexed(ctx); err != nil || n != 0 {
		t.Fatalf("again: %d queued, %v; want none (its job is queued)", n, err)
	}
	if worked, err := jobs.RunOneJob(ctx); err != nil || !worked {
		t.Fatalf("worked %v, %v", worked, err)
	}
	var chunks, failedChunks int
	if err := d.DB.QueryRow(ctx, `SELECT (SELECT count(*) FROM knowledge_chunks WHERE knowledge_id = $1),
		(SELECT count(*) FROM knowledge_chunks WHERE knowledge_id = $2)`, cutShort, failed).Scan(&chunks, &failedChunks); err != nil {
		t.Fatal(err)
	}
	if chunks == 0 || failedChunks != 0 {
		t.Errorf("chunks: %d of the document cut short (want some), %d of the one whose job failed (want none)", chunks, failedChunks)
	}
}

// A request under an Idempotency-Key whose append failed without knowing
// whether it was written keeps its job; its retry, under the same key,
// draws the same job id and takes that job (not a 503 for the duplicate).
func TestAReindexRetriedUnderItsKeyTakesItsJob(t *testing.T) {
	ctx := context.Background()
	failing := true
	d := knowledgeDeps(t, func(s eventstore.Store) eventstore.Store {
		return reindexAppends{Store: s, err: context.DeadlineExceeded, failing: &failing}
	})
	k, err := NewKnowledge(d)
	if err != nil {
		t.Fatal(err)
	}
	doc := uploadCells(t, k, 7)
	since := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := d.DB.Exec(ctx, `INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, created_at)
		VALUES (7, 'retry-me', 'POST reindex', 0, '{}', '', $1)`, since); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.RequestReindex(WithIdempotency(ctx, 7, "retry-me", since), 7, doc); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first attempt: %v", err)
	}
	failing = false
	job, _, err := k.RequestReindex(WithIdempotency(ctx, 7, "retry-me", since), 7, doc)
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	var rows int
	if err := d.DB.QueryRow(ctx, `SELECT count(*) FROM knowledge_reindex_jobs WHERE knowledge_id = $1`, doc).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	state, _, _, err := load(ctx, d, knowledgeStream(doc), aggregates.EvolveKnowledgeDocument)
	if err != nil || rows != 1 || state.Jobs[job.JobID] != aggregates.JobQueued {
		t.Errorf("after the retry: %d job rows, job %d in the history %q (%v); want the one job, requested", rows, job.JobID, state.Jobs[job.JobID], err)
	}
}
