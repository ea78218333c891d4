package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"lectern/aggregates"
	"lectern/blobs"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/knowledge"
	"lectern/queries"
)

// Knowledge is the knowledge documents use cases (wired in service.New):
// upload, tune search settings, reindex, search, and the reindex worker.
//
// A document's settings are events and its text a blob the upload event
// refers to (package blobs); its chunks and vectors are derived data in
// knowledge_chunks, rebuilt whole by indexing: at upload
// (synchronously, within the request) and by reindex jobs (in the background).
type Knowledge struct {
	d        Deps
	reads    *queries.DB
	embedder knowledge.Embedder
	blobs    *blobs.Store
	logger   *slog.Logger
	vectors  *vectorCache
	// Poll is how often an idle worker looks for a job (default 200 ms).
	Poll time.Duration
	// Lease is how long a claimed job is the worker's before another worker
	// may take it up (default 1 min); the worker renews it after each batch.
	Lease time.Duration
}

// NewKnowledge refuses missing dependencies.
func NewKnowledge(d Deps, reads *queries.DB, embedder knowledge.Embedder, texts *blobs.Store, logger *slog.Logger) (*Knowledge, error) {
	err := d.Validate()
	if texts == nil {
		err = errors.Join(err, errors.New("commands: nil blob store"))
	}
	if reads == nil {
		err = errors.Join(err, errors.New("commands: nil read models"))
	}
	if embedder == nil {
		err = errors.Join(err, errors.New("commands: nil embedder"))
	}
	if logger == nil {
		err = errors.Join(err, errors.New("commands: nil logger"))
	}
	if err != nil {
		return nil, err
	}
	return &Knowledge{d: d, reads: reads, embedder: embedder, blobs: texts, logger: logger, vectors: newVectorCache(d.DB),
		Poll: 200 * time.Millisecond, Lease: time.Minute}, nil
}

func knowledgeStream(id int64) string { return eventstore.StreamName(events.CategoryKnowledge, id) }

// embedBatch is how many chunks are embedded between progress reports.
const embedBatch = 32

// Upload records the document c describes and indexes it; it returns the
// number of chunks.
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
	ref, err := k.blobs.Put(ctx, c.OwnerID, []byte(c.Content))
	if err != nil {
		return aggregates.KnowledgeDocument{}, 0, Result{}, err
	}
	c.ContentHash, c.ContentSize = ref.Hash, ref.Size
	doc, res, err := create(ctx, k.d, knowledgeStream(id), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideUploadKnowledgeDocument(d, c)
		})
	if err != nil {
		return doc, 0, res, err
	}
	n, err := k.index(ctx, id, c.Content, nil)
	return doc, n, res, err
}

// UpdateSettings applies a merge update of a document's search settings.
func (k *Knowledge) UpdateSettings(ctx context.Context, c aggregates.UpdateKnowledgeSettings) (aggregates.KnowledgeDocument, Result, error) {
	return execute(ctx, k.d, knowledgeStream(c.KnowledgeID), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideUpdateKnowledgeSettings(d, c)
		})
}

// RequestReindex queues a reindex job of the caller's document and records
// the request. The job row is written first, so that a request whose event
// stands always has its job; a failed append withdraws it.
func (k *Knowledge) RequestReindex(ctx context.Context, caller, knowledgeID int64) (queries.ReindexJob, Result, error) {
	state, _, _, err := load(ctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument)
	if err != nil {
		return queries.ReindexJob{}, Result{}, err
	}
	if !state.Exists() || state.OwnerID != caller {
		return queries.ReindexJob{}, Result{}, derrors.New(derrors.ErrNotFound, "Knowledge document not found")
	}
	jobID, err := nextID(ctx, k.d, "knowledge_job_ids")
	if err != nil {
		return queries.ReindexJob{}, Result{}, err
	}
	job := queries.ReindexJob{JobID: jobID, KnowledgeID: knowledgeID, Status: aggregates.JobQueued,
		RequestedAt: k.d.Now().UTC().Truncate(time.Microsecond)}
	if _, err := k.d.DB.Exec(ctx, `
		INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at) VALUES ($1, $2, $3, $4, $5)`,
		job.JobID, job.KnowledgeID, caller, job.Status, job.RequestedAt); err != nil {
		return queries.ReindexJob{}, Result{}, err
	}
	_, res, err := execute(ctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideRequestReindex(d, aggregates.RequestReindex{KnowledgeID: knowledgeID, CallerID: caller, JobID: jobID})
		})
	if err != nil {
		_, _ = k.d.DB.Exec(context.WithoutCancel(ctx), `DELETE FROM knowledge_reindex_jobs WHERE job_id = $1 AND status = 'queued'`, jobID)
		return queries.ReindexJob{}, Result{}, err
	}
	return job, res, nil
}

