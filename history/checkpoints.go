package history

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
)

// CopyCheckpoints carries the projections' positions over to a copy of the
// PostgreSQL log in EventStoreDB, after Copy: each consumer group's position
// in the PostgreSQL log (projection_offsets) becomes, in esdb_checkpoints,
// the EventStoreDB position of the last event it had applied. A service
// started on EventStoreDB then goes on from where its read models stand,
// rather than applying the whole history onto them again (which would,
// among other things, publish every classroom change downstream a second
// time). A group that already has an EventStoreDB checkpoint keeps it: that
// one was written by a service running on EventStoreDB. It returns how many
// checkpoints it recorded.
func CopyCheckpoints(ctx context.Context, pool *pgxpool.Pool, to eventstore.Store) (int, error) {
	// The last event at or before each group's position: the offset names an
	// applied event, and a group past the end of the log keeps the last one.
	rows, err := pool.Query(ctx, `
		SELECT o.consumer_group, e.stream_id, e.version, e.uuid::text
		FROM projection_offsets o
		CROSS JOIN LATERAL (
			SELECT stream_id, version, uuid FROM events
			WHERE transaction_id < o.last_processed_transaction_id
			   OR (transaction_id = o.last_processed_transaction_id AND "offset" <= o.offset_acked)
			ORDER BY transaction_id DESC, "offset" DESC LIMIT 1) e
		WHERE NOT EXISTS (SELECT 1 FROM esdb_checkpoints c WHERE c.consumer_group = o.consumer_group)
		ORDER BY o.consumer_group`)
	if err != nil {
		return 0, fmt.Errorf("history: projection positions: %w", err)
	}
	type applied struct {
		group, stream, id string
		version           int64
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (applied, error) {
		var a applied
		return a, row.Scan(&a.group, &a.stream, &a.version, &a.id)
	})
	if err != nil {
		return 0, fmt.Errorf("history: projection positions: %w", err)
	}
	n := 0
	for _, g := range groups {
		evs, err := to.ReadStream(ctx, g.stream, eventstore.Forwards, g.version, 1)
		if err != nil {
			return n, fmt.Errorf("history: checkpoint of %s: read %s: %w", g.group, g.stream, err)
		}
		if len(evs) != 1 || evs[0].Version != g.version || evs[0].ID.String() != g.id {
			return n, fmt.Errorf("history: checkpoint of %s: %s version %d (event %s) is not in the target: copy the events first",
				g.group, g.stream, g.version, g.id)
		}
		p := evs[0].Position
		if p.IsZero() || p.Commit > math.MaxInt64 || p.Prepare > math.MaxInt64 {
			return n, fmt.Errorf("history: checkpoint of %s: unusable target position %s", g.group, p)
		}
		tag, err := pool.Exec(ctx, `INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position)
			VALUES ($1, $2, $3) ON CONFLICT (consumer_group) DO NOTHING`, g.group, int64(p.Commit), int64(p.Prepare))
		if err != nil {
			return n, fmt.Errorf("history: checkpoint of %s: %w", g.group, err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}
