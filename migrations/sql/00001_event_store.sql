-- +goose Up
-- The event store and the Watermill topic are one table: watermill-sql's PostgreSQL
-- schema ("offset", uuid, created_at, payload, metadata, transaction_id) plus the
-- stream columns. (transaction_id, "offset") is the global log position.
CREATE TABLE events (
    "offset"        BIGSERIAL   NOT NULL,
    uuid            VARCHAR(36) NOT NULL,
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
    CONSTRAINT events_event_id UNIQUE (uuid),
    CONSTRAINT events_version_positive CHECK (version >= 1)
);

-- Wakes projection subscribers at commit instead of waiting for their poll.
-- +goose StatementBegin
CREATE FUNCTION lectern_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('lectern_events', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION lectern_notify_events();

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
DROP TRIGGER events_notify ON events;
DROP FUNCTION lectern_notify_events();
DROP TABLE events;
