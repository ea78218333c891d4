package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/metrics"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/projections"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestProjectionLags(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	recorded := time.Now().Add(-time.Minute)
	store := postgres.New(pool, time.Now)
	t.Cleanup(store.Close)
	var last []eventstore.AppendResult
	for i := range 5 {
		res, err := store.Append(ctx, "lag-"+strconv.Itoa(i), eventstore.NoStream, []eventstore.EventData{{
			ID: uuid.New(), Type: "LagTested", Data: json.RawMessage(`{}`), RecordedAt: recorded.Add(time.Duration(i) * time.Second),
		}})
		if err != nil {
			t.Fatal(err)
		}
		last = append(last, res)
	}
	setOffset := func(group string, p eventstore.Position) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
			VALUES ($1, $2, $3::text::xid8)
			ON CONFLICT (consumer_group) DO UPDATE SET offset_acked = $2, last_processed_transaction_id = $3::text::xid8`,
			group, int64(p.Prepare), strconv.FormatUint(p.Commit, 10)); err != nil {
			t.Fatal(err)
		}
	}
	setOffset("caught-up", last[4].Position)
	setOffset("behind", last[1].Position) // 3 events to go, the oldest recorded 2 s after the first

	// Lag counts only events below the pg_snapshot_xmin horizon, which any
	// open transaction in the cluster may hold back for a moment. Under make
	// test the package has a cluster of its own; when DATABASE_URL is set,
	// every test package shares that server, and another package's
	// transaction can hold it back: wait until all five are visible.
	var lags map[string]metrics.Lag
	poll.Until(10*time.Second, func() bool {
		var err error
		if lags, err = metrics.ProjectionLags(ctx, pool, []string{"caught-up", "behind", "new"}); err != nil {
			t.Fatal(err)
		}
		return lags["new"].Events == 5
	})
	if l := lags["caught-up"]; l.Events != 0 || l.Seconds != 0 {
		t.Errorf("caught-up: %+v, want no lag", l)
	}
	if l := lags["behind"]; l.Events != 3 || l.Seconds < 57 || l.Seconds > 120 {
		t.Errorf("behind: %+v, want 3 events and about 58 s", l)
	}
	if l := lags["new"]; l.Events != 5 || l.Seconds < 59 {
		t.Errorf("new (no offsets row): %+v, want the whole log", l)
	}

	// The source joins the runner's statuses with the lag.
	src := metrics.Projections(func() []projections.Status {
		return []projections.Status{{Name: "behind", Stalled: true}, {Name: "caught-up"}}
	}, pool)
	sts, err := src(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 2 || sts[0].Name != "behind" || !sts[0].Stalled || sts[0].Lag != 3 || sts[1].Lag != 0 || sts[1].Stalled {
		t.Errorf("statuses: %+v", sts)
	}

	// Without a database (EventStoreDB), only whether each projection is stalled.
	sts, err = metrics.Projections(func() []projections.Status { return []projections.Status{{Name: "x"}} }, nil)(ctx)
	if err != nil || len(sts) != 1 || sts[0].Lag >= 0 || sts[0].LagSeconds >= 0 {
		t.Errorf("without a database: %+v, %v", sts, err)
	}

	// A failing lag query still reports the stalled flags.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	sts, err = src(cctx)
	if err == nil || !errors.Is(err, context.Canceled) || len(sts) != 2 || !sts[0].Stalled || sts[0].Lag >= 0 {
		t.Errorf("on a failed query: %+v, %v", sts, err)
	}
}
