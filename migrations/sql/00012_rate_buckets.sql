-- +goose Up
-- Rate limits without fixed windows (package ratelimit). One row per bucket,
-- updated in place, so a bucket's state never grows with its traffic; a row
-- whose idle_at has passed holds nothing and Prune deletes it.

-- Token buckets (GCRA): tat is the bucket's theoretical arrival time.
CREATE TABLE rate_buckets (
    bucket  TEXT PRIMARY KEY,
    tat     TIMESTAMPTZ NOT NULL,
    allowed BOOLEAN     NOT NULL -- the last hit's outcome, for RETURNING
);
CREATE INDEX rate_buckets_tat ON rate_buckets (tat);

-- Sliding windows: hits holds the times of at most the window's limit of
-- hits inside the window, oldest first.
CREATE TABLE rate_windows (
    bucket  TEXT PRIMARY KEY,
    hits    TIMESTAMPTZ[] NOT NULL,
    idle_at TIMESTAMPTZ   NOT NULL, -- the newest hit's end of window
    allowed BOOLEAN       NOT NULL  -- the last hit's outcome, for RETURNING
);
CREATE INDEX rate_windows_idle_at ON rate_windows (idle_at);

DROP TABLE rate_limits;

-- +goose Down
CREATE TABLE rate_limits (
    bucket       TEXT        NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    hits         INT         NOT NULL,
    PRIMARY KEY (bucket, window_start)
);
DROP TABLE rate_windows;
DROP TABLE rate_buckets;
