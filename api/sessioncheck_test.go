package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/authlease"
	"lectern/pgtest"
	"lectern/poll"
)

// Requests that arrive while a session lookup is in flight share the next
// one, and each gets its own answer from a statement that began after it
// arrived: a session revoked while the first lookup waits is refused to the
// requests queued behind it.
func TestSessionChecksShareALookup(t *testing.T) {
	ctx := context.Background()
	// A database of its own: the test locks a table.
	pool, _, err := pgtest.NewDatabase(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	const n = 6
	ids := make([]int64, n)
	sessions := make([]uuid.UUID, n)
	for i := range n {
		ids[i], sessions[i] = int64(9000+i), uuid.New()
		roles := []string{"user"}
		if i%2 == 1 {
			roles = append(roles, "partner")
		}
		if _, err := pool.Exec(ctx, `INSERT INTO users (id, email, name, roles, created_at, updated_at, version)
			VALUES ($1, $2, 'U', $3, now(), now(), 1)`, ids[i], fmt.Sprintf("u%d@example.com", i), roles); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at)
			VALUES ($1, $2, $3, now() + interval '1 hour')`, uuid.NewString(), ids[i], sessions[i]); err != nil {
			t.Fatal(err)
		}
	}
	unknown := int64(9999) // signed up, but not yet in the users read model

	// Hold the users table so that the first lookup waits in the database.
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE users IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	c := &sessionChecks{db: pool}
	type answer struct {
		q   *sessionCheck
		err error
	}
	answers := make([]answer, n+2)
	var wg sync.WaitGroup
	ask := func(slot int, user int64, session uuid.UUID) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := c.check(ctx, user, session)
			answers[slot] = answer{q, err}
		}()
	}
	ask(0, ids[0], sessions[0])
	poll.Must(t, 10*time.Second, "the first lookup waiting on the lock", func() bool {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	// Revoked after the first lookup began, before the others arrive.
	if _, err := pool.Exec(ctx, `UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1`, sessions[3]); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		ask(i, ids[i], sessions[i])
	}
	ask(n, ids[1], sessions[1]) // the same question twice in one batch
	ask(n+1, unknown, uuid.New())
	poll.Must(t, 10*time.Second, "the other requests queued", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queued) == n+1
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if got := c.lookups.Load(); got != 2 {
		t.Errorf("%d lookups for %d requests, want 2 (the first, then one for the rest)", got, n+2)
	}
	for slot, a := range answers {
		if a.err != nil {
			t.Fatalf("request %d: %v", slot, a.err)
		}
		i := slot
		switch slot {
		case n:
			i = 1
		case n + 1:
			if a.q.known || a.q.revoked {
				t.Errorf("unknown user: known %v revoked %v, want neither", a.q.known, a.q.revoked)
			}
			continue
		}
		wantRoles := []string{"user"}
		if i%2 == 1 {
			wantRoles = append(wantRoles, "partner")
		}
		if !a.q.known || !slices.Equal(a.q.roles, wantRoles) {
			t.Errorf("request %d (user %d): known %v roles %v, want known, %v", slot, ids[i], a.q.known, a.q.roles, wantRoles)
		}
		if a.q.revoked != (i == 3) {
			t.Errorf("request %d (user %d): revoked %v, want %v", slot, ids[i], a.q.revoked, i == 3)
		}
	}
}

// A request whose client goes away stops waiting; the others' lookup goes on.
func TestSessionCheckOfAGoneClient(t *testing.T) {
	ctx := context.Background()
	pool, _, err := pgtest.NewDatabase(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := &sessionChecks{db: pool}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.check(gone, 1, uuid.New()); err == nil {
		t.Fatal("a cancelled request's check succeeded")
	}
	q, err := c.check(ctx, 1, uuid.New())
	if err != nil || q.known {
		t.Fatalf("the next check: %v, known %v; want an answer, unknown user", err, q != nil && q.known)
	}
}

// Under a lease, a session's answer is remembered until a revocation or a
// role change commits anywhere: the next check after either is the
// database's again. A user the read model does not hold yet is not
// remembered.
func TestSessionChecksAreRememberedUnderALease(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	lease := authlease.New(pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	leaseCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); lease.Run(leaseCtx) }()
	t.Cleanup(func() { stop(); <-done })
	poll.Must(t, 10*time.Second, "the lease held", func() bool { _, ok := lease.Current(); return ok })

	const user, unknown = 7100, 7199
	session, other := uuid.New(), uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO users (id, email, name, roles, created_at, updated_at, version)
		VALUES ($1, 'lease@example.com', 'U', '{user}', now(), now(), 1)`, user); err != nil {
		t.Fatal(err)
	}
	for _, s := range []uuid.UUID{session, other} {
		if _, err := pool.Exec(ctx, `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at)
			VALUES ($1, $2, $3, now() + interval '1 hour')`, uuid.NewString(), user, s); err != nil {
			t.Fatal(err)
		}
	}
	c := &sessionChecks{db: pool, lease: lease}
	// ask checks user's session (under a lease held throughout, so that
	// what is counted is what was remembered) and returns its answer and
	// the lookups it took.
	ask := func(user int64, session uuid.UUID) (*sessionCheck, int64) {
		t.Helper()
		for {
			before, ok := lease.Current()
			lookups := c.lookups.Load()
			q, err := c.check(ctx, user, session)
			if err != nil {
				t.Fatal(err)
			}
			if after, still := lease.Current(); ok && still && after == before {
				return q, c.lookups.Load() - lookups
			}
		}
	}
	if q, _ := ask(user, session); !q.known || q.revoked || !slices.Equal(q.roles, []string{"user"}) {
		t.Fatalf("first answer: known %v revoked %v roles %v", q.known, q.revoked, q.roles)
	}
	if _, lookups := ask(user, session); lookups != 0 {
		t.Errorf("the second check of a session took %d lookups, want it remembered", lookups)
	}
	for range 2 {
		if _, lookups := ask(unknown, session); lookups != 1 {
			t.Errorf("a check of a user the read model lacks took %d lookups, want 1 each time", lookups)
		}
	}

	// A role granted (as the users projection grants it, or by hand), then
	// taken back by hand.
	for _, roles := range [][]string{{"user", "partner"}, {"user"}} {
		if _, err := pool.Exec(ctx, `UPDATE users SET roles = $2 WHERE id = $1`, user, roles); err != nil {
			t.Fatal(err)
		}
		if q, _ := ask(user, session); !slices.Equal(q.roles, roles) {
			t.Errorf("roles after they were set to %v: %v", roles, q.roles)
		}
	}

	// Another of the user's sessions logged out: this one stays open.
	if _, err := pool.Exec(ctx, `UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1`, other); err != nil {
		t.Fatal(err)
	}
	if q, _ := ask(user, other); !q.revoked {
		t.Error("the logged-out session is not revoked")
	}
	if q, _ := ask(user, session); q.revoked {
		t.Error("the session still open reads as revoked")
	}
	if _, err := pool.Exec(ctx, `UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1`, session); err != nil {
		t.Fatal(err)
	}
	if q, _ := ask(user, session); !q.revoked {
		t.Error("the session logged out reads as open")
	}
}
