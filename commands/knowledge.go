package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/aggregates"
	"lectern/blobs"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/knowledge"
	"lectern/personal"
	"lectern/queries"
	"lectern/ratelimit"
)

// Knowledge is the knowledge documents use cases: upload, tune search
// settings, request a reindex; and a document's text, for a personal export.
// Searching is queries.KnowledgeSearch's; KnowledgeJobs works the reindex
// jobs.
//
// A document's settings are events and its text a blob the upload event
// refers to (package blobs); its chunks and vectors are derived data in
// knowledge_chunks, rebuilt whole by indexing: at upload
// (synchronously, within the request) and by reindex jobs (in the background).
type Knowledge struct {
	d Deps
	indexer
	limiter *ratelimit.Limiter
	uploads ratelimit.Rate // Limits.Uploads
}

// NewKnowledge refuses missing dependencies: it needs d.Embedder and d.Blobs.
func NewKnowledge(d Deps) (*Knowledge, error) {
	idx, err := newIndexer(d)
	if err = errors.Join(d.Validate(), err); err != nil {
		return nil, err
	}
	return &Knowledge{d: d, indexer: idx, limiter: ratelimit.New(d.DB, d.Now), uploads: d.Limits.withDefaults().Uploads}, nil
}

// LimitUpload takes a token from the user's bucket of uploads
// (Limits.Uploads), before the upload is read and its text extracted: a
// 429 with Retry-After when it is empty.
func (k *Knowledge) LimitUpload(ctx context.Context, userID int64) error {
	return allow(ctx, k.limiter, UploadBucket(userID), k.uploads, "Too many documents uploaded; try again later")
}

// UploadBucket is the token bucket of a user's uploads (erasure deletes
// it; the export shows it).
func UploadBucket(userID int64) string { return "uploads:" + strconv.FormatInt(userID, 10) }

// KnowledgeJobs is the reindex worker: it claims the queued jobs
// (Knowledge.RequestReindex), indexes the document again and records the
// outcome. service.RunBackground runs it.
type KnowledgeJobs struct {
	d Deps
	indexer
	logger *slog.Logger
	// poll is how often an idle worker looks for a job.
	poll time.Duration
	// lease is how long a claimed job is the worker's before another worker
	// may take it up; the worker renews it after each batch.
	lease time.Duration
}

// NewKnowledgeJobs refuses missing dependencies: it needs d.Embedder,
// d.Blobs and d.Logger.
func NewKnowledgeJobs(d Deps) (*KnowledgeJobs, error) {
	idx, err := newIndexer(d)
	err = errors.Join(d.Validate(), err)
	if d.Logger == nil {
		err = errors.Join(err, errors.New("commands: nil logger"))
	}
	if err != nil {
		return nil, err
	}
	return &KnowledgeJobs{d: d, indexer: idx, logger: d.Logger, poll: 200 * time.Millisecond, lease: time.Minute}, nil
}

// indexer builds documents' chunks and vectors, and reads their texts.
type indexer struct {
	db       *pgxpool.Pool
	embedder knowledge.Embedder
	blobs    *blobs.Store
}

func newIndexer(d Deps) (indexer, error) {
	var err error
	if d.Blobs == nil {
		err = errors.Join(err, errors.New("commands: nil blob store"))
	}
	if d.Embedder == nil {
		err = errors.Join(err, errors.New("commands: nil embedder"))
	}
	return indexer{db: d.DB, embedder: d.Embedder, blobs: d.Blobs}, err
}

func knowledgeStream(id int64) string { return eventstore.StreamName(events.CategoryKnowledge, id) }

// embedBatch is how many chunks are embedded between progress reports.
const embedBatch = 32

