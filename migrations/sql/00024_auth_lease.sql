-- +goose Up
-- What a session check reads (is the session revoked, which roles has the
-- user) may be remembered by a process only while it holds a lease: a ROW
-- EXCLUSIVE lock on auth_lease, taken afresh every few milliseconds
-- (package authlease). A change of what the check reads runs
-- lectern_auth_barrier before it commits: it takes a SHARE lock on
-- auth_lease, which waits until every lease held before it has been given
-- up and lets none be taken until the commit, and moves auth_epoch on. So
-- no change commits while a process serves what it remembered from before
-- the change, and a process that takes its lease again reads the new epoch
-- and forgets. Changes do not wait for each other (SHARE does not conflict
-- with SHARE); nothing ever writes auth_lease.
CREATE TABLE auth_lease ();
CREATE SEQUENCE auth_epoch;
-- Called once, so that every nextval moves last_value, which leases read.
SELECT setval('auth_epoch', 1);

-- +goose StatementBegin
CREATE FUNCTION lectern_auth_barrier() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    timeout text := current_setting('lock_timeout');
BEGIN
    -- A process gives its lease up every 25 ms (authlease.Period). One
    -- that has held it a second has stopped or starves: it trusts a lease
    -- 250 ms at most after asking for it (authlease.TTL), so one whose
    -- transaction began over 500 ms ago trusts it no more, and its
    -- connection is ended; it takes its lease again on a new one.
    PERFORM set_config('lock_timeout', '1s', true);
    LOOP
        BEGIN
            LOCK TABLE auth_lease IN SHARE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_terminate_backend(l.pid)
            FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'relation' AND l.relation = 'auth_lease'::regclass
              AND l.mode = 'RowExclusiveLock' AND l.granted
              AND a.xact_start < clock_timestamp() - interval '500 milliseconds';
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', timeout, true);
    -- Under the lock, which no lease is taken under until the commit: a
    -- lease read before it has the old epoch, and the next the new one.
    PERFORM nextval('auth_epoch');
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION lectern_auth_barrier_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lectern_auth_barrier();
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Deferred to the commit: a granted SHARE lock keeps every process from
-- taking its lease again (and so from remembering) until the commit.
CREATE CONSTRAINT TRIGGER refresh_tokens_revoked_barrier AFTER UPDATE OF revoked_at ON refresh_tokens
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION lectern_auth_barrier_trigger();

-- The announcement of migration 00013, which nothing listens for now.
DROP TRIGGER refresh_tokens_revoked ON refresh_tokens;
DROP FUNCTION lectern_auth_changed();

-- +goose Down
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
DROP TRIGGER refresh_tokens_revoked_barrier ON refresh_tokens;
DROP FUNCTION lectern_auth_barrier_trigger();
DROP FUNCTION lectern_auth_barrier();
DROP SEQUENCE auth_epoch;
DROP TABLE auth_lease;
