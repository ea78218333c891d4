-- +goose Up
-- Which knowledge document each blob was stored for. An upload stores its
-- text's blob before it appends the knowledge.document_uploaded event that
-- refers to it, by a content_hash sealed in the event, so SQL cannot tell
-- which blobs the log refers to; an append that fails (a conflict, the store
-- down, a crash) would leave the blob, text its owner was told was not
-- uploaded, until their erasure. blobs.Store.Put records a ref of the
-- document's id with the blob, in one transaction; blobs.Sweep later asks
-- the event store whether each ref's document was recorded: it marks the
-- refs of recorded documents (recorded, for good), deletes the others once
-- past their grace (an hour: no upload under way is that old), and deletes
-- a blob whose last ref it deleted. A blob is shared by its owner's
-- documents of the same text, so it goes only with its last ref. Put and
-- the sweep take the blob's advisory lock (its owner and hash), so that a
-- sweep never deletes a blob an upload has just stored a new ref of.
--
-- Blobs stored before this table have no refs, and neither do the documents
-- that refer to them: refs_complete is false for those, and the sweep
-- deletes only a blob for which it is true (every upload of its text since
-- it was stored recorded a ref), so that a new upload's failed ref to an old
-- blob never takes the old document's text with it.
CREATE TABLE document_blob_refs (
    owner_id     BIGINT      NOT NULL,
    hash         TEXT        NOT NULL,
    knowledge_id BIGINT      NOT NULL,
    recorded     BOOLEAN     NOT NULL DEFAULT false, -- the sweep found the document's event: kept until the owner's erasure
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(), -- renewed when a retry of the upload stores the text again
    PRIMARY KEY (owner_id, hash, knowledge_id)
);
-- What the sweep looks at: refs not (yet) found recorded, oldest first.
CREATE INDEX document_blob_refs_unrecorded ON document_blob_refs (created_at) WHERE NOT recorded;

ALTER TABLE document_blobs ADD COLUMN refs_complete BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE document_blobs DROP COLUMN refs_complete;
DROP TABLE document_blob_refs;