// Upload records the document c describes and indexes it; it returns the
// number of chunks. Once the document is recorded the upload has
// succeeded: when indexing it fails (the embedder is out of reach), its
// index is left to a reindex job, as its owner would ask for one, and it
// has no chunks until then.
func (k *Knowledge) Upload(ctx context.Context, c aggregates.UploadKnowledgeDocument) (aggregates.KnowledgeDocument, int, Result, error) {
	if c.OwnerID <= 0 {
		return aggregates.KnowledgeDocument{}, 0, Result{}, errors.New("upload knowledge document: no owner")
	}
	id, err := nextID(ctx, k.d, "knowledge_ids")
	if err != nil {
		return aggregates.KnowledgeDocument{}, 0, Result{}, err
	}
	c.KnowledgeID = id
	// The text is stored before the event that refers to it: a failed
	// append leaves an unreferenced blob, never an event without its text.
	// The blob's ref of this id lets blobs.Sweep delete it then.
	ref, err := k.blobs.Put(ctx, c.OwnerID, id, []byte(c.Content))
	if err != nil {
		return aggregates.KnowledgeDocument{}, 0, Result{}, err
	}
	recorded(ctx, len(c.Content))
	c.ContentHash, c.ContentSize = ref.Hash, ref.Size
	doc, res, err := create(ctx, k.d, knowledgeStream(id), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideUploadKnowledgeDocument(d, c)
		})
	if err != nil {
		return doc, 0, res, err
	}
	n, err := k.index(ctx, id, c.OwnerID, &ref, c.Content, nil)
	if err == nil || errors.Is(err, personal.ErrSubjectErased) {
		return doc, n, res, err
	}
	if k.d.Logger != nil {
		// Not the error's text: an embedder's may quote the document.
		k.d.Logger.Warn("indexing an uploaded document failed; a reindex job takes it over", "knowledge_id", id,
			"timeout", errors.Is(err, context.DeadlineExceeded))
	}
	// On a context of its own: indexing may have failed at the write's bound.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, jobRes, jerr := k.RequestReindex(jctx, c.OwnerID, id)
	if jerr != nil {
		// Neither indexed nor queued: the caller hears of it (a retry with
		// its Idempotency-Key finds the document recorded, and indexes it).
		// Not err: an embedder's answer may quote the document. jerr only
		// for the log: whatever refused the job, the answer is this one.
		return doc, 0, res, fmt.Errorf("%w (queueing its reindex job: %v)", errNotIndexed, jerr) //nolint:errorlint // jerr only as text: the answer is errNotIndexed whatever it was
	}
	return doc, 0, jobRes, nil // the later position: a read after the answer sees the job too
}

// errNotIndexed answers an upload that recorded its document but could
// neither index it nor queue its reindex job: a 503 (not a 500, which the
// upload does not answer), since the same request may be sent again.
var errNotIndexed = derrors.New(derrors.ErrUnavailable,
	"The document was recorded but could not be indexed; retry in a moment (a write with the same Idempotency-Key)")

// UpdateSettings applies a merge update of a document's search settings.
func (k *Knowledge) UpdateSettings(ctx context.Context, c aggregates.UpdateKnowledgeSettings) (aggregates.KnowledgeDocument, Result, error) {
	return execute(ctx, k.d, knowledgeStream(c.KnowledgeID), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideUpdateKnowledgeSettings(d, c)
		})
}

