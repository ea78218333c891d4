package commands

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// users are a user id per store, since the stores share one database.
var users = map[string]int64{"postgres": 1, "esdbfake": 2}

// idempotencyStores are the event stores a retry after a crash must work on.
func idempotencyStores(t *testing.T, pool *pgxpool.Pool) map[string]eventstore.Store {
	t.Helper()
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	return map[string]eventstore.Store{"postgres": pg, "esdbfake": esdbfake.OpenStore(t)}
}

// takeKey is what api.idempotently does first: the key's row, and when it
// was taken.
func takeKey(t *testing.T, pool *pgxpool.Pool, userID int64, key string) time.Time {
	t.Helper()
	var since time.Time
	if err := pool.QueryRow(context.Background(), `INSERT INTO idempotency_keys (user_id, key, request, status, headers, body)
		VALUES ($1, $2, 'POST /agents x', 0, '{}', '') RETURNING created_at`, userID, key).Scan(&since); err != nil {
		t.Fatal(err)
	}
	return since
}

// process is one process's command handlers: ids sequences of its own.
func process(t *testing.T, pool *pgxpool.Pool, store eventstore.Store) Deps {
	t.Helper()
	return Deps{Store: store, Registry: events.NewRegistry(), DB: pool, Now: time.Now, IDs: NewSequences(pool)}
}

func countIDs(t *testing.T, d Deps, stream string) map[string]int {
	t.Helper()
	recorded, err := d.Store.ReadStream(context.Background(), stream, eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recorded {
		out[r.ID.String()]++
	}
	return out
}

// A create retried under the same Idempotency-Key by another process, after
// the first died having appended, answers with the first's agent: the same
// id and state, its events once.
func TestIdempotentCreateAfterACrash(t *testing.T) {
	pool := pgtest.Fresh(t)
	for name, store := range idempotencyStores(t, pool) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			user := users[name] // keys are per user
			since := takeKey(t, pool, user, "k1")
			create := aggregates.CreateAgent{OwnerID: user, Name: "once", SystemPrompt: "p"}

			dead, err := NewAgents(process(t, pool, store))
			if err != nil {
				t.Fatal(err)
			}
			deadCtx := WithIdempotency(ctx, user, "k1", since)
			first, firstRes, err := dead.Create(deadCtx, create)
			if err != nil {
				t.Fatal(err)
			}
			if !MayHaveAppended(deadCtx) {
				t.Error("a request that appended does not say so")
			}

			d := process(t, pool, store)
			retry, err := NewAgents(d)
			if err != nil {
				t.Fatal(err)
			}
			again, res, err := retry.Create(WithIdempotency(ctx, user, "k1", since), create)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(first, again); diff != "" {
				t.Errorf("the retry's agent (-first +retry):\n%s", diff)
			}
			if res != firstRes {
				t.Errorf("the retry's result %+v, the first's %+v", res, firstRes)
			}
			stream := eventstore.StreamName(events.CategoryAgent, first.ID)
			ids := countIDs(t, d, stream)
			if len(ids) != 1 {
				t.Errorf("%s holds %v, want one event", stream, ids)
			}

			// Forgotten and taken again, the key is another request's.
			if _, err := pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE user_id = $1 AND key = 'k1'`, user); err != nil {
				t.Fatal(err)
			}
			later := takeKey(t, pool, user, "k1")
			other, _, err := retry.Create(WithIdempotency(ctx, user, "k1", later), create)
			if err != nil {
				t.Fatal(err)
			}
			if other.ID == first.ID {
				t.Errorf("the key taken again made agent %d again", other.ID)
			}
		})
	}
}

// Under a key, each command on a stream has ids of its own; a retry finds
// each command's events and answers with the state they left, though the
// stream moved on since.
func TestIdempotentUpdatesAfterACrash(t *testing.T) {
	pool := pgtest.Fresh(t)
	for name, store := range idempotencyStores(t, pool) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			user := 100 + users[name]
			d := process(t, pool, store)
			agents, _ := NewAgents(d)
			agent, _, err := agents.Create(ctx, aggregates.CreateAgent{OwnerID: user, Name: "a", SystemPrompt: "p"})
			if err != nil {
				t.Fatal(err)
			}
			rename := func(ctx context.Context, to string) (aggregates.Agent, Result) {
				t.Helper()
				a, res, err := agents.Update(ctx, aggregates.UpdateAgent{AgentID: agent.ID, CallerID: user, Name: aggregates.Set(to)})
				if err != nil {
					t.Fatal(err)
				}
				return a, res
			}

			since := takeKey(t, pool, user, "k2")
			dead := WithIdempotency(ctx, user, "k2", since)
			b, bRes := rename(dead, "b") // one request, two commands on one stream
			c, cRes := rename(dead, "c")
			if b.Name != "b" || c.Name != "c" {
				t.Fatalf("the request's commands renamed the agent %q, then %q", b.Name, c.Name)
			}
			rename(ctx, "d") // another request, after

			retry := WithIdempotency(ctx, user, "k2", since)
			b2, bRes2 := rename(retry, "b")
			c2, cRes2 := rename(retry, "c")
			if diff := cmp.Diff(b, b2); diff != "" {
				t.Errorf("the retry's first command (-first +retry):\n%s", diff)
			}
			if diff := cmp.Diff(c, c2); diff != "" {
				t.Errorf("the retry's second command (-first +retry):\n%s", diff)
			}
			if bRes2 != bRes || cRes2 != cRes {
				t.Errorf("the retry's results %+v, %+v; the first's %+v, %+v", bRes2, cRes2, bRes, cRes)
			}
			if n := len(countIDs(t, d, eventstore.StreamName(events.CategoryAgent, agent.ID))); n != 4 {
				t.Errorf("the agent's stream holds %d events, want 4 (created, b, c, d)", n)
			}
		})
	}
}
