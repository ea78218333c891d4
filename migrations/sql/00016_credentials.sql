-- +goose Up
-- Password hashes live here, keyed by user id, and never in events:
-- user.signed_up from schema version 2 carries none. The hashes of earlier
-- accounts come from the users read model and, on the PostgreSQL store, from
-- their user.signed_up events (an account not yet projected); on EventStoreDB
-- a login finds a missing one in the account's first event (commands).
CREATE TABLE credentials (
    user_id       BIGINT PRIMARY KEY,
    password_hash TEXT        NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
INSERT INTO credentials (user_id, password_hash, updated_at)
SELECT id, password_hash, updated_at FROM users;
INSERT INTO credentials (user_id, password_hash, updated_at)
SELECT (payload->>'user_id')::bigint, payload->>'password_hash', recorded_at
FROM events
WHERE event_type = 'user.signed_up' AND payload->>'password_hash' IS NOT NULL
ON CONFLICT (user_id) DO NOTHING;
ALTER TABLE users DROP COLUMN password_hash;

-- +goose Down
ALTER TABLE users ADD COLUMN password_hash TEXT NOT NULL DEFAULT '';
UPDATE users u SET password_hash = c.password_hash FROM credentials c WHERE c.user_id = u.id;
DROP TABLE credentials;
