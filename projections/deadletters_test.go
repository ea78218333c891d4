package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/poll"
	"lectern/projections"
)

// failing is a projection into seen that fails on agents named "poison"
// while broken says so.
func failing(name string, broken *atomic.Bool, policy projections.PoisonPolicy) projections.Projection {
	return projections.Projection{Name: name, OnPoison: policy, Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			if e.Name == "poison" && broken.Load() {
				return errors.New("cannot apply this event")
			}
			_, err := tx.Exec(ctx, `INSERT INTO seen VALUES ($1)`, e.AgentID)
			return err
		}),
	}}
}

func seenIDs(t *testing.T, pool *pgxpool.Pool) []int64 {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `SELECT agent_id FROM seen ORDER BY agent_id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// deadLetter is the projection's one dead letter.
func deadLetter(t *testing.T, pool *pgxpool.Pool, name string) projections.DeadLetter {
	t.Helper()
	all, err := projections.ListDeadLetters(context.Background(), pool, true)
	if err != nil {
		t.Fatal(err)
	}
	var mine []projections.DeadLetter
	for _, d := range all {
		if d.Projection == name {
			mine = append(mine, d)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("dead letters of %s: %+v, want one", name, mine)
	}
	return mine[0]
}

func skippedOf(r *projections.Runner, name string) int64 {
	for _, s := range r.Statuses() {
		if s.Name == name {
			return s.Skipped
		}
	}
	return -1
}

// A poison event stops its projection and is recorded as a dead letter with
// its error; an operator's skip restarts the projection past it.
func TestOperatorSkipsAPoisonEvent(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
	var broken atomic.Bool
	broken.Store(true)
	l, r := start(t, pool, 3, failing("stopper", &broken, projections.StopOnPoison))
	appendAgent(t, pool, 1, "fine")
	poisonPos := appendAgent(t, pool, 2, "poison")
	after := appendAgent(t, pool, 3, "fine")
	awaitStall(t, r, "stopper")

	d := deadLetter(t, pool, "stopper")
	if d.Status != projections.DeadLetterStopped || d.Failures != 3 || d.EventType != "agent.created" || d.StreamID != "agent-2" ||
		d.Position != poisonPos.String() || d.Error == "" {
		t.Errorf("dead letter %+v", d)
	}
	if listed, err := projections.ListDeadLetters(context.Background(), pool, false); err != nil || len(listed) != 1 {
		t.Errorf("waiting dead letters: %+v, %v", listed, err)
	}
	if err := projections.ResolveDeadLetter(context.Background(), pool, "stopper", "00000000-0000-0000-0000-000000000000",
		projections.DeadLetterSkip, "test"); !errors.Is(err, projections.ErrNotStopped) {
		t.Errorf("skip of an unknown event: %v, want ErrNotStopped", err)
	}
	if err := projections.ResolveDeadLetter(context.Background(), pool, "stopper", d.EventID, "delete", "test"); err == nil {
		t.Error("an unknown action was accepted")
	}
	if err := projections.ResolveDeadLetter(context.Background(), pool, "stopper", d.EventID, projections.DeadLetterSkip, "test"); err != nil {
		t.Fatal(err)
	}
	// Passed over without another try: its failures stay those it stopped at.
	wantPassedOver(t, pool, l, "stopper", after)
	if n := skippedOf(r, "stopper"); n != 1 {
		t.Errorf("skipped %d, want 1", n)
	}
	if _, stalled := stalledStatus(r, "stopper"); stalled {
		t.Error("still reported stalled")
	}
}

// Once the fault is fixed, an operator's retry applies the event where it
// stands in the log, and the dead letter is resolved: also where the
// projection applies its events in live batches, which take the retried
// event one at a time (a batch would apply it without a word).
func TestOperatorRetriesAPoisonEvent(t *testing.T) {
	const name = "retrier"
	for _, c := range applyModes {
		t.Run(c.name, func(t *testing.T) {
			pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
			var broken atomic.Bool
			broken.Store(true)
			p := failing(name, &broken, projections.StopOnPoison)
			p.Tables = c.tables
			l, r := start(t, pool, 2, p)
			appendAgent(t, pool, 1, "poison")
			after := appendAgent(t, pool, 2, "fine")
			awaitStall(t, r, name)
			d := deadLetter(t, pool, name)

			broken.Store(false) // the fix is deployed
			if err := projections.ResolveDeadLetter(context.Background(), pool, name, d.EventID, projections.DeadLetterRetry, "test"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, l, after, name)
			if ids := seenIDs(t, pool); len(ids) != 2 {
				t.Errorf("applied %v, want [1 2]", ids)
			}
			poll.Must(t, 10*time.Second, "the dead letter resolved", func() bool {
				return deadLetter(t, pool, name).Status == projections.DeadLetterResolved
			})
			if n := skippedOf(r, name); n != 0 {
				t.Errorf("skipped %d, want 0", n)
			}
		})
	}
}

// A dead letter's error is told without the values it quotes, and names
// the subject whose personal data its event holds; one recorded after the
// subject's erasure is blank. Under either policy: a skipped event's dead
// letter is written in the projection's transaction.
func TestADeadLetterKeepsNoQuotedValue(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy projections.PoisonPolicy
		erased bool
	}{
		{"caster", projections.StopOnPoison, false},
		{"skipping-caster", projections.SkipPoison, false},
		{"caster-of-the-erased", projections.StopOnPoison, true},
		{"skipping-caster-of-the-erased", projections.SkipPoison, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
			if c.erased { // user 1 (appendAgent's owner) erased before the event fails
				if _, err := pool.Exec(context.Background(), `INSERT INTO subject_keys (subject, wrapped, erased_at) VALUES ('user-1', NULL, now())`); err != nil {
					t.Fatal(err)
				}
			}
			p := projections.Projection{Name: c.name, OnPoison: c.policy, Handlers: []projections.GroupHandler{
				projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
					_, err := tx.Exec(ctx, `INSERT INTO seen VALUES ($1::text::bigint)`, e.Name)
					return err
				}),
			}}
			l, r := start(t, pool, 2, p)
			at := appendAgent(t, pool, 1, "Ann MRK7731")
			if c.policy == projections.StopOnPoison {
				awaitStall(t, r, c.name)
			} else {
				waitFor(t, l, at, c.name)
			}
			d := deadLetter(t, pool, c.name)
			switch {
			case c.erased && d.Error != "[erased]":
				t.Errorf("dead letter error %q: want it blank, its subject erased", d.Error)
			case !c.erased && (strings.Contains(d.Error, "MRK7731") || !strings.Contains(d.Error, "invalid input syntax for type bigint")):
				t.Errorf("dead letter error %q: want the failure without the value", d.Error)
			}
			if st, _ := stalledStatus(r, c.name); strings.Contains(st.Error, "MRK7731") {
				t.Errorf("the projection's status says %q", st.Error)
			}
			var subject string
			if err := pool.QueryRow(context.Background(), `SELECT subject FROM projection_dead_letters WHERE projection = $1`, c.name).Scan(&subject); err != nil {
				t.Fatal(err)
			}
			if subject != "user-1" { // the agent's owner (appendAgent)
				t.Errorf("the dead letter's subject is %q, want user-1", subject)
			}
		})
	}
}

// A projection whose policy is to skip passes over a poison event at once,
// recording it; it never stops.
func TestSkipPolicyPassesOverAPoisonEvent(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
	var broken atomic.Bool
	broken.Store(true)
	l, r := start(t, pool, 2, failing("skipper", &broken, projections.SkipPoison))
	appendAgent(t, pool, 1, "fine")
	appendAgent(t, pool, 2, "poison")
	after := appendAgent(t, pool, 3, "fine")
	waitFor(t, l, after, "skipper")
	if ids := seenIDs(t, pool); len(ids) != 2 || ids[0] != 1 || ids[1] != 3 {
		t.Errorf("applied %v, want [1 3]", ids)
	}
	if d := deadLetter(t, pool, "skipper"); d.Status != projections.DeadLetterSkipped || d.Failures != 2 || d.StreamID != "agent-2" {
		t.Errorf("dead letter %+v", d)
	}
	if n := skippedOf(r, "skipper"); n != 1 {
		t.Errorf("skipped %d, want 1", n)
	}
	if listed, err := projections.ListDeadLetters(context.Background(), pool, false); err != nil || len(listed) != 0 {
		t.Errorf("dead letters waiting for an operator: %+v, %v", listed, err)
	}
}

func stalledStatus(r *projections.Runner, name string) (projections.Status, bool) {
	for _, s := range r.Statuses() {
		if s.Name == name {
			return s, s.Stalled
		}
	}
	return projections.Status{}, false
}

// An erasure that fails is never passed over, whatever the projection's
// policy, and an operator cannot skip it: the read model would keep the
// person's data. Once fixed, a retry applies it.
func TestAnErasureIsNeverPassedOver(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
	var broken atomic.Bool
	broken.Store(true)
	p := failing("eraser", &broken, projections.SkipPoison)
	p.Handlers = append(p.Handlers, projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.UserErased) error {
		if broken.Load() {
			return errors.New("cannot anonymise")
		}
		_, err := tx.Exec(ctx, `DELETE FROM seen WHERE agent_id = $1`, e.UserID)
		return err
	}))
	l, r := start(t, pool, 2, p)
	appendAgent(t, pool, 7, "fine")
	data, _ := json.Marshal(events.UserErased{UserID: 7, Actor: 7})
	if _, err := postgres.New(pool, nil).Append(context.Background(), "user-7", eventstore.Any,
		[]eventstore.EventData{{ID: uuid.New(), Type: "user.erased", SchemaVersion: 1, Data: data, RecordedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	after := appendAgent(t, pool, 8, "fine")
	awaitStall(t, r, "eraser")
	d := deadLetter(t, pool, "eraser")
	if d.Status != projections.DeadLetterStopped || d.EventType != "user.erased" {
		t.Fatalf("dead letter %+v: want the erasure, stopped (not skipped)", d)
	}
	if err := projections.ResolveDeadLetter(context.Background(), pool, "eraser", d.EventID, projections.DeadLetterSkip, "test"); !errors.Is(err, projections.ErrErasureNotSkipped) {
		t.Errorf("an operator's skip of the erasure: %v, want ErrErasureNotSkipped", err)
	}
	// A skip set past ResolveDeadLetter (by hand, in SQL) is not obeyed
	// either: the runner tries the erasure again, stops on it again, and
	// forgets the skip.
	if _, err := pool.Exec(context.Background(), `UPDATE projection_dead_letters SET status = 'skip' WHERE projection = 'eraser'`); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, 10*time.Second, "the erasure tried again and stopped on", func() bool {
		again := deadLetter(t, pool, "eraser")
		_, stalled := stalledStatus(r, "eraser")
		return stalled && again.Status == projections.DeadLetterStopped && again.Failures > d.Failures
	})
	if ids := seenIDs(t, pool); len(ids) != 1 || ids[0] != 7 {
		t.Errorf("rows %v while the erasure stops its projection, want [7]", ids)
	}
	broken.Store(false)
	if err := projections.ResolveDeadLetter(context.Background(), pool, "eraser", d.EventID, projections.DeadLetterRetry, "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, l, after, "eraser")
	if ids := seenIDs(t, pool); len(ids) != 1 || ids[0] != 8 {
		t.Errorf("rows %v after the erasure applied, want [8]", ids)
	}
	if n := skippedOf(r, "eraser"); n != 0 {
		t.Errorf("skipped %d, want 0", n)
	}
}

// connectionKiller is a projection into seen whose handler, on agents named
// "poison", ends its own connection: as a value the driver cannot send
// does, the attempt breaks its transaction, so no dead letter can be
// written in it. With tables, it is applied in live batches first.
func connectionKiller(name string, policy projections.PoisonPolicy, tables ...string) projections.Projection {
	return connectionKillerFor(name, policy, nil, tables...)
}

// connectionKillerFor is connectionKiller that kills only while kills,
// when given, is above 0, and counts them down.
func connectionKillerFor(name string, policy projections.PoisonPolicy, kills *atomic.Int32, tables ...string) projections.Projection {
	return projections.Projection{Name: name, OnPoison: policy, Tables: tables, Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			if e.Name == "poison" && (kills == nil || kills.Add(-1) >= 0) {
				_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
				return errors.Join(errors.New("the connection is gone"), err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO seen VALUES ($1)`, e.AgentID)
			return err
		}),
	}}
}

