-- +goose Up
CREATE SEQUENCE course_ids;
CREATE SEQUENCE class_ids;
CREATE SEQUENCE invite_code_ids;
CREATE SEQUENCE enrollment_ids;

-- Read model of the course aggregate (projection "courses").
CREATE TABLE courses (
    id          BIGINT PRIMARY KEY,
    org_id      BIGINT      NOT NULL,
    partner_id  BIGINT      NOT NULL,
    title       TEXT        NOT NULL,
    course_key  TEXT        NOT NULL,
    status      TEXT        NOT NULL,
    start_date  DATE,
    end_date    DATE,
    description TEXT,
    created_by  BIGINT      NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    version     BIGINT      NOT NULL
);
CREATE INDEX courses_org ON courses (org_id, id);

-- Read model of the class aggregate and its invite codes (projection "classes").
CREATE TABLE classes (
    id                BIGINT PRIMARY KEY,
    org_id            BIGINT      NOT NULL,
    partner_id        BIGINT      NOT NULL,
    course_id         BIGINT,
    name              TEXT        NOT NULL,
    description       TEXT,
    status            TEXT        NOT NULL,
    start_at          TIMESTAMPTZ,
    end_at            TIMESTAMPTZ,
    capacity          BIGINT,
    timezone          TEXT,
    location          TEXT,
    online_url        TEXT,
    invite_only       BOOLEAN     NOT NULL,
    primary_model_id  BIGINT,
    allowed_model_ids BIGINT[]    NOT NULL,
    created_by        BIGINT      NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    version           BIGINT      NOT NULL
);
CREATE INDEX classes_org ON classes (org_id, id);

-- version is the class stream's version of the last event applied to the code.
CREATE TABLE invite_codes (
    id          BIGINT PRIMARY KEY,
    class_id    BIGINT      NOT NULL,
    org_id      BIGINT      NOT NULL,
    partner_id  BIGINT      NOT NULL,
    code        TEXT        NOT NULL UNIQUE,
    target_role TEXT        NOT NULL,
    max_uses    BIGINT      NOT NULL,
    used_count  BIGINT      NOT NULL,
    status      TEXT        NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    created_by  BIGINT      NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    version     BIGINT      NOT NULL
);
CREATE INDEX invite_codes_class ON invite_codes (class_id, id);

-- Read model of the enrollment aggregate (projection "enrollments").
CREATE TABLE enrollments (
    id             BIGINT PRIMARY KEY,
    class_id       BIGINT      NOT NULL,
    org_id         BIGINT      NOT NULL,
    partner_id     BIGINT      NOT NULL,
    course_id      BIGINT,
    student_id     BIGINT      NOT NULL,
    invite_code_id BIGINT,
    status         TEXT        NOT NULL,
    enrolled_at    TIMESTAMPTZ NOT NULL,
    completed_at   TIMESTAMPTZ,
    source         TEXT        NOT NULL,
    enrolled_by    BIGINT      NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    version        BIGINT      NOT NULL
);
CREATE INDEX enrollments_class ON enrollments (class_id, id);
CREATE INDEX enrollments_student ON enrollments (student_id, id);

-- A class's active enrollments are counted against its capacity from their
-- claims ("<class_id>:<student_id>"), which the commands write synchronously.
CREATE INDEX unique_claims_active_enrollment_class ON unique_claims (split_part(key, ':', 1))
    WHERE scope = 'active_enrollment';

-- +goose Down
DROP INDEX unique_claims_active_enrollment_class;
DROP TABLE enrollments;
DROP TABLE invite_codes;
DROP TABLE classes;
DROP TABLE courses;
DROP SEQUENCE enrollment_ids;
DROP SEQUENCE invite_code_ids;
DROP SEQUENCE class_ids;
DROP SEQUENCE course_ids;
