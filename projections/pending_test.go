package projections

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"lectern/events"
	"lectern/pgtest"
)

// The wake-up check runs once per projection per committed append: it must
// be an index probe however long the log is, never a scan of the log.
func TestPendingProbesTheIndex(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	if _, err := pool.Exec(ctx, `
		INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, recorded_at)
		SELECT gen_random_uuid(), '{}', '{}', 'agent-' || i, 1, 'agent.created', now() FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(pool, NewListener(pool, slog.New(slog.NewTextHandler(io.Discard, nil))), events.NewRegistry(), nil)
	if !r.pending("accounts") {
		t.Fatal("a group with no offsets row has every event pending")
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
		SELECT 'accounts', "offset", transaction_id FROM events ORDER BY transaction_id DESC, "offset" DESC LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	if r.pending("accounts") {
		t.Fatal("a caught-up group has nothing pending")
	}
	rows, err := pool.Query(ctx, "EXPLAIN "+pendingSQL, "accounts")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if strings.Contains(strings.Join(plan, "\n"), "Seq Scan on events") {
		t.Fatalf("the pending check scans the log:\n%s", strings.Join(plan, "\n"))
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, recorded_at)
		VALUES (gen_random_uuid(), '{}', '{}', 'agent-late', 1, 'agent.created', now())`); err != nil {
		t.Fatal(err)
	}
	if !r.pending("accounts") {
		t.Fatal("an event past the offset is pending")
	}
}
