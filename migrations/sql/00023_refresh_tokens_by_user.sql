-- +goose Up
-- A password change logs the user's other sessions out, and an erasure
-- revokes all of them: both find a user's refresh tokens by user_id.
CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);

-- +goose Down
DROP INDEX refresh_tokens_user;
