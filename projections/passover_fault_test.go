package projections_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/poll"
	"lectern/projections"
)

// refuseSkipped makes projection_dead_letters, in the test's own database,
// refuse to mark a dead letter skipped while skip_fault.armed is set: the
// statement with which a projection passes over an event (passOver) fails,
// and aborts the projection's transaction. Each refusal draws from the
// sequence skip_refusals, which the rollback of that transaction does not
// undo, so the test can count them.
var refuseSkipped = []string{
	`CREATE TABLE seen (agent_id BIGINT NOT NULL)`,
	`CREATE TABLE skip_fault (armed BOOLEAN NOT NULL)`,
	`INSERT INTO skip_fault VALUES (true)`,
	`CREATE SEQUENCE skip_refusals`,
	`CREATE FUNCTION refuse_skipped() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.status = 'skipped' AND (SELECT armed FROM skip_fault) THEN
			PERFORM nextval('skip_refusals');
			RAISE EXCEPTION 'projection_dead_letters refuses to mark % skipped', NEW.event_id;
		END IF;
		RETURN NEW;
	END $$`,
	`CREATE TRIGGER refuse_skipped BEFORE UPDATE ON projection_dead_letters
		FOR EACH ROW EXECUTE FUNCTION refuse_skipped()`,
}

// skipRefusals is how many times the dead letters refused a skip.
func skipRefusals(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(),
		`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM skip_refusals`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkpoint is the position projection group has committed.
func checkpoint(t *testing.T, pool *pgxpool.Pool, group string) eventstore.Position {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT last_processed_transaction_id::text || '-' || offset_acked
		FROM projection_offsets WHERE consumer_group = $1`, group).Scan(&s); err != nil {
		t.Fatal(err)
	}
	pos, err := eventstore.ParsePosition(s)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// An operator's skip that cannot be recorded (the statement marking the
// dead letter skipped fails, breaking the projection's transaction) does not
// ack the event: the projection holds its place before it, applies nothing
// after it, and keeps the skip, trying it again on a new transaction. Once
// the dead letters accept the update, it passes over the event (without
// trying it again: its failures stay those it stopped at), the dead letter
// ends skipped, and the events after it are applied.
func TestASkipThatCannotBeRecordedIsTriedAgain(t *testing.T) {
	for _, tc := range applyModes {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool := freshWith(t, refuseSkipped...)
			var broken atomic.Bool
			broken.Store(true) // the event never applies: the operator gives up on it
			p := failing("passover", &broken, projections.StopOnPoison)
			p.Tables = tc.tables
			l, r := start(t, pool, 3, p)
			appendAgent(t, pool, 1, "fine")
			poisonPos := appendAgent(t, pool, 2, "poison")
			after := appendAgent(t, pool, 3, "fine")
			awaitStall(t, r, "passover")
			d := deadLetter(t, pool, "passover")
			if err := projections.ResolveDeadLetter(ctx, pool, "passover", d.EventID, projections.DeadLetterSkip, "test"); err != nil {
				t.Fatal(err)
			}

			// The skip is refused, and tried again after the failure.
			poll.Must(t, 20*time.Second, "the projection trying its skip again after a refusal", func() bool {
				return skipRefusals(t, pool) >= 2
			})
			if got := checkpoint(t, pool, "passover"); got.Compare(poisonPos) >= 0 {
				t.Errorf("checkpoint %s while the skip of the event at %s is refused: acked past it", got, poisonPos)
			}
			if ids := seenIDs(t, pool); len(ids) != 1 || ids[0] != 1 {
				t.Errorf("applied %v while the skip is refused, want [1]", ids)
			}
			if st := deadLetter(t, pool, "passover").Status; st != projections.DeadLetterSkip {
				t.Errorf("dead letter %s while its skip is refused, want %s (still asked for)", st, projections.DeadLetterSkip)
			}
			if n := skippedOf(r, "passover"); n != 0 {
				t.Errorf("skipped %d while the skip is refused, want 0", n)
			}

			// The fault is gone: the skip goes through.
			if _, err := pool.Exec(ctx, `UPDATE skip_fault SET armed = false`); err != nil {
				t.Fatal(err)
			}
			wantPassedOver(t, pool, l, "passover", after)
			if got := checkpoint(t, pool, "passover"); got.Compare(after) < 0 {
				t.Errorf("checkpoint %s, want at least %s", got, after)
			}
			if n := skippedOf(r, "passover"); n != 1 {
				t.Errorf("skipped %d, want 1", n)
			}
			if _, stalled := stalledStatus(r, "passover"); stalled {
				t.Error("still reported stalled")
			}
		})
	}
}
