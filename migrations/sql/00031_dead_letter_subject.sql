-- +goose Up
-- A dead letter's error can quote a value of its event, which may be
-- personal. From now on it is recorded without what it quotes (package
-- pgtext), with the event's subject ("user-7"; NULL for an event that holds
-- nothing personal), and the subject's erasure blanks it.
ALTER TABLE projection_dead_letters ADD COLUMN subject TEXT;
CREATE INDEX projection_dead_letters_subject ON projection_dead_letters (subject) WHERE subject IS NOT NULL;

-- Those recorded before: their errors are cut at the first quote mark (of
-- English or of a translated server message), and those of sealed events on
-- the PostgreSQL store learn their subject, found through the stream's index.
-- (Events stored in clear, and EventStoreDB's, keep no subject: their dead
-- letters are not blanked by an erasure.)
UPDATE projection_dead_letters SET error = regexp_replace(error, '["''«»‹›“”„‘’‚「」].*$', '…', 's')
WHERE error ~ '["''«»‹›“”„‘’‚「」]';
UPDATE projection_dead_letters d SET subject = e.payload->'pii'->>'sub'
FROM events e WHERE e.stream_id = d.stream_id AND e.uuid = d.event_id;

-- +goose Down
DROP INDEX projection_dead_letters_subject;
ALTER TABLE projection_dead_letters DROP COLUMN subject;
