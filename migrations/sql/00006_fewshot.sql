-- +goose Up
CREATE SEQUENCE fewshot_ids;

-- Read model of the few-shot example aggregate (projection "few_shot_examples").
-- meta is JSON, not JSONB: it keeps the event's canonical text (so reads show
-- the bytes the write answered with) and accepts every JSON string, "\u0000"
-- included, which JSONB refuses.
CREATE TABLE few_shot_examples (
    id          BIGINT PRIMARY KEY,
    user_id     BIGINT      NOT NULL,
    title       TEXT,
    input_text  TEXT        NOT NULL,
    output_text TEXT        NOT NULL,
    meta        JSON        NOT NULL,
    is_active   BOOLEAN     NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    version     BIGINT      NOT NULL
);
CREATE INDEX few_shot_examples_user ON few_shot_examples (user_id, id);

-- +goose Down
DROP TABLE few_shot_examples;
DROP SEQUENCE fewshot_ids;