// RequestReindex queues a reindex job of the caller's document and records
// the request. The job row is written first, so that a request whose event
// stands always has its job; an append that surely wrote nothing withdraws
// it. A job of the document that has not finished is the answer instead of
// a new one: a document's text never changes, so it would do the same
// work, and a burst of requests would queue as many jobs ahead of every
// other user's (jobs run oldest first).
func (k *Knowledge) RequestReindex(ctx context.Context, caller, knowledgeID int64) (queries.ReindexJob, Result, error) {
	state, _, _, err := load(ctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument)
	if err != nil {
		return queries.ReindexJob{}, Result{}, err
	}
	if !state.Exists() || state.OwnerID != caller {
		return queries.ReindexJob{}, Result{}, derrors.New(derrors.ErrNotFound, "Knowledge document not found")
	}
	if job, ok, err := k.openJob(ctx, state); ok || err != nil {
		return job, Result{}, err
	}
	jobID, err := nextID(ctx, k.d, "knowledge_job_ids")
	if err != nil {
		return queries.ReindexJob{}, Result{}, err
	}
	job := queries.ReindexJob{JobID: jobID, KnowledgeID: knowledgeID, Status: aggregates.JobQueued,
		RequestedAt: k.d.Now().UTC().Truncate(time.Microsecond)}
	// A retry under an Idempotency-Key draws its dead attempt's job id, whose
	// row may still wait for its request: that row is this job's.
	var requestedAt time.Time
	err = k.d.DB.QueryRow(ctx, `
		INSERT INTO knowledge_reindex_jobs AS j (job_id, knowledge_id, user_id, status, requested_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (job_id) DO UPDATE SET job_id = j.job_id WHERE j.knowledge_id = $2 AND j.user_id = $3 AND j.status IN ('queued', 'running')
		RETURNING requested_at`,
		job.JobID, job.KnowledgeID, caller, job.Status, job.RequestedAt).Scan(&requestedAt)
	if err != nil {
		return queries.ReindexJob{}, Result{}, fmt.Errorf("queue reindex job %d: %w", job.JobID, err)
	}
	job.RequestedAt = requestedAt
	_, res, err := execute(ctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideRequestReindex(d, aggregates.RequestReindex{KnowledgeID: knowledgeID, CallerID: caller, JobID: jobID})
		})
	if err != nil {
		if wroteNothing(err) {
			_, _ = k.d.DB.Exec(context.WithoutCancel(ctx), `DELETE FROM knowledge_reindex_jobs WHERE job_id = $1 AND status = 'queued'`, jobID)
		}
		// Else the request may stand (an answer lost after the commit): the
		// job stays, and runs once the request is read, or is dropped by
		// the worker after requestGrace if it never was recorded.
		return queries.ReindexJob{}, Result{}, err
	}
	return job, res, nil
}

// openJob is the first of the document's jobs whose request its history
// holds and that has not finished (queued, or running), if any.
func (k *Knowledge) openJob(ctx context.Context, doc aggregates.KnowledgeDocument) (queries.ReindexJob, bool, error) {
	var open []int64
	for id, status := range doc.Jobs {
		if status == aggregates.JobQueued {
			open = append(open, id)
		}
	}
	if len(open) == 0 {
		return queries.ReindexJob{}, false, nil
	}
	// None when they finished since (the row first, then its event).
	return queries.New(k.d.DB).OpenReindexJob(ctx, doc.ID, open)
}

// index rebuilds a document's chunks and vectors, reporting progress after
// each batch; it returns the number of chunks. The old chunks give way to the
// new in one transaction, so a search sees one index or the other.
//
// The document's text is its owner's blob (nil: the text its upload event
// held before blobs). The chunks are written only while the blob is there,
// and it is held until they commit: an erasure deletes the owner's blobs
// before their chunks, so it either waits for these chunks and deletes
// them, or they are not written (personal.ErrSubjectErased).
func (k indexer) index(ctx context.Context, id, owner int64, blob *blobs.Ref, content string, progress func(done, total int) error) (int, error) {
	chunks := knowledge.Chunk(content, knowledge.ChunkSize, knowledge.ChunkOverlap)
	vectors := make([][]float32, 0, len(chunks))
	for start := 0; start < len(chunks); start += embedBatch {
		batch := chunks[start:min(start+embedBatch, len(chunks))]
		vs, err := k.embedder.Embed(ctx, batch)
		if err != nil {
			return 0, err
		}
		if len(vs) != len(batch) {
			return 0, fmt.Errorf("embedder: %d vectors for %d chunks", len(vs), len(batch))
		}
		vectors = append(vectors, vs...)
		if progress != nil {
			if err := progress(len(vectors), len(chunks)); err != nil {
				return 0, err
			}
		}
	}
	err := pgx.BeginFunc(ctx, k.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('knowledge_chunks'), $1::int)`, id%(1<<31)); err != nil {
			return err
		}
		// The chunks hold the text in clear: none are written once the
		// owner's erasure has begun (however long the embedder took),
		// and an erasure waits for those being written, then deletes them.
		if err := personal.HoldLiveKey(ctx, tx, personal.UserSubject(owner)); err != nil {
			return err
		}
		if blob != nil {
			var held bool
			err := tx.QueryRow(ctx, `SELECT true FROM document_blobs WHERE owner_id = $1 AND hash = $2 FOR SHARE`,
				owner, blob.Hash).Scan(&held)
			if errors.Is(err, pgx.ErrNoRows) {
				return personal.ErrSubjectErased
			}
			if err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM knowledge_chunks WHERE knowledge_id = $1`, id); err != nil {
			return err
		}
		if len(chunks) == 0 {
			return nil
		}
		var ids []int64
		if err := tx.QueryRow(ctx, `SELECT ARRAY(SELECT nextval('knowledge_chunk_ids') FROM generate_series(1, $1) ORDER BY 1)`,
			len(chunks)).Scan(&ids); err != nil {
			return err
		}
		rows := make([][]any, len(chunks))
		for i := range chunks {
			rows[i] = []any{ids[i], id, owner, i, chunks[i], vectors[i]}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"knowledge_chunks"}, []string{"id", "knowledge_id", "owner_id", "ord", "text", "embedding"},
			pgx.CopyFromRows(rows))
		return err
	})
	return len(chunks), err
}

