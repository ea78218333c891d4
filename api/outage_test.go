package api_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"

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