// An event whose every attempt breaks its transaction is poison too: after
// MaxAttempts polls its projection stops with a dead letter (it used to
// poll it forever), and an operator's skip passes over it.
func TestAnEventThatBreaksItsTransactionStopsItsProjection(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
	l, r := start(t, pool, 3, connectionKiller("killed", projections.StopOnPoison))
	appendAgent(t, pool, 1, "fine")
	poisonPos := appendAgent(t, pool, 2, "poison")
	after := appendAgent(t, pool, 3, "fine")
	awaitStall(t, r, "killed")
	d := deadLetter(t, pool, "killed")
	if d.Status != projections.DeadLetterStopped || d.Failures != 3 || d.Position != poisonPos.String() ||
		!strings.Contains(d.Error, "the connection is gone") {
		t.Errorf("dead letter %+v", d)
	}
	if err := projections.ResolveDeadLetter(context.Background(), pool, "killed", d.EventID, projections.DeadLetterSkip, "test"); err != nil {
		t.Fatal(err)
	}
	wantPassedOver(t, pool, l, "killed", after)
}

// wantPassedOver waits for projection name to reach after, past agent 2,
// which it skipped after 3 failures: agents 1 and 3 applied.
func wantPassedOver(t *testing.T, pool *pgxpool.Pool, l *projections.Listener, name string, after eventstore.Position) {
	t.Helper()
	waitFor(t, l, after, name)
	if ids := seenIDs(t, pool); len(ids) != 2 || ids[0] != 1 || ids[1] != 3 {
		t.Errorf("applied %v, want [1 3]", ids)
	}
	if d := deadLetter(t, pool, name); d.Status != projections.DeadLetterSkipped || d.Failures != 3 {
		t.Errorf("after the skip: %+v", d)
	}
}

