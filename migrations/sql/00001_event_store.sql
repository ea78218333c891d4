-- +goose Up
-- The event store and the Watermill topic are one table: watermill-sql's PostgreSQL
-- schema ("offset", uuid, created_at, payload, metadata, transaction_id) plus the
-- stream columns. (transaction_id, "offset") is the global log position.
CREATE TABLE events (
    "offset"        BIGSERIAL   NOT NULL,
    uuid            UUID        NOT NULL,
    created_at      TIMESTAMP   NOT NULL DEFAULT CURRENT_TIMESTAMP,
    payload         JSON,
    metadata        JSON,
    transaction_id  xid8        NOT NULL DEFAULT pg_current_xact_id(),
    stream_id       TEXT        NOT NULL,
    version         BIGINT      NOT NULL,
    event_type      TEXT        NOT NULL,
    schema_version  INT         NOT NULL DEFAULT 1,
    recorded_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (transaction_id, "offset"),
    CONSTRAINT events_stream_version UNIQUE (stream_id, version),
    CONSTRAINT events_version_positive CHECK (version >= 1)
);

-- Event ids are the idempotency keys of appends within a stream (as in
-- EventStoreDB); they are not indexed globally, which would cost every append
-- a random b-tree insert. Appends wake subscribers with a coalesced NOTIFY sent
-- after commit (eventstore/postgres), not a trigger: a NOTIFY inside the
-- appending transaction serialises every commit on the notification queue lock.

-- One row per projection (Watermill consumer group); updated in the same
-- transaction as the projection's rows.
CREATE TABLE projection_offsets (
    consumer_group                VARCHAR(255) PRIMARY KEY,
    offset_acked                  BIGINT,
    last_processed_transaction_id xid8 NOT NULL
);

-- Uniqueness rules that span aggregates (an e-mail, a course key) are claimed
-- here before the owning stream is appended to.
CREATE TABLE unique_claims (
    scope      TEXT        NOT NULL,
    key        TEXT        NOT NULL,
    owner      TEXT        NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);

-- +goose Down
DROP TABLE unique_claims;
DROP TABLE projection_offsets;
DROP TABLE events;
