-- +goose Up
-- A document's chunks carry its owner, so that an erasure deletes them by
-- the owner: the document's row in the read model may not be there yet (an
-- upload writes its chunks as it is answered, the knowledge projection the
-- row when it catches up). Chunks of documents the read model does not know
-- keep a NULL owner, and an erasure still finds those through the documents.
ALTER TABLE knowledge_chunks ADD COLUMN owner_id BIGINT;
UPDATE knowledge_chunks c SET owner_id = d.user_id FROM knowledge_documents d WHERE d.id = c.knowledge_id;
CREATE INDEX knowledge_chunks_owner ON knowledge_chunks (owner_id);

-- +goose Down
DROP INDEX knowledge_chunks_owner;
ALTER TABLE knowledge_chunks DROP COLUMN owner_id;
