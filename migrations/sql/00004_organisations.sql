-- +goose Up
CREATE SEQUENCE org_ids;
CREATE SEQUENCE partner_ids;
CREATE SEQUENCE promotion_ids;

-- Read models of organisations, partners and promotion requests.
CREATE TABLE organizations (
    id         BIGINT PRIMARY KEY,
    name       TEXT        NOT NULL,
    created_by BIGINT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    version    BIGINT      NOT NULL
);

CREATE TABLE partners (
    id            BIGINT PRIMARY KEY,
    org_id        BIGINT      NOT NULL,
    user_id       BIGINT,
    full_name     TEXT        NOT NULL,
    email         TEXT        NOT NULL,
    phone         TEXT,
    role          TEXT        NOT NULL,
    is_active     BOOLEAN     NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    last_login_at TIMESTAMPTZ,
    version       BIGINT      NOT NULL
);
CREATE INDEX partners_user ON partners (user_id);
CREATE INDEX partners_org ON partners (org_id, id);

CREATE TABLE promotion_requests (
    id           BIGINT PRIMARY KEY,
    user_id      BIGINT      NOT NULL,
    name         TEXT        NOT NULL,
    email        TEXT        NOT NULL,
    org_name     TEXT        NOT NULL,
    target_role  TEXT        NOT NULL,
    edu_category TEXT,
    status       TEXT        NOT NULL,
    reason       TEXT,
    reviewed_by  BIGINT,
    reviewed_at  TIMESTAMPTZ,
    partner_id   BIGINT,
    org_id       BIGINT,
    requested_at TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    version      BIGINT      NOT NULL
);
CREATE INDEX promotion_requests_status ON promotion_requests (status, id);

-- +goose Down
DROP TABLE promotion_requests;
DROP TABLE partners;
DROP TABLE organizations;
DROP SEQUENCE promotion_ids;
DROP SEQUENCE partner_ids;
DROP SEQUENCE org_ids;