// Under SkipPoison, such an event is passed over after MaxAttempts polls,
// in live batches as one at a time.
func TestSkipPolicyPassesOverAnEventThatBreaksItsTransaction(t *testing.T) {
	for _, tc := range applyModes {
		t.Run(tc.name, func(t *testing.T) {
			pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
			l, r := start(t, pool, 3, connectionKiller("killed", projections.SkipPoison, tc.tables...))
			appendAgent(t, pool, 1, "fine")
			appendAgent(t, pool, 2, "poison")
			after := appendAgent(t, pool, 3, "fine")
			wantPassedOver(t, pool, l, "killed", after)
			if n := skippedOf(r, "killed"); n != 1 {
				t.Errorf("skipped %d, want 1", n)
			}
		})
	}
}

// A connection lost once (a restart, a failover) costs an attempt, not the
// event: the projection starts again on a new connection and applies it,
// even under SkipPoison, and writes no dead letter.
func TestALostConnectionIsNotPoison(t *testing.T) {
	pool := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
	var kills atomic.Int32
	kills.Store(2) // fewer than MaxAttempts
	l, r := start(t, pool, 3, connectionKillerFor("blip", projections.SkipPoison, &kills))
	appendAgent(t, pool, 1, "fine")
	appendAgent(t, pool, 2, "poison")
	after := appendAgent(t, pool, 3, "fine")
	waitFor(t, l, after, "blip")
	if ids := seenIDs(t, pool); len(ids) != 3 {
		t.Errorf("applied %v, want [1 2 3]", ids)
	}
	if all, err := projections.ListDeadLetters(context.Background(), pool, true); err != nil || len(all) != 0 {
		t.Errorf("dead letters %+v (%v), want none", all, err)
	}
	if n := skippedOf(r, "blip"); n != 0 {
		t.Errorf("skipped %d, want 0", n)
	}
}

