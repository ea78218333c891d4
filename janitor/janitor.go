// Package janitor purges the operational tables that only grow otherwise:
// expired e-mail codes and refresh tokens, day-old idempotency keys, idle
// rate-limit buckets and finished reindex jobs past their retention.
package janitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"lectern/blobs"
	"lectern/pgbatch"
	"lectern/ratelimit"
)

// Defaults.
const (
	DefaultEvery = 10 * time.Minute
	// DefaultFirstRun is how long after its start the janitor runs first:
	// soon, so that a process restarted more often than Every still
	// purges, but not during the start itself.
	DefaultFirstRun = time.Minute
	// BatchSize bounds one DELETE, so that no purge holds a long
	// transaction (the cluster's log horizon waits for it).
	BatchSize = 10_000
	// IdempotencyTTL is how long an Idempotency-Key is kept (DESIGN §3).
	IdempotencyTTL = 24 * time.Hour
	// DefaultStatementTimeout bounds one DELETE of a purge: one that cannot
	// run (its table locked) or runs long fails the run, which the next
	// tick tries again, rather than holding the janitor, or a transaction
	// id that every projection waits for, without bound.
	DefaultStatementTimeout = 30 * time.Second
	// DefaultJobRetention is how long a finished (completed or failed)
	// reindex job is kept after it finished: its owner may read it
	// (GET /user/document/{knowledge_id}/reindex/{job_id}) until then, and
	// a 404 after. Its events (knowledge.reindex_requested and _finished)
	// stay in the log.
	DefaultJobRetention = 30 * 24 * time.Hour
)

// Janitor purges on a schedule.
type Janitor struct {
	db      *pgxpool.Pool
	limiter *ratelimit.Limiter
	now     func() time.Time
	logger  *slog.Logger
	deleted *prometheus.CounterVec
	runs    prometheus.Gauge
	// Every is the time between runs (default DefaultEvery).
	Every time.Duration
	// FirstRun is the time from Run's start to its first run (default
	// DefaultFirstRun, and never more than Every).
	FirstRun time.Duration
	// StatementTimeout bounds each DELETE of the janitor's own purges, and
	// each statement and each event-store check of the sweep of document
	// blobs (default DefaultStatementTimeout).
	StatementTimeout time.Duration
	// JobRetention is how long a finished reindex job is kept (default
	// DefaultJobRetention).
	JobRetention time.Duration
	// DocumentRecorded, when set, tells the sweep of document blobs
	// (blobs.Sweep) whether a document's upload was recorded; nil: no
	// sweep.
	DocumentRecorded blobs.Recorded
}

