package projections

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// Only the events up to the position the offset's update records (told by
// postgres.Offsets through Acked) are applied with it: one watermill-sql
// counted as not acked is read again.
func TestAckedItems(t *testing.T) {
	items := []setItem{
		{m: events.Meta{Position: "900-7"}},
		{m: events.Meta{Position: "900-8"}},
		{m: events.Meta{Position: "1000-3"}},
	}
	for _, tc := range []struct {
		name  string
		acked eventstore.Position
		want  int
	}{
		{"all acked", eventstore.Position{Commit: 1000, Prepare: 3}, 3},
		{"the last not counted", eventstore.Position{Commit: 900, Prepare: 8}, 2},
		{"an earlier offset of the same transaction", eventstore.Position{Commit: 900, Prepare: 7}, 1},
		{"a later offset of an earlier transaction", eventstore.Position{Commit: 900, Prepare: 99}, 2},
	} {
		if got := ackedItems(items, tc.acked); len(got) != tc.want {
			t.Errorf("%s: %d items, want %d", tc.name, len(got), tc.want)
		}
	}
}

// ackRecorder is a poll transaction that records what it is told and asked.
type ackRecorder struct {
	wsql.Tx
	mu  *sync.Mutex
	log *[]string
}

func (r ackRecorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, s)
}

func (r ackRecorder) Acked(pos eventstore.Position) { r.note("acked " + pos.String()) }

func (r ackRecorder) ExecContext(ctx context.Context, q string, args ...any) (wsql.Result, error) {
	r.note("exec")
	return r.Tx.ExecContext(ctx, q, args...)
}

func (r ackRecorder) Commit() error {
	r.note("commit")
	return r.Tx.Commit()
}

type recordingBeginner struct {
	wsql.Beginner
	mu  sync.Mutex
	log []string
}

func (b *recordingBeginner) BeginTx(ctx context.Context, opts *sql.TxOptions) (wsql.Tx, error) {
	tx, err := b.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	r := ackRecorder{Tx: tx, mu: &b.mu, log: &b.log}
	r.note("begin")
	return r, nil
}

// The workaround for watermill-sql giving an offsets adapter no transaction
// (docs/decisions.md, "Watermill-sql seams"): postgres.Offsets tells the
// poll's transaction, found through the acked messages' context, the position
// its next statement acknowledges, right before watermill-sql executes it in
// that transaction; a message delivered but not acked when the subscriber
// closes is not counted.
func TestOffsetsTellThePollWhatItAcks(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	store := postgres.New(pool, nil)
	var last eventstore.Position
	for id := range 3 {
		res, err := store.Append(ctx, eventstore.StreamName("agent", int64(id+1)), eventstore.NoStream, []eventstore.EventData{{
			ID: uuid.New(), Type: "agent.created", SchemaVersion: 1, Data: []byte(`{}`),
		}})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Position
	}
	awaitPollable(t, pool, last)
	if _, err := pool.Exec(ctx, `INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
		VALUES ('acks', 0, '0')`); err != nil {
		t.Fatal(err)
	}
	begin := &recordingBeginner{Beginner: wsql.BeginnerFromPgx(pool)}
	noDeadline := time.Duration(0)
	sub, err := wsql.NewSubscriber(begin, wsql.SubscriberConfig{
		ConsumerGroup: "acks", SchemaAdapter: postgres.NewSchema(10), OffsetsAdapter: postgres.NewOffsets(),
		AckDeadline: &noDeadline,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sub.Subscribe(ctx, postgres.Topic)
	if err != nil {
		t.Fatal(err)
	}
	var positions []string
	for i := range 3 {
		select {
		case m := <-msgs:
			positions = append(positions, m.Metadata.Get(postgres.MetaPosition))
			if i < 2 {
				m.Ack()
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d never delivered", i+1)
		}
	}
	if err := sub.Close(); err != nil { // the third message is delivered, not acked
		t.Fatal(err)
	}
	begin.mu.Lock()
	defer begin.mu.Unlock()
	want := []string{
		"begin", "exec", "commit", // watermill-sql's BeforeSubscribingQueries
		"begin", "acked " + positions[1], "exec", "commit", // the poll
	} // then, maybe, a poll that read the third again and committed nothing
	if len(begin.log) < len(want) || !slices.Equal(begin.log[:len(want)], want) ||
		slices.ContainsFunc(begin.log[len(want):], func(s string) bool { return s != "begin" && s != "commit" }) {
		t.Fatalf("the poll's transaction saw %q, want %q", begin.log, want)
	}
	var acked string
	if err := pool.QueryRow(ctx, `SELECT last_processed_transaction_id::text || '-' || offset_acked FROM projection_offsets
		WHERE consumer_group = 'acks'`).Scan(&acked); err != nil {
		t.Fatal(err)
	}
	if acked != positions[1] {
		t.Fatalf("offset %s, want %s", acked, positions[1])
	}
}