// RunJobs works the reindex queue until ctx ends: it claims the oldest job
// that is queued, or running with an expired lease (its worker stopped), so
// that jobs survive a restart. Any number of workers may run at once.
func (k *KnowledgeJobs) RunJobs(ctx context.Context) {
	var repaired time.Time
	for ctx.Err() == nil {
		if now := k.d.Now(); now.Sub(repaired) >= repairEvery {
			repaired = now
			if _, err := k.QueueUnindexed(ctx); err != nil && ctx.Err() == nil {
				k.logger.Error("reindex worker: queueing the jobs of unindexed documents", "error", err)
			}
		}
		worked, err := k.RunOneJob(ctx)
		if err != nil && ctx.Err() == nil {
			k.logger.Error("reindex worker", "error", err)
		}
		if worked {
			continue
		}
		t := time.NewTimer(k.poll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Once a document is recorded its upload has succeeded, and its index is
// the upload's to build, or a reindex job's (Upload): a process that died
// in between left it with neither. QueueUnindexed finds such documents,
// recorded more than unindexedGrace ago (an upload's own indexing and its
// job's request end within a write's bound) with no chunk and no job at
// all, and queues their jobs; a document whose job failed is its owner's
// to ask again. The worker runs it every repairEvery.
const (
	unindexedGrace = 10 * time.Minute
	repairEvery    = time.Minute
	repairBatch    = 100
)

// QueueUnindexed queues a reindex job for each document left unindexed (see
// above), up to repairBatch of them, and returns how many it queued.
func (k *KnowledgeJobs) QueueUnindexed(ctx context.Context) (int, error) {
	rows, err := k.d.DB.Query(ctx, `
		SELECT d.id, d.user_id FROM knowledge_documents d
		WHERE d.created_at < $1
		  AND NOT EXISTS (SELECT 1 FROM knowledge_chunks c WHERE c.knowledge_id = d.id)
		  AND NOT EXISTS (SELECT 1 FROM knowledge_reindex_jobs j WHERE j.knowledge_id = d.id)
		ORDER BY d.id LIMIT $2`, k.d.Now().Add(-unindexedGrace), repairBatch)
	if err != nil {
		return 0, err
	}
	type doc struct{ id, owner int64 }
	docs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (doc, error) {
		var d doc
		err := row.Scan(&d.id, &d.owner)
		return d, err
	})
	if err != nil {
		return 0, err
	}
	queued := 0
	requests := &Knowledge{d: k.d, indexer: k.indexer}
	for _, d := range docs {
		wctx := WithMetadata(ctx, eventstore.Metadata{UserID: d.owner, CorrelationID: fmt.Sprintf("unindexed-document:%d", d.id)})
		job, _, err := requests.RequestReindex(wctx, d.owner, d.id)
		if errors.Is(err, derrors.ErrNotFound) {
			continue // erased, or its read model ahead of its stream
		}
		if err != nil {
			return queued, fmt.Errorf("knowledge document %d: %w", d.id, err)
		}
		k.logger.Warn("reindex job queued for a document left unindexed", "knowledge_id", d.id, "job_id", job.JobID)
		queued++
	}
	return queued, nil
}

// RunOneJob claims and runs one job; false when there was none.
func (k *KnowledgeJobs) RunOneJob(ctx context.Context) (bool, error) {
	now := k.d.Now().UTC().Truncate(time.Microsecond)
	lease := now.Add(k.lease)
	var jobID, knowledgeID int64
	err := pgx.BeginFunc(ctx, k.d.DB, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			SELECT job_id, knowledge_id FROM knowledge_reindex_jobs
			WHERE (status = 'queued' AND (lease_until IS NULL OR lease_until < $1)) OR (status = 'running' AND lease_until < $1)
			ORDER BY job_id LIMIT 1 FOR UPDATE SKIP LOCKED`, now).Scan(&jobID, &knowledgeID)
		if err != nil {
			return err
		}
		// Replicas' clocks differ, and now was read before the claim: the
		// job never starts before it was requested.
		_, err = tx.Exec(ctx, `UPDATE knowledge_reindex_jobs SET status = 'running',
			started_at = COALESCE(started_at, GREATEST($2, requested_at)),
			lease_until = $3 WHERE job_id = $1`, jobID, now, lease)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = k.runJob(ctx, jobID, knowledgeID, lease)
	if errors.Is(err, errNotRequested) {
		return false, nil // not worked: the worker waits before it looks again
	}
	return true, err
}

// requestGrace is how long a job whose request is not recorded may be
// waiting for it: RequestReindex writes the job, then appends the request,
// within a write's bound (a minute) and the replicas' clock skew.
const requestGrace = 10 * time.Minute

// requestWait is how long a job put back to wait for its request is left
// alone.
const requestWait = 2 * time.Second

// errNotRequested is a claimed job whose request is not recorded (yet).
var errNotRequested = errors.New("reindex job: its request is not recorded")

func (k *KnowledgeJobs) runJob(ctx context.Context, jobID, knowledgeID int64, lease time.Time) error {
	// A job runs only once its request is in the document's history: a
	// request whose append fails withdraws its job, and one still being
	// appended must not find its job finished before it.
	doc, _, _, err := load(ctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument)
	if err != nil {
		return err
	}
	if _, requested := doc.Jobs[jobID]; !requested {
		return k.unrequested(ctx, jobID, lease)
	}
	k.logger.Info("reindex job started", "job_id", jobID, "knowledge_id", knowledgeID)
	total, err := k.reindex(ctx, jobID, doc, &lease)
	if ctx.Err() != nil {
		return ctx.Err() // stopping: the lease runs out and a worker resumes the job
	}
	if errors.Is(err, errLostLease) {
		k.logger.Warn("reindex job taken over: its lease ran out while it ran", "job_id", jobID)
		return nil
	}
	finish := aggregates.FinishReindex{KnowledgeID: knowledgeID, JobID: jobID, ChunksTotal: total}
	if err != nil {
		msg := jobError(err)
		k.logger.Warn("reindex job failed", "job_id", jobID, "knowledge_id", knowledgeID, "error", msg)
		finish.Error = &msg
	}
	wctx := WithMetadata(ctx, eventstore.Metadata{CorrelationID: fmt.Sprintf("reindex-job:%d", jobID),
		CausationID: fmt.Sprintf("reindex-job:%d", jobID)})
	state, res, err := execute(wctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideFinishReindex(d, finish)
		})
	if err != nil {
		return err
	}
	// The row says what the history says: this run's outcome if it was
	// recorded, else the one recorded before (a run this worker resumed
	// after a stop), whose counts and error the row holds already. Only
	// under this worker's lease: a worker that outlived it, and whose
	// job another took over and finished, leaves that one's row alone.
	_, err = k.d.DB.Exec(ctx, `UPDATE knowledge_reindex_jobs SET status = $2, finished_at = GREATEST($3, started_at), lease_until = NULL,
		error = CASE WHEN $6 THEN $4 ELSE error END,
		chunks_total = CASE WHEN $6 AND $2 = 'completed' THEN $5 ELSE chunks_total END,
		chunks_done = CASE WHEN $6 AND $2 = 'completed' THEN $5 ELSE chunks_done END
		WHERE job_id = $1 AND status = 'running' AND lease_until = $7`,
		jobID, state.Jobs[jobID], k.d.Now().UTC().Truncate(time.Microsecond), finish.Error, total, res.Appended, lease)
	return err
}

// errLostLease is a reindex job whose lease ran out while it ran: another
// worker may have it now.
var errLostLease = errors.New("reindex job: its lease ran out")

// jobError is what a failed reindex job keeps of its error, in its event
// (in clear: it is no personal field), its row and the log: an embedder's
// refusal by its status alone, as its answer may quote the document, which
// the erasure could then not reach.
func jobError(err error) string {
	var refused *knowledge.StatusError
	if errors.As(err, &refused) {
		return fmt.Sprintf("embeddings: status %d (the embedder's answer is not kept: it may quote the document)", refused.Status)
	}
	return err.Error()
}

// unrequested puts back a job whose request is not recorded: its request
// is still being appended, or it failed without withdrawing the job (its
// process stopped). Past requestGrace, it is dropped.
// Both act only on the job as this worker claimed it (lease): one that
// outlived its lease is another worker's now.
func (k *KnowledgeJobs) unrequested(ctx context.Context, jobID int64, lease time.Time) error {
	cutoff := k.d.Now().UTC().Add(-requestGrace)
	tag, err := k.d.DB.Exec(ctx, `DELETE FROM knowledge_reindex_jobs
		WHERE job_id = $1 AND requested_at < $2 AND status = 'running' AND lease_until = $3`, jobID, cutoff, lease)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		k.logger.Warn("reindex job dropped: its request was never recorded", "job_id", jobID)
		return errNotRequested
	}
	// Back in the queue, not to be claimed again for a moment (a queued
	// job's lease_until is when it may be): the jobs after it go first.
	if _, err := k.d.DB.Exec(ctx, `UPDATE knowledge_reindex_jobs SET status = 'queued', started_at = NULL, lease_until = $2
		WHERE job_id = $1 AND status = 'running' AND lease_until = $3`, jobID, k.d.Now().UTC().Add(requestWait), lease); err != nil {
		return err
	}
	return errNotRequested
}

// DocumentText is the text of the caller's document (a personal export).
func (k *Knowledge) DocumentText(ctx context.Context, caller, knowledgeID int64) (string, error) {
	doc, _, _, err := load(ctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument)
	if err != nil {
		return "", err
	}
	if !doc.Exists() || doc.OwnerID != caller {
		return "", derrors.New(derrors.ErrNotFound, "Knowledge document not found")
	}
	return k.text(ctx, doc)
}

// text is a document's text: its blob, or the text its upload event held
// before blobs.
func (k indexer) text(ctx context.Context, doc aggregates.KnowledgeDocument) (string, error) {
	ref := blobOf(doc)
	if ref == nil {
		return doc.Content, nil
	}
	content, err := k.blobs.Get(ctx, doc.OwnerID, *ref)
	if err != nil {
		return "", fmt.Errorf("the text of knowledge document %d: %w", doc.ID, err)
	}
	return string(content), nil
}

// blobOf is the address of a document's text, its owner's blob; nil for a
// document whose upload event held the text, before blobs.
func blobOf(doc aggregates.KnowledgeDocument) *blobs.Ref {
	if doc.Content != "" || doc.ContentHash == "" {
		return nil
	}
	return &blobs.Ref{Hash: doc.ContentHash, Size: doc.ContentSize}
}

// reindex indexes doc, as runJob loaded it, again for job jobID, held
// under lease, which each report of progress renews (errLostLease when the
// job is no longer held so).
func (k *KnowledgeJobs) reindex(ctx context.Context, jobID int64, doc aggregates.KnowledgeDocument, lease *time.Time) (int, error) {
	if !doc.Exists() {
		return 0, errors.New("the document does not exist")
	}
	text, err := k.text(ctx, doc)
	if err != nil {
		return 0, err
	}
	return k.index(ctx, doc.ID, doc.OwnerID, blobOf(doc), text, func(done, total int) error {
		renewed := k.d.Now().UTC().Truncate(time.Microsecond).Add(k.lease)
		tag, err := k.d.DB.Exec(ctx, `UPDATE knowledge_reindex_jobs SET chunks_done = $2, chunks_total = $3, lease_until = $4
			WHERE job_id = $1 AND status = 'running' AND lease_until = $5`, jobID, done, total, renewed, *lease)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errLostLease
		}
		*lease = renewed
		return nil
	})
}
