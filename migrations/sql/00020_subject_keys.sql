-- +goose Up
-- The data key of each subject whose personal data events hold ("user-7"),
-- wrapped by the master key (LECTERN_DATA_KEY). Erasure sets wrapped to NULL
-- and keeps the row, so that no new key is ever made for an erased subject
-- (docs/privacy.md).
CREATE TABLE subject_keys (
    subject    TEXT PRIMARY KEY,
    wrapped    BYTEA,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    erased_at  TIMESTAMPTZ,
    CHECK ((wrapped IS NULL) = (erased_at IS NOT NULL))
);

-- +goose Down
DROP TABLE subject_keys;
