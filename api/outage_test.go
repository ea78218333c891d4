package api_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/pgtest"
)

// PostgreSQL out of reach is a 503 with Retry-After, the contract's shape,
// not a 500: reads, writes and the session check alike; and the service
// serves again once it is back.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var down atomic.Bool
	cfg := pgtest.Pool(t).Config() // a copy: the package's database
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := newEnv(t, envConfig{pool: pool})
	u := e.signUp(t)
	agent := map[string]any{"name": "Tutor", "system_prompt": "Be kind."}
	wantStatus(t, e.do(t, "POST", "/agents", agent, u.Access), http.StatusCreated)

	down.Store(true)
	pool.Reset() // the idle connections go; new ones are refused
	const detail = "The database is unavailable; retry in a moment (a write with the same Idempotency-Key)"
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/agents", nil},
		{"POST", "/agents", agent},
		{"GET", "/user/me", nil},
	} {
		res := e.doFailing(t, req.method, req.path, req.body, u.Access)
		wantDetail(t, res, http.StatusServiceUnavailable, detail)
		wantHeader(t, res, "Retry-After", "1")
	}
	res := e.doFailing(t, "POST", "/user/login", map[string]any{"email": u.Email, "password": u.Password}, "")
	wantDetail(t, res, http.StatusServiceUnavailable, detail)

	down.Store(false)
	wantStatus(t, e.do(t, "GET", "/agents", nil, u.Access), http.StatusOK)
}

// A write that the database stalls (a lock held, a commit that does not
// return) ends at its bound with a 503, instead of holding its request and
// connection for as long as the stall lasts; its Idempotency-Key keeps what
// it may have written, and the retry after the stall is applied once.
func TestStalledWriteIs503(t *testing.T) {
	t.Parallel()
	if eventStoreURL(t) != "" {
		t.Skip("the stall is a lock on PostgreSQL's events table: not on the EventStoreDB pass")
	}
	ctx := context.Background()
	pool := pgtest.Fresh(t) // the lock stalls no other test
	e := newEnv(t, envConfig{pool: pool, writeWait: time.Second})
	u := e.signUp(t)
	key := uuid.NewString()
	agent := map[string]any{"name": "Tutor", "system_prompt": "Be kind."}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE events IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	res := e.doFailing(t, "POST", "/agents", agent, u.Access, "Idempotency-Key", key)
	wantStatus(t, res, http.StatusServiceUnavailable)
	wantHeader(t, res, "Retry-After", "1")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	created := e.do(t, "POST", "/agents", agent, u.Access, "Idempotency-Key", key)
	wantStatus(t, created, http.StatusCreated)
	wantBody(t, e.do(t, "POST", "/agents", agent, u.Access, "Idempotency-Key", key), http.StatusCreated, string(created.Body))
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE event_type = 'agent.created'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d agents recorded (%v), want 1", n, err)
	}
}
