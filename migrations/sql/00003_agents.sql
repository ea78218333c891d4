-- +goose Up
CREATE SEQUENCE agent_ids;

-- Read model of the agent aggregate (projection "agents").
CREATE TABLE agents (
    id               BIGINT PRIMARY KEY,
    owner_id         BIGINT      NOT NULL,
    name             TEXT        NOT NULL,
    system_prompt    TEXT        NOT NULL,
    role_description TEXT,
    template_source  TEXT,
    is_active        BOOLEAN     NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    version          BIGINT      NOT NULL
);
CREATE INDEX agents_owner ON agents (owner_id, id);

-- +goose Down
DROP TABLE agents;
DROP SEQUENCE agent_ids;
