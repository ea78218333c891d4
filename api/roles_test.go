package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"lectern/pgtest"
	"lectern/projections"
	"lectern/service"
)

// A role granted, or a session ended, on a session the servers have already
// served counts from the very next request: on the replica that answered the
// write, and on another one. Nothing here polls after the change: a write
// answers once its read models hold it, and the next request must see it.
//
// Withdrawing a role is not covered: the API has no operation that takes one
// away (no role revocation event, no partner deactivation). Erasing an
// account ends its sessions, which is covered.
func TestRoleChangesCountFromTheNextRequest(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	other := replicaOf(t, e)
	admin := asAdmin(t, e)
	replicas := map[string]*env{"this replica": e, "another replica": other}
	replicaNames := []string{"this replica", "another replica"}
	// served makes a request on both replicas with u's token, so that
	// whatever either remembers of the session is warm.
	served := func(t *testing.T, access string) {
		t.Helper()
		for _, s := range []*env{e, other} {
			wantStatus(t, s.do(t, "GET", "/user/me", nil, access), http.StatusOK)
		}
	}

	t.Run("a promotion approved", func(t *testing.T) {
		t.Parallel()
		u := e.signUp(t)
		served(t, u.Access)
		res := e.do(t, "POST", "/user/partner-promotion-requests",
			map[string]any{"name": "Ada", "email": u.Email, "org_name": "Roles " + uniqueEmail()}, u.Access)
		wantStatus(t, res, http.StatusCreated)
		approved := e.do(t, "POST", fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", num(t, res, "request_id")),
			map[string]any{"organization": "new"}, admin.Access)
		wantStatus(t, approved, http.StatusOK)
		classes := fmt.Sprintf("/partner/%d/classes", num(t, approved, "partner_id"))
		for name, s := range replicas {
			wantStatus(t, s.do(t, "GET", classes, nil, u.Access), http.StatusOK)
			if roles, _ := field(t, s.do(t, "GET", "/user/me", nil, u.Access), "roles").([]any); !slices.Contains(roles, any("partner")) {
				t.Errorf("%s: roles after the approval are %v, want partner among them", name, roles)
			}
		}
	})

	// Admin is the role authorisation reads from the caller's roles (the
	// partner routes read the partner record): granted as `lectern users
	// create --admin` grants it to an existing account, it counts from the
	// next request once its read model holds it, which is what a write's
	// answer waits for.
	for i, name := range repeated(replicaNames) {
		next := replicas[name]
		t.Run(fmt.Sprintf("admin granted, next request on %s #%d", name, i/len(replicaNames)), func(t *testing.T) {
			t.Parallel()
			u := e.signUp(t)
			served(t, u.Access)
			wantStatus(t, next.do(t, "GET", "/admin/organizations", nil, u.Access), http.StatusForbidden)
			_, granted, err := e.svc.Identity.GrantRole(context.Background(), u.ID, "admin")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), pgtest.ConsistencyWait)
			defer cancel()
			if err := e.svc.Listener.WaitFor(ctx, granted.Position, projections.UsersProjection); err != nil {
				t.Fatalf("the users read model: %v", err)
			}
			wantStatus(t, next.do(t, "GET", "/admin/organizations", nil, u.Access), http.StatusOK)
		})
	}

	for i, name := range repeated(replicaNames) {
		next := replicas[name]
		t.Run(fmt.Sprintf("logged out, next request on %s #%d", name, i/len(replicaNames)), func(t *testing.T) {
			t.Parallel()
			u := e.signUp(t)
			served(t, u.Access)
			wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, ""), http.StatusNoContent)
			wantStatus(t, next.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized)
		})
		t.Run(fmt.Sprintf("erased, next request on %s #%d", name, i/len(replicaNames)), func(t *testing.T) {
			t.Parallel()
			u := e.signUp(t)
			served(t, u.Access)
			wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, admin.Access), http.StatusNoContent)
			wantStatus(t, next.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized)
		})
	}
}

// repeats is how many times each change is tried: a server that learns of a
// change a moment after answering the next request shows it in some tries
// only, and each one is a chance to catch it.
const repeats = 5

// repeated is names, each repeats times.
func repeated(names []string) []string {
	var out []string
	for range repeats {
		out = append(out, names...)
	}
	return out
}

// replicaOf starts another HTTP tier on e's database, signing with e's key
// so that e's tokens are good on it: another replica of the same service.
// e's projections serve its reads.
func replicaOf(t testing.TB, e *env) *env {
	t.Helper()
	r := &env{pool: e.pool, mail: &mailbox{}, logs: &logLines{}, key: e.key}
	svc, err := service.New(service.Config{
		Pool: r.pool, JWTKey: r.key, DataKey: dataKey, Mail: r.mail, AddressLimit: 100000, EventStoreURL: eventStoreURL(t),
		Logger:          slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ConsistencyWait: pgtest.ConsistencyWait,
	})
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	r.svc = svc
	stopBackground := svc.RunBackground(context.Background(), false)
	r.srv = httptest.NewServer(svc.Handler)
	r.stop = func() {
		r.srv.Close()
		stopBackground()
	}
	t.Cleanup(r.stop)
	if r.doc, err = loadDoc(r.srv.URL); err != nil {
		t.Fatalf("loading the OpenAPI document: %v", err)
	}
	return r
}
