-- +goose Up
-- Secrets never stay in the history: user.signed_up events of schema
-- version 1 carried the account's argon2id hash, which 00016 copied into
-- credentials and upcasting hides from every reader. On the PostgreSQL
-- store the stored events lose it too (a secret is not a fact of the
-- history; nothing else of the event changes). EventStoreDB's events cannot
-- be rewritten: there the upcaster hides it (docs/privacy.md).
UPDATE events SET payload = (payload::jsonb - 'password_hash')::json
WHERE event_type = 'user.signed_up' AND payload::jsonb ? 'password_hash';

-- +goose Down
SELECT 1; -- the hashes are in credentials; they do not go back
