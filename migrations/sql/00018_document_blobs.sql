-- +goose Up
-- A knowledge document's text lives here, addressed by its owner and the
-- SHA-256 of the text, and not in the document's event, which carries the
-- address: EventStoreDB refuses an append over 1 MiB, and personal content
-- kept apart from the immutable log can be erased (docs/privacy.md).
-- Documents recorded before this migration keep their text in their
-- knowledge.document_uploaded event (schema version 1). Content is sealed
-- under its owner's data key (subject_keys), so that erasing the owner makes
-- it unreadable.
CREATE TABLE document_blobs (
    owner_id   BIGINT      NOT NULL,
    hash       TEXT        NOT NULL,
    size       BIGINT      NOT NULL,
    content    BYTEA       NOT NULL, -- nonce || AES-256-GCM ciphertext when sealed
    sealed     BOOLEAN     NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, hash)
);

-- +goose Down
DROP TABLE document_blobs;
