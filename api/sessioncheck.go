package api

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sessionChecks answers, for every authenticated request, whether its
// session is still open and which roles its user holds now. Requests that
// arrive while a lookup is in flight share the next one, like a group
// commit: under load one statement answers many requests, and an idle
// server pays one statement per request, as before. Nothing is remembered:
// every request is answered by a statement that began after it arrived, so
// a logout or a role change committed before a request counts for it, on
// every replica.
type sessionChecks struct {
	db *pgxpool.Pool
	// lookups counts the statements issued, for tests.
	lookups atomic.Int64

	mu      sync.Mutex
	queued  []*sessionCheck
	running bool
}

// sessionCheck is one request's question and, once done is closed, its answer.
type sessionCheck struct {
	user    int64
	session uuid.UUID

	roles   []string
	known   bool // false while the users read model has not caught up with a sign-up
	revoked bool
	err     error
	done    chan struct{}
}

// sessionCheckTimeout bounds one shared lookup: it no longer runs under any
// one request's context, since the others in its batch still wait for it.
const sessionCheckTimeout = 5 * time.Second

var errShortSessionLookup = errors.New("session lookup: fewer rows than sessions asked")

// check looks up user's roles and whether session was revoked.
func (c *sessionChecks) check(ctx context.Context, user int64, session uuid.UUID) (*sessionCheck, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q := &sessionCheck{user: user, session: session, done: make(chan struct{})}
	c.mu.Lock()
	c.queued = append(c.queued, q)
	lead := !c.running
	var batch []*sessionCheck
	if lead {
		c.running = true
		batch, c.queued = c.queued, nil
	}
	c.mu.Unlock()
	if lead {
		// This request's own lookup runs on its goroutine; the batches
		// queued meanwhile run on their own (see run).
		c.run(context.WithoutCancel(ctx), batch)
	}
	select {
	case <-q.done:
		return q, q.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run answers batch, then hands whatever queued meanwhile to the next lookup.
func (c *sessionChecks) run(ctx context.Context, batch []*sessionCheck) { //nolint:contextcheck // see the go statement
	c.lookup(ctx, batch)
	c.mu.Lock()
	next := c.queued
	c.queued = nil
	if len(next) == 0 {
		c.running = false
	}
	c.mu.Unlock()
	if len(next) > 0 {
		// Not ctx: that is this batch's first request, which is done.
		go c.run(context.Background(), next)
	}
}

// lookup answers every check of batch with one statement.
func (c *sessionChecks) lookup(ctx context.Context, batch []*sessionCheck) {
	c.lookups.Add(1)
	ctx, cancel := context.WithTimeout(ctx, sessionCheckTimeout)
	defer cancel()
	defer func() {
		for _, q := range batch {
			close(q.done)
		}
	}()
	if len(batch) == 1 {
		q := batch[0]
		q.err = c.db.QueryRow(ctx, `
			SELECT u.roles, u.id IS NOT NULL,
			       EXISTS (SELECT 1 FROM refresh_tokens WHERE family_id = $2 AND revoked_at IS NOT NULL)
			FROM (SELECT 1) AS one LEFT JOIN users u ON u.id = $1`, q.user, q.session).Scan(&q.roles, &q.known, &q.revoked)
		return
	}
	users := make([]int64, len(batch))
	sessions := make([]uuid.UUID, len(batch))
	for i, q := range batch {
		users[i], sessions[i] = q.user, q.session
	}
	rows, err := c.db.Query(ctx, `
		SELECT q.i, u.roles, u.id IS NOT NULL,
		       EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = q.session AND r.revoked_at IS NOT NULL)
		FROM unnest($1::bigint[], $2::uuid[]) WITH ORDINALITY AS q(user_id, session, i)
		LEFT JOIN users u ON u.id = q.user_id`, users, sessions)
	if err == nil {
		defer rows.Close()
		answered := 0
		for rows.Next() {
			var i int64
			var roles []string
			var known, revoked bool
			if err = rows.Scan(&i, &roles, &known, &revoked); err != nil {
				break
			}
			q := batch[i-1]
			q.roles, q.known, q.revoked = roles, known, revoked
			answered++
		}
		if err == nil {
			err = rows.Err()
		}
		if err == nil && answered != len(batch) {
			err = errShortSessionLookup
		}
	}
	if err != nil {
		for _, q := range batch {
			q.err = err
		}
	}
}
