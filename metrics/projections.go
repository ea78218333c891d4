package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/projections"
)

// Querier is what the lag query needs: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Lag is how far a projection is behind the head of the log.
type Lag struct {
	// Events is the number of visible events past the projection's committed
	// position, up to maxLagScan.
	Events int64
	// Seconds is the age of the oldest of them (0: caught up).
	Seconds float64
}

// lagSQL is read-only: for each consumer group named in $1, the visible events
// past its row in projection_offsets (from the start of the log when it has
// no row yet), counted up to $2, and the age of the oldest. Position order is
// (transaction_id, "offset"), as the PostgreSQL store's log; only events of
// transactions below the snapshot's xmin are visible to the projections
// (eventstore/postgres, projections' probe), so an in-flight append is not
// lag yet. The positions are scalar subqueries, so both scans are index
// ranges of the log's primary key from the projection's position: joined
// to the offsets row, each scrape read the whole log.
const lagSQL = `
SELECT g.name,
       (SELECT count(*) FROM (
            SELECT FROM events e
            WHERE (e.transaction_id, e."offset") > (p.t, p.f)
              AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY e.transaction_id, e."offset" LIMIT $2) AS past),
       coalesce((SELECT extract(epoch FROM now() - e.recorded_at)::float8 FROM events e
                 WHERE (e.transaction_id, e."offset") > (p.t, p.f)
                   AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                 ORDER BY e.transaction_id, e."offset" LIMIT 1), 0)
FROM unnest($1::text[]) AS g(name)
CROSS JOIN LATERAL (
    SELECT coalesce((SELECT last_processed_transaction_id FROM projection_offsets WHERE consumer_group = g.name), '0') AS t,
           coalesce((SELECT offset_acked FROM projection_offsets WHERE consumer_group = g.name), 0) AS f) AS p`

// ProjectionLags reads how far each named projection (consumer group) is
// behind the head of the PostgreSQL event log, from projection_offsets and
// events. A projection with no offsets row yet lags by the whole log. A lag
// past maxLagScan events reads as maxLagScan.
func ProjectionLags(ctx context.Context, db Querier, names []string) (map[string]Lag, error) {
	rows, err := db.Query(ctx, lagSQL, names, maxLagScan)
	if err != nil {
		return nil, fmt.Errorf("metrics: projection lag: %w", err)
	}
	defer rows.Close()
	out := make(map[string]Lag, len(names))
	for rows.Next() {
		var name string
		var l Lag
		if err := rows.Scan(&name, &l.Events, &l.Seconds); err != nil {
			return nil, fmt.Errorf("metrics: projection lag: %w", err)
		}
		out[name] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("metrics: projection lag: %w", err)
	}
	return out, nil
}

// Projections is the ProjectionSource of a projections.Runner: whether each
// projection is stalled (statuses, usually Runner.Statuses) and, when db is
// not nil, its lag behind the PostgreSQL log, or behind EventStoreDB's when db
// is an ESDBLag. With a nil db the lag is not exported. When the lag query fails, the
// stalled gauges are still reported and the error is returned with them.
func Projections(statuses func() []projections.Status, db Querier) ProjectionSource {
	return func(ctx context.Context) ([]ProjectionStatus, error) {
		sts := statuses()
		out := make([]ProjectionStatus, len(sts))
		names := make([]string, len(sts))
		for i, s := range sts {
			out[i] = ProjectionStatus{Name: s.Name, Stalled: s.Stalled, Skipped: s.Skipped, Lag: -1, LagSeconds: -1}
			names[i] = s.Name
		}
		if db == nil || len(names) == 0 {
			return out, nil
		}
		read := ProjectionLags
		if l, ok := db.(lagReader); ok {
			read = func(ctx context.Context, _ Querier, names []string) (map[string]Lag, error) {
				return l.projectionLags(ctx, names)
			}
		}
		lags, err := read(ctx, db, names)
		if err != nil {
			return out, err
		}
		for i := range out {
			if l, ok := lags[out[i].Name]; ok {
				out[i].Lag, out[i].LagSeconds = float64(l.Events), l.Seconds
			}
		}
		return out, nil
	}
}

// lagReader is a Querier that reads the lag itself (ESDBLag).
type lagReader interface {
	projectionLags(ctx context.Context, names []string) (map[string]Lag, error)
}

// maxLagScan bounds the events one scrape reads to count a projection's lag:
// a lag past it reads as maxLagScan.
const maxLagScan = 10000

// ESDBLag is the db of Projections when the log is EventStoreDB's: the lag
// is the events of log past each projection's checkpoint in esdb_checkpoints
// (all of them before its first checkpoint), counted up to maxLagScan.
func ESDBLag(log eventstore.Store, checkpoints *pgxpool.Pool) Querier {
	return esdbLag{Pool: checkpoints, log: log}
}

type esdbLag struct {
	*pgxpool.Pool // the checkpoints' database
	log           eventstore.Store
}

func (e esdbLag) projectionLags(ctx context.Context, names []string) (map[string]Lag, error) {
	out := make(map[string]Lag, len(names))
	for _, name := range names {
		after, err := projections.LoadESDBCheckpoint(ctx, e.Pool, name)
		if err != nil {
			return nil, fmt.Errorf("metrics: projection lag: %w", err)
		}
		var l Lag
		for l.Events < maxLagScan {
			page, err := e.log.ReadAll(ctx, after, int(min(1000, maxLagScan-l.Events)))
			if errors.Is(err, eventstore.ErrInvalidPosition) {
				// A checkpoint of another log: the projection has stopped
				// on it (its stalled gauge says so) and has no lag to count.
				// The scrape goes on: failed, it would hide that gauge too.
				l = Lag{Events: -1, Seconds: -1}
				break
			}
			if err != nil {
				return nil, fmt.Errorf("metrics: projection lag of %s: %w", name, err)
			}
			if len(page) == 0 {
				break
			}
			if l.Events == 0 {
				l.Seconds = max(0, time.Since(page[0].RecordedAt).Seconds())
			}
			l.Events += int64(len(page))
			after = page[len(page)-1].Position
		}
		if l.Events >= 0 {
			out[name] = l
		}
	}
	return out, nil
}
