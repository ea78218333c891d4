-- +goose NO TRANSACTION
-- +goose Up
-- What the janitor purges by (package janitor): without these, each of its
-- runs reads each table whole. Built CONCURRENTLY, so that an upgrade of a
-- database whose tables are big does not lock them against writes (logins,
-- refreshes, keyed requests) while they are built; hence NO TRANSACTION
-- (CREATE INDEX CONCURRENTLY refuses to run in one). Each index is dropped
-- first: a build that failed (or was stopped) half-way leaves an invalid
-- index behind, which IF NOT EXISTS would keep, and goose runs this file
-- again on the next start since it did not record it.
DROP INDEX CONCURRENTLY IF EXISTS email_codes_expires_at;
CREATE INDEX CONCURRENTLY email_codes_expires_at ON email_codes (expires_at);
DROP INDEX CONCURRENTLY IF EXISTS refresh_tokens_expires_at;
CREATE INDEX CONCURRENTLY refresh_tokens_expires_at ON refresh_tokens (expires_at);
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_created_at;
CREATE INDEX CONCURRENTLY idempotency_keys_created_at ON idempotency_keys (created_at);
-- Finished reindex jobs, which the janitor purges after their retention
-- (janitor.DefaultJobRetention); the queue's open jobs have their own index.
DROP INDEX CONCURRENTLY IF EXISTS knowledge_reindex_jobs_finished;
CREATE INDEX CONCURRENTLY knowledge_reindex_jobs_finished ON knowledge_reindex_jobs (finished_at)
    WHERE status IN ('completed', 'failed');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS knowledge_reindex_jobs_finished;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_created_at;
DROP INDEX CONCURRENTLY IF EXISTS refresh_tokens_expires_at;
DROP INDEX CONCURRENTLY IF EXISTS email_codes_expires_at;
