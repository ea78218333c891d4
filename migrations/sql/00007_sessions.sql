-- +goose Up
CREATE SEQUENCE session_ids;
CREATE SEQUENCE session_setting_ids;
CREATE SEQUENCE session_model_ids;
CREATE SEQUENCE session_response_ids;
CREATE SEQUENCE session_few_shot_link_ids;

-- Read models of the practice session aggregate, all maintained by the one
-- projection "sessions". version is the session stream's version of the last
-- event applied to the session; the other tables are written only when that
-- guard lets an event through, so a replayed event changes nothing.
CREATE TABLE practice_sessions (
    id            BIGINT      NOT NULL,
    user_id       BIGINT      NOT NULL,
    class_id      BIGINT,
    project_id    BIGINT,
    agent_id      BIGINT,
    knowledge_ids BIGINT[]    NOT NULL,
    title         TEXT,
    notes         TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    version       BIGINT      NOT NULL,
    -- "My sessions, newest first" is a backward range scan of this key.
    PRIMARY KEY (user_id, id)
);
-- The projection finds a session by id alone. A hash index, not a b-tree: a
-- b-tree on id would let the planner serve "WHERE user_id = $1 ORDER BY id
-- DESC LIMIT 50" by walking the whole table backwards and filtering on
-- user_id, which it estimates cheap and which is slow for a user whose
-- sessions are old. Ids are unique by construction (a sequence).
CREATE INDEX practice_sessions_id ON practice_sessions USING hash (id);

-- How many sessions each user has, so that a list page does not count them.
CREATE TABLE practice_session_counts (
    user_id BIGINT PRIMARY KEY,
    total   BIGINT NOT NULL
);

-- A session's settings (one row per session). The objects are JSON, not JSONB:
-- they keep the event's canonical text and accept every JSON string.
CREATE TABLE session_settings (
    id                BIGINT PRIMARY KEY,
    session_id        BIGINT      NOT NULL UNIQUE,
    style_preset      TEXT        NOT NULL,
    style_params      JSON        NOT NULL,
    generation_params JSON        NOT NULL,
    agent_snapshot    JSON        NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);

CREATE TABLE session_few_shot_links (
    id         BIGINT PRIMARY KEY,
    setting_id BIGINT      NOT NULL,
    session_id BIGINT      NOT NULL,
    example_id BIGINT      NOT NULL,
    sort_order INT         NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_few_shot_links_session ON session_few_shot_links (session_id, sort_order);

-- The models a session has called: one id per model per session.
CREATE TABLE session_models (
    id         BIGINT PRIMARY KEY,
    session_id BIGINT      NOT NULL,
    model_id   BIGINT      NOT NULL,
    model_name TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_models_session ON session_models (session_id, id);

-- Every model's answer of every turn; position is the model's place in its turn.
CREATE TABLE session_responses (
    id                BIGINT PRIMARY KEY,
    session_id        BIGINT      NOT NULL,
    session_model_id  BIGINT      NOT NULL,
    turn              INT         NOT NULL,
    position          INT         NOT NULL,
    model_name        TEXT        NOT NULL,
    prompt_text       TEXT        NOT NULL,
    response_text     TEXT        NOT NULL,
    token_usage       JSON        NOT NULL,
    latency_ms        BIGINT      NOT NULL,
    is_primary        BOOLEAN     NOT NULL,
    generation_params JSON        NOT NULL,
    error             JSON,
    created_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_responses_session ON session_responses (session_id, turn, position);

-- +goose Down
DROP TABLE session_responses;
DROP TABLE session_models;
DROP TABLE session_few_shot_links;
DROP TABLE session_settings;
DROP TABLE practice_session_counts;
DROP TABLE practice_sessions;
DROP SEQUENCE session_few_shot_link_ids;
DROP SEQUENCE session_response_ids;
DROP SEQUENCE session_model_ids;
DROP SEQUENCE session_setting_ids;
DROP SEQUENCE session_ids;
