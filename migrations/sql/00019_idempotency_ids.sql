-- +goose Up
-- The ids a request with an Idempotency-Key drew from the id sequences, the
-- seq_index-th of each sequence: a retry of a request whose process died
-- draws the same ids, and so finds the streams the dead attempt created
-- rather than creating others. They go with their key (after 24 hours, or
-- with a failure that wrote nothing).
CREATE TABLE idempotency_ids (
    user_id   BIGINT NOT NULL,
    key       TEXT   NOT NULL,
    sequence  TEXT   NOT NULL,
    seq_index INT    NOT NULL,
    id        BIGINT NOT NULL,
    PRIMARY KEY (user_id, key, sequence, seq_index),
    FOREIGN KEY (user_id, key) REFERENCES idempotency_keys (user_id, key) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE idempotency_ids;
