-- +goose Up
-- A change whose barrier cannot end a session lease in 10 s (one held by a
-- process that runs, or under a role this one may not end) failed with
-- raise_exception, which callers could not tell from a bug. It fails with
-- lock_not_available (55P03) now, as a lock timeout does: the API answers
-- 503 with Retry-After, and the change can be sent again. The function is
-- otherwise 00024's.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION lectern_auth_barrier() RETURNS void LANGUAGE plpgsql AS $$
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
                RAISE EXCEPTION 'lectern_auth_barrier: a session lease could not be ended in 10 s'
                    USING ERRCODE = 'lock_not_available',
                          HINT = 'A process holds its lease while running (not idle), or under a role that may not be ended; the change can be retried.';
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION lectern_auth_barrier() RETURNS void LANGUAGE plpgsql AS $$
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
