package queries

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// KnowledgeDocument is the knowledge_documents read model row, with the
// number of chunks its index holds.
type KnowledgeDocument struct {
	ID          int64
	UserID      int64
	Title       string
	ContentType string
	Size        int64
	Chunks      int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

const knowledgeColumns = `d.id, d.user_id, d.title, d.content_type, d.size,
	(SELECT count(*) FROM knowledge_chunks c WHERE c.knowledge_id = d.id), d.created_at, d.updated_at`

func scanKnowledge(row pgx.Row) (KnowledgeDocument, error) {
	var d KnowledgeDocument
	err := row.Scan(&d.ID, &d.UserID, &d.Title, &d.ContentType, &d.Size, &d.Chunks, &d.CreatedAt, &d.UpdatedAt)
	return d, err
}

// KnowledgeDocument reads one of owner's documents; another user's is not found.
func (q *DB) KnowledgeDocument(ctx context.Context, owner, id int64) (KnowledgeDocument, error) {
	d, err := scanKnowledge(q.pool.QueryRow(ctx, `SELECT `+knowledgeColumns+` FROM knowledge_documents d WHERE d.id = $1 AND d.user_id = $2`, id, owner))
	return d, notFound(err, "Knowledge document")
}

// KnowledgeDocuments lists owner's documents, oldest first.
func (q *DB) KnowledgeDocuments(ctx context.Context, owner int64, p Page) (List[KnowledgeDocument], error) {
	return readPage(ctx, q, p, scanKnowledge, `SELECT count(*) FROM knowledge_documents WHERE user_id = $1`,
		`SELECT `+knowledgeColumns+` FROM knowledge_documents d WHERE d.user_id = $1 ORDER BY d.id LIMIT $2 OFFSET $3`,
		owner, p.Size, p.Offset())
}

// OwnedKnowledge reports which of ids name owner's documents.
func (q *DB) OwnedKnowledge(ctx context.Context, owner int64, ids []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.pool.Query(ctx, `SELECT id FROM knowledge_documents WHERE user_id = $1 AND id = ANY($2)`, owner, ids)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	for _, id := range found {
		out[id] = true
	}
	return out, err
}

// KnowledgeSettings is the knowledge_settings read model row.
type KnowledgeSettings struct {
	KnowledgeID     int64
	TopK            int
	MinScore        string
	ScoreType       string
	RerankerEnabled bool
	RerankerModel   *string
	RerankerTopN    int
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// KnowledgeSettings reads the search settings of one of owner's documents.
func (q *DB) KnowledgeSettings(ctx context.Context, owner, id int64) (KnowledgeSettings, error) {
	var s KnowledgeSettings
	err := q.pool.QueryRow(ctx, `
		SELECT s.knowledge_id, s.top_k, s.min_score, s.score_type, s.reranker_enabled, s.reranker_model, s.reranker_top_n,
			s.created_at, s.updated_at
		FROM knowledge_settings s JOIN knowledge_documents d ON d.id = s.knowledge_id
		WHERE s.knowledge_id = $1 AND d.user_id = $2`, id, owner).
		Scan(&s.KnowledgeID, &s.TopK, &s.MinScore, &s.ScoreType, &s.RerankerEnabled, &s.RerankerModel, &s.RerankerTopN,
			&s.CreatedAt, &s.UpdatedAt)
	return s, notFound(err, "Knowledge document")
}

// ReindexJob is a row of the reindex job queue.
type ReindexJob struct {
	JobID       int64
	KnowledgeID int64
	Status      string
	RequestedAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	ChunksTotal int
	ChunksDone  int
	Error       *string
}

const reindexJobColumns = `job_id, knowledge_id, status, requested_at, started_at, finished_at, chunks_total, chunks_done, error`

func scanReindexJob(row pgx.Row) (ReindexJob, error) {
	var j ReindexJob
	err := row.Scan(&j.JobID, &j.KnowledgeID, &j.Status, &j.RequestedAt, &j.StartedAt, &j.FinishedAt, &j.ChunksTotal, &j.ChunksDone, &j.Error)
	return j, err
}

// ReindexJob reads one of owner's reindex jobs of document knowledgeID.
func (q *DB) ReindexJob(ctx context.Context, owner, knowledgeID, jobID int64) (ReindexJob, error) {
	j, err := scanReindexJob(q.pool.QueryRow(ctx, `SELECT `+reindexJobColumns+`
		FROM knowledge_reindex_jobs WHERE job_id = $1 AND knowledge_id = $2 AND user_id = $3`, jobID, knowledgeID, owner))
	return j, notFound(err, "Reindex job")
}

// OpenReindexJob reads the first of document knowledgeID's jobs among ids
// that has not finished (queued or running); ok is false when none.
func (q *DB) OpenReindexJob(ctx context.Context, knowledgeID int64, ids []int64) (j ReindexJob, ok bool, err error) {
	j, err = scanReindexJob(q.pool.QueryRow(ctx, `SELECT `+reindexJobColumns+`
		FROM knowledge_reindex_jobs WHERE job_id = ANY($1) AND knowledge_id = $2 AND status IN ('queued', 'running')
		ORDER BY job_id LIMIT 1`, ids, knowledgeID))
	if errors.Is(err, pgx.ErrNoRows) {
		return ReindexJob{}, false, nil
	}
	return j, err == nil, err
}