// A projection whose transaction is lost while the database is away (a
// failover) keeps trying to start again, and goes on once it is back: it
// neither gives up nor makes the event a dead letter.
func TestAProjectionOutlivesAFailover(t *testing.T) {
	base := freshWith(t, `CREATE TABLE seen (agent_id BIGINT NOT NULL)`)
	var down atomic.Bool
	var refused atomic.Int32
	cfg := base.Config()
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		// Away until it has refused a few connections: the projection's
		// attempts to start again among them.
		if down.Load() && refused.Add(1) <= 6 {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		down.Store(false)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var failovers atomic.Int32
	failovers.Store(1)
	p := projections.Projection{Name: "failover", Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			if e.Name == "poison" && failovers.Add(-1) >= 0 {
				down.Store(true)
				pool.Reset()
				_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
				return errors.Join(errors.New("the server went away"), err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO seen VALUES ($1)`, e.AgentID)
			return err
		}),
	}}
	l, _ := start(t, pool, 3, p)
	appendAgent(t, base, 1, "fine")
	appendAgent(t, base, 2, "poison")
	after := appendAgent(t, base, 3, "fine")
	// The router stopped on the dead transaction may take its close timeout
	// (15 s) to let go of its handlers while the database is away.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := l.WaitFor(ctx, after, "failover"); err != nil {
		t.Fatalf("the projection did not go on after the failover: %v", err)
	}
	if ids := seenIDs(t, base); len(ids) != 3 {
		t.Errorf("applied %v, want [1 2 3]", ids)
	}
	if refused.Load() < 6 {
		t.Errorf("the database refused %d connections: the outage was not met", refused.Load())
	}
	if all, err := projections.ListDeadLetters(context.Background(), base, true); err != nil || len(all) != 0 {
		t.Errorf("dead letters %+v (%v), want none", all, err)
	}
}
