-- +goose Up
CREATE SEQUENCE knowledge_ids;
CREATE SEQUENCE knowledge_job_ids;
CREATE SEQUENCE knowledge_chunk_ids;

-- Read models of the knowledge document aggregate, maintained by the one
-- projection "knowledge". version is the document stream's version of the
-- last event applied.
CREATE TABLE knowledge_documents (
    id           BIGINT PRIMARY KEY,
    user_id      BIGINT      NOT NULL,
    title        TEXT        NOT NULL,
    content_type TEXT        NOT NULL,
    size         BIGINT      NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    version      BIGINT      NOT NULL
);
CREATE INDEX knowledge_documents_user ON knowledge_documents (user_id, id);

CREATE TABLE knowledge_settings (
    knowledge_id     BIGINT PRIMARY KEY,
    top_k            INT         NOT NULL,
    min_score        TEXT        NOT NULL,
    score_type       TEXT        NOT NULL,
    reranker_enabled BOOLEAN     NOT NULL,
    reranker_model   TEXT,
    reranker_top_n   INT         NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    version          BIGINT      NOT NULL
);

-- Derived data, not a read model of events: a document's chunks and their
-- vectors (float4[]: pgvector is not installed; cosine similarity is computed
-- in the service). Rebuilt whole by indexing (on upload and on reindex).
CREATE TABLE knowledge_chunks (
    id           BIGINT PRIMARY KEY,
    knowledge_id BIGINT  NOT NULL,
    ord          INT     NOT NULL,
    text         TEXT    NOT NULL,
    embedding    FLOAT4[] NOT NULL
);
CREATE INDEX knowledge_chunks_document ON knowledge_chunks (knowledge_id, ord);

-- Operational: the reindex job queue. A worker claims a job with
-- SELECT ... FOR UPDATE SKIP LOCKED and holds it by a lease it renews while it
-- works, so that a job left running by a stopped process is taken up again.
CREATE TABLE knowledge_reindex_jobs (
    job_id        BIGINT PRIMARY KEY,
    knowledge_id  BIGINT      NOT NULL,
    user_id       BIGINT      NOT NULL,
    status        TEXT        NOT NULL,
    requested_at  TIMESTAMPTZ NOT NULL,
    started_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ,
    chunks_total  INT         NOT NULL DEFAULT 0,
    chunks_done   INT         NOT NULL DEFAULT 0,
    error         TEXT,
    lease_until   TIMESTAMPTZ
);
CREATE INDEX knowledge_reindex_jobs_open ON knowledge_reindex_jobs (job_id) WHERE status IN ('queued', 'running');

-- +goose Down
DROP TABLE knowledge_reindex_jobs;
DROP TABLE knowledge_chunks;
DROP TABLE knowledge_settings;
DROP TABLE knowledge_documents;
DROP SEQUENCE knowledge_chunk_ids;
DROP SEQUENCE knowledge_job_ids;
DROP SEQUENCE knowledge_ids;
