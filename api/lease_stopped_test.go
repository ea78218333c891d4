package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"lectern/poll"
)

// A replica that stops while it holds its session lease (its process
// frozen, its connection idle in the lease's transaction) holds a logout on
// another replica up briefly, not for good: the logout answers 204, the
// stopped replica's connection is ended, and the token is refused. Not
// parallel: the stopped lease holds up every change of the package's
// database until it is ended.
func TestALogoutOutlastsAStoppedReplica(t *testing.T) {
	e := sharedEnv(t)
	ctx := context.Background()
	u := e.signUp(t)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusOK)

	// The stopped replica: it took the lease as a live one does, then
	// nothing more.
	stopped := leaseHolder(t, e)

	start := time.Now()
	wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, ""), http.StatusNoContent)
	t.Logf("the logout answered after %v", time.Since(start))
	wantBody(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized, `{"detail":"Could not validate credentials"}`)
	if err := stopped.Ping(ctx); err == nil {
		t.Error("the stopped replica's connection, and its lease, outlived the logout")
	}
}

// A lease held by a process that runs (a statement in flight, not idle)
// is not ended: a logout gives up after 10 s with 503 and Retry-After,
// having changed nothing, and succeeds once the lease is given up. Not
// parallel, as above.
func TestALogoutThatCannotEndALeaseAnswers503(t *testing.T) {
	e := sharedEnv(t)
	ctx := context.Background()
	u := e.signUp(t)

	busy := leaseHolder(t, e)
	sleeping, stop := context.WithCancel(ctx)
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		_, _ = busy.Exec(sleeping, `SELECT pg_sleep(60)`) // active, holding the lease
	}()
	t.Cleanup(func() { stop(); <-slept })
	poll.Must(t, 10*time.Second, "the lease holder running its statement", func() bool {
		var n int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = 'SELECT pg_sleep(60)'`).Scan(&n)
		return n == 1
	})

	res := e.doFailing(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, "")
	wantBody(t, res, http.StatusServiceUnavailable, `{"detail":"The change could not take a lock it needs in time; retry in a moment"}`)
	wantHeader(t, res, "Retry-After", "1")
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusOK) // nothing was revoked

	stop()
	<-slept
	wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, ""), http.StatusNoContent)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized)
}

// leaseHolder takes the session lease on a connection of its own, as a
// replica does (authlease), and leaves its transaction open.
func leaseHolder(t *testing.T, e *env) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	for _, sql := range []string{`BEGIN`, `LOCK TABLE auth_lease IN ROW EXCLUSIVE MODE`, `SELECT last_value FROM auth_epoch`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return conn
}