// SearchHit is a chunk that matched a search, in result order.
type SearchHit struct {
	KnowledgeID int64
	ChunkID     int64
	Text        string
	Score       float64
	Rank        int // 1-based
}

// Search finds the chunks of the caller's document that match query, with
// the document's search settings: cosine similarity, min_score, top_k, then
// the lexical reranker keeping reranker_top_n when it is enabled.
func (k *Knowledge) Search(ctx context.Context, caller, knowledgeID int64, query string) ([]SearchHit, error) {
	settings, err := k.reads.KnowledgeSettings(ctx, caller, knowledgeID)
	if err != nil {
		return nil, err
	}
	return k.search(ctx, settings, query)
}

func (k *Knowledge) search(ctx context.Context, s queries.KnowledgeSettings, query string) ([]SearchHit, error) {
	minScore, err := strconv.ParseFloat(s.MinScore, 64)
	if err != nil {
		return nil, fmt.Errorf("knowledge %d min_score %q: %w", s.KnowledgeID, s.MinScore, err)
	}
	cands, err := k.vectors.candidates(ctx, s.KnowledgeID)
	if err != nil {
		return nil, err
	}
	vs, err := k.embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, derrors.New(derrors.ErrBadGateway, "The embeddings service failed")
	}
	hits := knowledge.Search(vs[0], cands, s.TopK, minScore)
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	texts, err := k.vectors.texts(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range hits {
		hits[i].Text = texts[hits[i].ID]
	}
	if s.RerankerEnabled {
		hits = knowledge.Rerank(query, hits, s.RerankerTopN)
	}
	out := make([]SearchHit, len(hits))
	for i, h := range hits {
		out[i] = SearchHit{KnowledgeID: s.KnowledgeID, ChunkID: h.ID, Text: h.Text, Score: h.Score, Rank: i + 1}
	}
	return out, nil
}

// Passages searches each of the caller's documents ids (in order) for query
// with its own settings; ranks run across them all.
func (k *Knowledge) Passages(ctx context.Context, caller int64, ids []int64, query string) ([]SearchHit, error) {
	var out []SearchHit
	for _, id := range ids {
		hits, err := k.Search(ctx, caller, id, query)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			h.Rank = len(out) + 1
			out = append(out, h)
		}
	}
	return out, nil
}

