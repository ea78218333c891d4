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
// server pays one statement per request. While the process holds a session
// lease (package authlease), answers are remembered under the lease's
// generation: no revocation or role change commits while a lease taken
// before it is held, and a lease taken after one starts another
// generation. So an answer remembered under the current generation is still
// the database's, on every replica, and a logout or a role change committed
// before a request counts for it.
type sessionChecks struct {
	db *pgxpool.Pool
	// lookups counts the statements issued, for tests.
	lookups    atomic.Int64
	lease      SessionLease // nil: remember nothing
	remembered rememberedChecks

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

// SessionLease tells whether the process holds a lease under which session
// checks may be answered from memory, and its generation (authlease.Lease):
// what was read under a generation holds while it is current.
type SessionLease interface {
	Current() (generation int64, ok bool)
}

// check looks up user's roles and whether session was revoked: from memory
// while a lease is held, else in the database.
func (c *sessionChecks) check(ctx context.Context, user int64, session uuid.UUID) (*sessionCheck, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.lease == nil {
		return c.lookUp(ctx, user, session)
	}
	generation, leased := c.lease.Current()
	if leased {
		if q, ok := c.remembered.get(user, session, generation); ok {
			return q, nil
		}
	}
	q, err := c.lookUp(ctx, user, session)
	if err == nil && leased && q.known {
		// Read after a lease of generation was taken: true for as long as
		// the generation lasts (a user the read model does not hold yet is
		// asked about again).
		c.remembered.put(user, session, generation, q)
	}
	return q, err
}

// lookUp asks the database, in a lookup shared with the requests that
// arrive meanwhile.
func (c *sessionChecks) lookUp(ctx context.Context, user int64, session uuid.UUID) (*sessionCheck, error) {
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

// rememberedChecks are the answers read under one lease generation.
type rememberedChecks struct {
	mu         sync.RWMutex
	generation int64
	answers    map[sessionKey]*sessionCheck
}

type sessionKey struct {
	user    int64
	session uuid.UUID
}

// maxRemembered bounds the answers kept; when full, they are forgotten.
const maxRemembered = 100_000

func (r *rememberedChecks) get(user int64, session uuid.UUID, generation int64) (*sessionCheck, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.generation != generation {
		return nil, false
	}
	q, ok := r.answers[sessionKey{user, session}]
	return q, ok
}

// put remembers q, read under generation. An answer of an older
// generation than the remembered ones is dropped; a newer one forgets them.
func (r *rememberedChecks) put(user int64, session uuid.UUID, generation int64, q *sessionCheck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case generation < r.generation:
		return
	case generation > r.generation || r.answers == nil || len(r.answers) >= maxRemembered:
		r.generation, r.answers = generation, map[sessionKey]*sessionCheck{}
	}
	r.answers[sessionKey{user, session}] = q
}
