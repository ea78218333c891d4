-- +goose Up
-- Versions before the redaction (downstream.redact) published partner.created
-- with the partner's name, e-mail and phone, and invite codes with their
-- code, into the default topic, which lives in this database. A broker's
-- messages are to carry no personal data (an erasure cannot reach them) and
-- no code (docs/privacy.md): redact those still retained, as they would be
-- published now. A custom LECTERN_BROKER_TOPIC, or NATS, is not reached here
-- (docs/operations.md, "Upgrading").
UPDATE "watermill_lectern_classroom"
SET payload = jsonb_set(jsonb_set(jsonb_set(payload::jsonb,
        '{data,full_name}', '"[redacted]"'), '{data,email}', '"[redacted]"'), '{data,phone}', 'null')::json
WHERE payload->>'type' = 'lectern.partner.created'
  AND (payload->'data'->>'full_name' IS DISTINCT FROM '[redacted]'
       OR payload->'data'->>'email' IS DISTINCT FROM '[redacted]'
       OR payload->'data'->>'phone' IS NOT NULL);

UPDATE "watermill_lectern_classroom"
SET payload = jsonb_set(payload::jsonb, '{data,code}', '"[redacted]"')::json
WHERE payload->>'type' IN ('lectern.class.invite_code_issued', 'lectern.class.invite_code_used')
  AND (payload::jsonb)->'data' ? 'code'
  AND payload->'data'->>'code' IS DISTINCT FROM '[redacted]';

-- +goose Down
SELECT 1; -- what was redacted does not come back
