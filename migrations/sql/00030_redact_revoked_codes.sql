-- +goose Up
-- 00027 redacted the codes of the invite codes issued and used that older
-- versions published into the default topic; those versions published
-- class.invite_code_revoked with its code too. Redact those still retained,
-- as they are published now.
UPDATE "watermill_lectern_classroom"
SET payload = jsonb_set(payload::jsonb, '{data,code}', '"[redacted]"')::json
WHERE payload->>'type' = 'lectern.class.invite_code_revoked'
  AND (payload::jsonb)->'data' ? 'code'
  AND payload->'data'->>'code' IS DISTINCT FROM '[redacted]';

-- +goose Down
SELECT 1; -- what was redacted does not come back
