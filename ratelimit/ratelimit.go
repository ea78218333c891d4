// Package ratelimit counts hits in fixed windows kept in PostgreSQL, so every
// replica of the service sees the same counts.
package ratelimit

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Limiter counts hits per bucket.
type Limiter struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// New returns a limiter on db.
func New(db *pgxpool.Pool, now func() time.Time) *Limiter {
	return &Limiter{db: db, now: now}
}

func (l *Limiter) window(size time.Duration) (start time.Time, retryAfter time.Duration) {
	now := l.now()
	start = now.Truncate(size)
	return start, start.Add(size).Sub(now)
}

// Hit counts one hit and reports whether it is within limit; when it is not,
// retryAfter says when the window ends.
func (l *Limiter) Hit(ctx context.Context, bucket string, limit int, size time.Duration) (ok bool, retryAfter time.Duration, err error) {
	start, retry := l.window(size)
	var hits int
	err = l.db.QueryRow(ctx, `
		INSERT INTO rate_limits (bucket, window_start, hits) VALUES ($1, $2, 1)
		ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limits.hits + 1
		RETURNING hits`, bucket, start).Scan(&hits)
	if err != nil {
		return false, 0, err
	}
	return hits <= limit, retry, nil
}

// Exceeded reports, without counting, whether bucket has reached limit in the
// current window.
func (l *Limiter) Exceeded(ctx context.Context, bucket string, limit int, size time.Duration) (bool, time.Duration, error) {
	start, retry := l.window(size)
	var hits int
	err := l.db.QueryRow(ctx, `SELECT coalesce(max(hits), 0) FROM rate_limits WHERE bucket = $1 AND window_start = $2`, bucket, start).Scan(&hits)
	if err != nil {
		return false, 0, err
	}
	return hits >= limit, retry, nil
}

// Prune deletes windows that ended before cutoff.
func (l *Limiter) Prune(ctx context.Context, cutoff time.Time) error {
	_, err := l.db.Exec(ctx, `DELETE FROM rate_limits WHERE window_start < $1`, cutoff)
	return err
}
