package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/eventstore/storetest"
	"lectern/pgtest"
	"lectern/poll"
)

// A projection's poll takes no transaction id before it writes: an open
// transaction id holds back pg_snapshot_xmin for the whole cluster, so a
// poll that waited (the forwarder on a slow broker) would hide every later
// event from every projection. The group stays locked against a second
// consumer, as under the library's FOR UPDATE.
func TestPollTakesNoTransactionID(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	offsets := postgres.NewOffsets()
	sel, err := postgres.NewSchema(10).SelectQuery(wsql.SelectQueryParams{Topic: postgres.Topic, ConsumerGroup: "poll-xid", OffsetsAdapter: offsets})
	if err != nil {
		t.Fatal(err)
	}

	// The zero offset watermill-sql writes before subscribing.
	if _, err := pool.Exec(ctx, `INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
		VALUES ('poll-xid', 0, '0') ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	poll, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = poll.Rollback(ctx) }()
	rows, err := poll.Query(ctx, sel.Query, sel.Args...)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var xid *string
	if err := poll.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if xid != nil {
		t.Fatalf("the poll holds transaction id %s before writing", *xid)
	}

	// (Whether a later append is below the horizon is not asserted: the
	// horizon is the cluster's, which other packages' tests share.)

	// A second consumer of the group waits for the first.
	second, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Rollback(ctx) }()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := second.Exec(short, `SET LOCAL lock_timeout = '100ms'`); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Exec(short, sel.Query, sel.Args...); err == nil {
		t.Error("a second consumer of the group polled while the first held it")
	}
}

// A poll's page ends with a transaction's last event, so that a projection
// applies an append's events in one of its transactions and no read sees
// half of an append; by at most a page more, so that a long transaction
// does not make a page without bound. A page of one stays one (a
// projection going carefully past a failure).
func TestPollEndsWithATransaction(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.New(pool, nil)
	defer store.Close()
	// appendOf appends n events to a new stream and returns the stream and
	// a consumer group whose last event is just before the append's first.
	appendOf := func(n int) (stream, group string) {
		t.Helper()
		stream = "whole-" + uuid.NewString()[:8]
		var evs []eventstore.EventData
		for i := range n {
			evs = append(evs, storetest.Event(fmt.Sprint(i), i+1))
		}
		if _, err := store.Append(ctx, stream, eventstore.NoStream, evs); err != nil {
			t.Fatal(err)
		}
		var txid string
		var first int64
		if err := pool.QueryRow(ctx, `SELECT transaction_id::text, min("offset") FROM events WHERE stream_id = $1 GROUP BY 1`, stream).
			Scan(&txid, &first); err != nil {
			t.Fatal(err)
		}
		group = "whole-" + stream
		if _, err := pool.Exec(ctx, `INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
			VALUES ($1, $2, $3::xid8)`, group, first-1, txid); err != nil {
			t.Fatal(err)
		}
		return stream, group
	}
	page := func(group string, batch int) []string {
		t.Helper()
		sel, err := postgres.NewSchema(batch).SelectQuery(wsql.SelectQueryParams{Topic: postgres.Topic, ConsumerGroup: group, OffsetsAdapter: postgres.NewOffsets()})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := pool.Query(ctx, sel.Query, sel.Args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var offset int64
			var tx, id, payload, meta, streamID, typ string
			var version int64
			var sv int
			var recorded time.Time
			if err := rows.Scan(&offset, &tx, &id, &payload, &meta, &streamID, &version, &typ, &sv, &recorded); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %d", streamID, version))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	versions := func(stream string, n int) []string {
		var out []string
		for v := 1; v <= n; v++ {
			out = append(out, fmt.Sprintf("%s %d", stream, v))
		}
		return out
	}
	three, threes := appendOf(3)
	six, sixes := appendOf(6)
	// The appends are below the horizon once every older transaction of
	// the cluster (other tests') has ended.
	var got []string
	poll.Must(t, 10*time.Second, "the appends below the horizon", func() bool { got = page(sixes, 2); return len(got) > 0 })
	if diff := cmp.Diff(versions(six, 4), got); diff != "" {
		t.Errorf("a page of 2 of six events in one transaction: two more at most (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(versions(three, 3), page(threes, 2)); diff != "" {
		t.Errorf("a page of 2 of three events in one transaction (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(versions(three, 1), page(threes, 1)); diff != "" {
		t.Errorf("a page of 1 (-want +got):\n%s", diff)
	}
}
