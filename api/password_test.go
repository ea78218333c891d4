package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"lectern/eventstore"
)

const passwordPath = "/user/me/password"

func changePassword(t testing.TB, e *env, access, current, next string) response {
	t.Helper()
	return e.do(t, "POST", passwordPath, map[string]string{"current_password": current, "new_password": next}, access)
}

// A password change: the new password logs in, the old one no longer does;
// the caller's session goes on and every other session ends; the history
// records the change and no secret.
func TestPasswordChange(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	other := login(t, e, u.Email, u.Password) // another session: another device
	wantStatus(t, other, http.StatusOK)
	var oldHash string
	if err := e.pool.QueryRow(context.Background(), `SELECT password_hash FROM credentials WHERE user_id = $1`, u.ID).Scan(&oldHash); err != nil {
		t.Fatal(err)
	}

	const next = "a new staple for the horse"
	res := changePassword(t, e, u.Access, u.Password, next)
	wantStatus(t, res, http.StatusNoContent)
	if len(res.Body) != 0 {
		t.Errorf("%s: a 204 with a body", res)
	}
	if res.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: no X-Event-Position", res)
	}

	wantDetail(t, login(t, e, u.Email, u.Password), http.StatusUnauthorized, "Incorrect email or password")
	wantStatus(t, login(t, e, u.Email, next), http.StatusOK)

	// The caller's session goes on: its access token and its refresh token.
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusOK)
	rotated := refresh(t, e, u.Refresh)
	wantStatus(t, rotated, http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, str(t, rotated, "access_token")), http.StatusOK)
	// The other session ends at once.
	wantDetail(t, e.do(t, "GET", "/user/me", nil, str(t, other, "access_token")), http.StatusUnauthorized, "Could not validate credentials")
	wantDetail(t, refresh(t, e, str(t, other, "refresh_token")), http.StatusUnauthorized, "Could not validate credentials")

	// The event: user.password_changed, no secret in it, as stored.
	var newHash string
	if err := e.pool.QueryRow(context.Background(), `SELECT password_hash FROM credentials WHERE user_id = $1`, u.ID).Scan(&newHash); err != nil {
		t.Fatal(err)
	}
	if newHash == oldHash || !strings.HasPrefix(newHash, "$argon2id$") {
		t.Errorf("credentials hold %q after the change (before: %q)", newHash, oldHash)
	}
	stream := fmt.Sprintf("user-%d", u.ID)
	evs := e.streamEvents(t, stream)
	last := evs[len(evs)-1]
	if last.Type != "user.password_changed" || string(last.Data) != fmt.Sprintf(`{"user_id":%d}`, u.ID) || last.Metadata.UserID != u.ID {
		t.Errorf("the last event of %s: %s %s %+v, want user.password_changed {\"user_id\":%d} by the user", stream, last.Type, last.Data, last.Metadata, u.ID)
	}
	raw, err := e.rawEvents(t).ReadStream(context.Background(), stream, eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range raw {
		for _, secret := range []string{oldHash, newHash, u.Password, next, "argon2", "password_hash"} {
			if strings.Contains(string(ev.Data), secret) || strings.Contains(fmt.Sprint(ev.Metadata), secret) {
				t.Errorf("stored event %s %s holds %q: %s", ev.Type, ev.ID, secret, ev.Data)
			}
		}
	}
}

func TestPasswordChangeRefusals(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	t.Run("no token", func(t *testing.T) {
		res := e.do(t, "POST", passwordPath, map[string]string{"current_password": u.Password, "new_password": "whatever it is"}, "")
		wantDetail(t, res, http.StatusUnauthorized, "Not authenticated")
		wantHeader(t, res, "WWW-Authenticate", "Bearer")
	})
	t.Run("a wrong current password", func(t *testing.T) {
		wantDetail(t, changePassword(t, e, u.Access, "not my password", "whatever it is"), http.StatusForbidden, "The password is not correct")
		wantStatus(t, login(t, e, u.Email, u.Password), http.StatusOK) // unchanged
		wantDetail(t, login(t, e, u.Email, "whatever it is"), http.StatusUnauthorized, "Incorrect email or password")
	})
	for _, tc := range []struct{ name, body, want string }{
		{"every field missing", `{}`, `{"detail":[` +
			`{"type":"missing","loc":["body","current_password"],"msg":"Field required","input":{}},` +
			`{"type":"missing","loc":["body","new_password"],"msg":"Field required","input":{}}]}`},
		{"a new password too short", `{"current_password":"x","new_password":"short"}`,
			`{"detail":[{"type":"string_too_short","loc":["body","new_password"],"msg":"String should have at least 8 characters","input":"short","ctx":{"min_length":8}}]}`},
		{"a new password too long", `{"current_password":"x","new_password":"` + strings.Repeat("p", 129) + `"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","new_password"],"msg":"String should have at most 128 characters","input":"` + strings.Repeat("p", 129) + `","ctx":{"max_length":128}}]}`},
		{"a current password too long", `{"current_password":"` + strings.Repeat("p", 129) + `","new_password":"long enough"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","current_password"],"msg":"String should have at most 128 characters","input":"` + strings.Repeat("p", 129) + `","ctx":{"max_length":128}}]}`},
		{"a number for a password", `{"current_password":12345678,"new_password":"long enough"}`,
			`{"detail":[{"type":"string_type","loc":["body","current_password"],"msg":"Input should be a valid string","input":12345678}]}`},
		{"not an object", `["x"]`,
			`{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":["x"]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantBody(t, e.do(t, "POST", passwordPath, tc.body, u.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
	if evs := e.streamEvents(t, fmt.Sprintf("user-%d", u.ID)); len(evs) != 1 {
		t.Errorf("refused changes appended %d events", len(evs)-1)
	}
}

// Guessing the current password through a stolen token is held to the
// login's limits: five failures, then 429 even with the right password.
func TestPasswordChangeRateLimit(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t).from(t)
	u := e.signUp(t)
	for i := 1; i <= 5; i++ {
		wantStatus(t, changePassword(t, e, u.Access, "a guess", "whatever it is"), http.StatusForbidden)
	}
	res := changePassword(t, e, u.Access, u.Password, "whatever it is")
	wantDetail(t, res, http.StatusTooManyRequests, "Too many failed attempts; try again later")
	if res.Header.Get("Retry-After") == "" {
		t.Errorf("%s: no Retry-After", res)
	}
	// The login shares the count.
	wantStatus(t, login(t, e, u.Email, u.Password), http.StatusTooManyRequests)
}
