package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"lectern/pgtest"
	"lectern/poll"
)

// A scrape reads each projection's lag from its position on: an index range
// of the log, never the whole log, and a far-behind projection's count stops
// at maxLagScan.
func TestLagQueryReadsFromThePosition(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	if _, err := pool.Exec(ctx, `
		INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, recorded_at)
		SELECT gen_random_uuid(), '{}', '{}', 'agent-' || i, 1, 'agent.created', now() FROM generate_series(1, 2 * $1::int) AS i`, maxLagScan); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
		SELECT 'caught-up', "offset", transaction_id FROM events ORDER BY transaction_id DESC, "offset" DESC LIMIT 1;
		ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	// Events become visible to the lag once the cluster's oldest running
	// transaction (perhaps another test's, in another database) is younger.
	var lags map[string]Lag
	poll.Until(10*time.Second, func() bool {
		var err error
		if lags, err = ProjectionLags(ctx, pool, []string{"caught-up", "new"}); err != nil {
			t.Fatal(err)
		}
		return lags["new"].Events == maxLagScan
	})
	if lags["caught-up"].Events != 0 || lags["new"].Events != maxLagScan {
		t.Fatalf("lags %+v: want 0 for the caught-up projection, %d (the cap) for the new one", lags, maxLagScan)
	}
	plan := strings.Split(pgtest.Explain(t, pool, lagSQL, []string{"caught-up", "new"}, maxLagScan), "\n")
	for _, line := range plan {
		if strings.Contains(line, "Seq Scan on events") || (strings.Contains(line, "Filter") && strings.Contains(line, "ROW(")) {
			t.Fatalf("the lag query reads the log past its position's index range:\n%s", strings.Join(plan, "\n"))
		}
	}
}