// New returns a janitor. reg, if set, gets lectern_janitor_deleted_rows_total
// {table} and lectern_janitor_last_run_timestamp_seconds.
func New(db *pgxpool.Pool, limiter *ratelimit.Limiter, now func() time.Time, logger *slog.Logger, reg prometheus.Registerer) (*Janitor, error) {
	var err error
	if db == nil {
		err = errors.Join(err, errors.New("janitor: nil pool"))
	}
	if limiter == nil {
		err = errors.Join(err, errors.New("janitor: nil limiter"))
	}
	if logger == nil {
		err = errors.Join(err, errors.New("janitor: nil logger"))
	}
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	j := &Janitor{db: db, limiter: limiter, now: now, logger: logger, Every: DefaultEvery, FirstRun: DefaultFirstRun, StatementTimeout: DefaultStatementTimeout,
		JobRetention: DefaultJobRetention,
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lectern_janitor_deleted_rows_total",
			Help: "Rows the janitor purged, by table."}, []string{"table"}),
		runs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lectern_janitor_last_run_timestamp_seconds",
			Help: "When the janitor last finished a run (Unix time)."}),
	}
	if reg != nil {
		if err := reg.Register(j.deleted); err != nil {
			return nil, err
		}
		if err := reg.Register(j.runs); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// purge is a table and what in it has had its day: where's $1 is arg of
// the time the run started (that time, or that time less a retention).
type purge struct {
	table, where string
	arg          func(j *Janitor, now time.Time) time.Time
}

// atStart is the time the run started.
func atStart(_ *Janitor, now time.Time) time.Time { return now }

// purges are the tables the janitor purges itself, in order. Each where is
// read through an index (migration 00028): the purge of a big table whose
// rows are mostly still of use reads only what goes.
var purges = []purge{
	{"email_codes", "expires_at < $1", atStart},
	// A refresh token past its expiry is refused anyway (Refresh refuses
	// an expired token before it looks for reuse), so one that is not
	// revoked goes at its expiry: a session refreshed every few minutes
	// keeps its family alive for good, and the tokens it rotated away would
	// otherwise pile up as long. A revoked token goes only with its whole
	// family, once the family's last token expired: the revoked rows are
	// what the session check reads (api/sessioncheck.go) and what refuses
	// a token a rotation issued while the family was being revoked
	// (commands.Identity.Refresh), and that token expires after them.
	{"refresh_tokens", "expires_at < $1 AND (revoked_at IS NULL OR NOT EXISTS (SELECT 1 FROM refresh_tokens later " +
		"WHERE later.family_id = refresh_tokens.family_id AND later.expires_at >= $1))", atStart},
	{"idempotency_keys", "created_at < $1", func(_ *Janitor, now time.Time) time.Time { return now.Add(-IdempotencyTTL) }},
	// Finished reindex jobs, once their retention is over; queued and
	// running ones are the queue's. The status condition is the partial
	// index's (knowledge_reindex_jobs_finished), word for word, so that the
	// planner can use it.
	{"knowledge_reindex_jobs", "status IN ('completed', 'failed') AND finished_at < $1", func(j *Janitor, now time.Time) time.Time {
		return now.Add(-positiveOr(j.JobRetention, DefaultJobRetention))
	}},
}

// RunOnce purges every table once and returns how many rows went from each.
// A purge that fails (a table locked past the statement timeout) does not
// keep the others from theirs: the run goes on, and fails at its end with
// each failure.
func (j *Janitor) RunOnce(ctx context.Context) (map[string]int64, error) {
	now := j.now()
	out := map[string]int64{}
	timeout := positiveOr(j.StatementTimeout, DefaultStatementTimeout)
	var failed []error
	for _, p := range purges {
		n, err := pgbatch.Delete(ctx, j.db, p.table, p.where, p.arg(j, now), BatchSize, timeout, func(n int64) {
			j.deleted.WithLabelValues(p.table).Add(float64(n))
		})
		out[p.table] += n
		if err != nil {
			failed = append(failed, fmt.Errorf("janitor: purge %s: %w", p.table, err))
			if ctx.Err() != nil {
				return out, errors.Join(failed...)
			}
		}
	}
	// The rate-limit buckets: what is idle is the limiter's to say; the
	// batches and the count are the same as the other tables'.
	pruned, err := j.limiter.Prune(ctx, now, BatchSize)
	for table, n := range pruned {
		out[table] += n
		j.deleted.WithLabelValues(table).Add(float64(n))
	}
	if err != nil {
		failed = append(failed, err)
		if ctx.Err() != nil {
			return out, errors.Join(failed...)
		}
	}
	// The texts of uploads whose event was never appended.
	if j.DocumentRecorded != nil {
		// The whole backlog, page by page; each check of the event store and
		// each statement within the run's statement timeout. A ref that
		// fails is skipped (the run fails, after the others).
		swept, err := blobs.Sweep(ctx, j.db, j.DocumentRecorded, blobs.RefGrace, blobs.SweepLimit, timeout)
		for table, n := range map[string]int64{"document_blob_refs": swept.Refs, "document_blobs": swept.Blobs} {
			out[table] += n
			j.deleted.WithLabelValues(table).Add(float64(n))
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("janitor: %w", err))
		}
	}
	if len(failed) > 0 {
		return out, errors.Join(failed...)
	}
	j.runs.Set(float64(j.now().Unix()))
	return out, nil
}

// positiveOr is d, or def where d is not positive (a field left unset).
func positiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Deleted is the counter of rows purged from table.
func (j *Janitor) Deleted(table string) prometheus.Counter { return j.deleted.WithLabelValues(table) }

// Run purges FirstRun after it starts, then every Every, until ctx ends. A
// failed run is logged and tried again at the next tick.
func (j *Janitor) Run(ctx context.Context) {
	every := positiveOr(j.Every, DefaultEvery)
	t := time.NewTimer(min(positiveOr(j.FirstRun, DefaultFirstRun), every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(every)
		deleted, err := j.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			j.logger.Warn("janitor run failed", "error", err)
			continue
		}
		j.logger.Info("janitor run", "deleted", deleted)
	}
}
