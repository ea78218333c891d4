-- +goose Up
CREATE SEQUENCE user_ids;

-- Read model of the user aggregate (projection "users").
CREATE TABLE users (
    id            BIGINT PRIMARY KEY,
    email         TEXT        NOT NULL UNIQUE,
    name          TEXT        NOT NULL,
    password_hash TEXT        NOT NULL,
    roles         TEXT[]      NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    version       BIGINT      NOT NULL
);

-- Operational identity state: short-lived secrets, not domain history.
CREATE TABLE email_codes (
    token       TEXT PRIMARY KEY,
    email       TEXT        NOT NULL,
    code_hash   TEXT        NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    attempts    INT         NOT NULL DEFAULT 0,
    verified_at TIMESTAMPTZ
);

CREATE TABLE refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id    BIGINT      NOT NULL,
    family_id  UUID        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL,
    rotated_at TIMESTAMPTZ,
    revoked_at TIMESTAMPTZ
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

CREATE TABLE rate_limits (
    bucket       TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    hits         INT         NOT NULL,
    PRIMARY KEY (bucket, window_start)
);

CREATE TABLE idempotency_keys (
    user_id    BIGINT      NOT NULL,
    key        TEXT        NOT NULL,
    request    TEXT        NOT NULL,
    status     INT         NOT NULL,
    headers    JSONB       NOT NULL,
    body       BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE rate_limits;
DROP TABLE refresh_tokens;
DROP TABLE email_codes;
DROP TABLE users;
DROP SEQUENCE user_ids;
