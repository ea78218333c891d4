package postgres_test

import (
	"context"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"lectern/eventstore/postgres"
	"lectern/pgtest"
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
