-- +goose Up
-- An event a projection failed to apply MaxAttempts times. status:
--   stopped   its projection stopped on it and waits for an operator;
--   skipped   passed over (the projection's policy, or an operator's skip);
--   retry     an operator asked for another try (the projection restarts);
--   skip      an operator asked to pass over it (the projection restarts);
--   resolved  a retry applied it.
CREATE TABLE projection_dead_letters (
    projection      TEXT NOT NULL,
    event_id        UUID NOT NULL,
    event_type      TEXT NOT NULL,
    stream_id       TEXT NOT NULL,
    position        TEXT NOT NULL,
    error           TEXT NOT NULL,
    failures        INT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('stopped', 'skipped', 'retry', 'skip', 'resolved')),
    first_failed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (projection, event_id)
);

-- +goose Down
DROP TABLE projection_dead_letters;
