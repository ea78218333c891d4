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
-- and forgets. Changes share the lock (SHARE does not conflict with
-- SHARE), but a lease waiting behind one holds back the changes after it:
-- each takes it only as it commits (deferred triggers). Nothing ever writes
-- auth_lease.
CREATE TABLE auth_lease ();
CREATE SEQUENCE auth_epoch;
-- Called once, so that every nextval moves last_value, which leases read.
SELECT setval('auth_epoch', 1);

-- +goose StatementBegin
CREATE FUNCTION lectern_auth_barrier() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    timeout text := current_setting('lock_timeout');
    passes int := 0;
BEGIN
    -- A process gives its lease up every 25 ms (authlease.Period). One
    -- that has sat on it for over 500 ms has stopped or starves: it trusts
    -- a lease 250 ms at most after asking for it (authlease.TTL), and its
    -- transaction went idle after it asked. Its connection is ended; it
    -- takes its lease again on a new one. Every Lectern process must
    -- connect as one role, which may end its own backends.
    PERFORM set_config('lock_timeout', '1s', true);
    LOOP
        BEGIN
            LOCK TABLE auth_lease IN SHARE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            passes := passes + 1;
            IF passes >= 10 THEN
                RAISE EXCEPTION 'lectern_auth_barrier: a session lease could not be ended in 10 s';
            END IF;
            -- Read afresh on each pass: pg_stat_activity may be a snapshot
            -- taken once per transaction.
            PERFORM pg_stat_clear_snapshot();
            PERFORM pg_terminate_backend(l.pid)
            FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'relation' AND l.relation = 'auth_lease'::regclass
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND l.mode = 'RowExclusiveLock' AND l.granted
              AND a.state = 'idle in transaction'
              AND a.state_change < clock_timestamp() - interval '500 milliseconds';
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

-- Deferred to the commit, the changes of what session checks read: a
-- granted SHARE lock keeps every process from taking its lease again (and
-- so from remembering) until the commit, so it is taken as late as can be.
CREATE CONSTRAINT TRIGGER refresh_tokens_revoked_barrier AFTER UPDATE OF revoked_at ON refresh_tokens
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION lectern_auth_barrier_trigger();

-- The users read model's, however written (its projection, or an operator
-- by hand). A replay builds the table afresh: its swap calls this again on
-- the table it swaps in (projections.Users).
-- +goose StatementBegin
CREATE FUNCTION lectern_users_barriers() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DROP TRIGGER IF EXISTS users_roles_barrier ON users;
    DROP TRIGGER IF EXISTS users_deleted_barrier ON users;
    DROP TRIGGER IF EXISTS users_truncated_barrier ON users;
    CREATE CONSTRAINT TRIGGER users_roles_barrier AFTER UPDATE OF roles ON users
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        WHEN (OLD.roles IS DISTINCT FROM NEW.roles)
        EXECUTE FUNCTION lectern_auth_barrier_trigger();
    CREATE CONSTRAINT TRIGGER users_deleted_barrier AFTER DELETE ON users
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        EXECUTE FUNCTION lectern_auth_barrier_trigger();
    CREATE TRIGGER users_truncated_barrier AFTER TRUNCATE ON users
        FOR EACH STATEMENT EXECUTE FUNCTION lectern_auth_barrier_trigger();
END;
$$;
-- +goose StatementEnd
SELECT lectern_users_barriers();

-- The announcement of migration 00013, which nothing listens for now.
DROP TRIGGER refresh_tokens_revoked ON refresh_tokens;
DROP FUNCTION lectern_auth_changed();

-- +goose Down
DROP TRIGGER users_roles_barrier ON users;
DROP TRIGGER users_deleted_barrier ON users;
DROP TRIGGER users_truncated_barrier ON users;
DROP FUNCTION lectern_users_barriers();
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