// index rebuilds a document's chunks and vectors, reporting progress after
// each batch; it returns the number of chunks. The old chunks give way to the
// new in one transaction, so a search sees one index or the other.
func (k *Knowledge) index(ctx context.Context, id int64, content string, progress func(done, total int) error) (int, error) {
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
	err := pgx.BeginFunc(ctx, k.d.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('knowledge_chunks'), $1::int)`, id%(1<<31)); err != nil {
			return err
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
			rows[i] = []any{ids[i], id, i, chunks[i], vectors[i]}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"knowledge_chunks"}, []string{"id", "knowledge_id", "ord", "text", "embedding"},
			pgx.CopyFromRows(rows))
		return err
	})
	return len(chunks), err
}

// RunJobs works the reindex queue until ctx ends: it claims the oldest job
// that is queued, or running with an expired lease (its worker stopped), so
// that jobs survive a restart. Any number of workers may run at once.
func (k *Knowledge) RunJobs(ctx context.Context) {
	for ctx.Err() == nil {
		worked, err := k.RunOneJob(ctx)
		if err != nil && ctx.Err() == nil {
			k.logger.Error("reindex worker", "error", err)
		}
		if worked {
			continue
		}
		t := time.NewTimer(k.Poll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// RunOneJob claims and runs one job; false when there was none.
func (k *Knowledge) RunOneJob(ctx context.Context) (bool, error) {
	now := k.d.Now().UTC().Truncate(time.Microsecond)
	var jobID, knowledgeID int64
	err := pgx.BeginFunc(ctx, k.d.DB, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			SELECT job_id, knowledge_id FROM knowledge_reindex_jobs
			WHERE status = 'queued' OR (status = 'running' AND lease_until < $1)
			ORDER BY job_id LIMIT 1 FOR UPDATE SKIP LOCKED`, now).Scan(&jobID, &knowledgeID)
		if err != nil {
			return err
		}
		// Replicas' clocks differ, and now was read before the claim: the
		// job never starts before it was requested.
		_, err = tx.Exec(ctx, `UPDATE knowledge_reindex_jobs SET status = 'running',
			started_at = COALESCE(started_at, GREATEST($2, requested_at)),
			lease_until = $3 WHERE job_id = $1`, jobID, now, now.Add(k.Lease))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	k.logger.Info("reindex job started", "job_id", jobID, "knowledge_id", knowledgeID)
	return true, k.runJob(ctx, jobID, knowledgeID)
}

func (k *Knowledge) runJob(ctx context.Context, jobID, knowledgeID int64) error {
	total, err := k.reindex(ctx, jobID, knowledgeID)
	if ctx.Err() != nil {
		return ctx.Err() // stopping: the lease runs out and a worker resumes the job
	}
	finish := aggregates.FinishReindex{KnowledgeID: knowledgeID, JobID: jobID, ChunksTotal: total}
	if err != nil {
		k.logger.Warn("reindex job failed", "job_id", jobID, "error", err)
		msg := err.Error()
		finish.Error = &msg
	}
	wctx := WithMetadata(ctx, eventstore.Metadata{CorrelationID: fmt.Sprintf("reindex-job:%d", jobID),
		CausationID: fmt.Sprintf("reindex-job:%d", jobID)})
	if _, _, err := execute(wctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument,
		func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideFinishReindex(d, finish)
		}); err != nil {
		return err
	}
	status := aggregates.JobCompleted
	if finish.Error != nil {
		status = aggregates.JobFailed
	}
	_, err = k.d.DB.Exec(ctx, `UPDATE knowledge_reindex_jobs SET status = $2, finished_at = GREATEST($3, started_at), error = $4, lease_until = NULL,
		chunks_total = CASE WHEN $2 = 'completed' THEN $5 ELSE chunks_total END,
		chunks_done = CASE WHEN $2 = 'completed' THEN $5 ELSE chunks_done END
		WHERE job_id = $1`, jobID, status, k.d.Now().UTC().Truncate(time.Microsecond), finish.Error, total)
	return err
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
func (k *Knowledge) text(ctx context.Context, doc aggregates.KnowledgeDocument) (string, error) {
	if doc.Content != "" || doc.ContentHash == "" {
		return doc.Content, nil
	}
	content, err := k.blobs.Get(ctx, doc.OwnerID, blobs.Ref{Hash: doc.ContentHash, Size: doc.ContentSize})
	if err != nil {
		return "", fmt.Errorf("the text of knowledge document %d: %w", doc.ID, err)
	}
	return string(content), nil
}

func (k *Knowledge) reindex(ctx context.Context, jobID, knowledgeID int64) (int, error) {
	doc, _, _, err := load(ctx, k.d, knowledgeStream(knowledgeID), aggregates.EvolveKnowledgeDocument)
	if err != nil {
		return 0, err
	}
	if !doc.Exists() {
		return 0, errors.New("the document does not exist")
	}
	text, err := k.text(ctx, doc)
	if err != nil {
		return 0, err
	}
	return k.index(ctx, knowledgeID, text, func(done, total int) error {
		now := k.d.Now().UTC()
		_, err := k.d.DB.Exec(ctx, `UPDATE knowledge_reindex_jobs SET chunks_done = $2, chunks_total = $3, lease_until = $4
			WHERE job_id = $1`, jobID, done, total, now.Add(k.Lease))
		return err
	})
}
