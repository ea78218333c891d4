-- +goose Up
-- A revoked session (logout, a reused refresh token) is announced, so that
-- every process drops what it remembered of the session at once.
-- +goose StatementBegin
CREATE FUNCTION lectern_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('lectern_auth', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER refresh_tokens_revoked AFTER UPDATE OF revoked_at ON refresh_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION lectern_auth_changed();

-- +goose Down
DROP TRIGGER refresh_tokens_revoked ON refresh_tokens;
DROP FUNCTION lectern_auth_changed();
