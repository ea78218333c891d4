package api_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/auth"
	"lectern/eventstore"
	"lectern/poll"
)

// wrongCode is a 6-digit code that is not code.
func wrongCode(code string) string {
	return strconv.Itoa((int(code[0]-'0')+1)%10) + code[1:]
}

func TestSendCode(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	email := uniqueEmail()
	before := time.Now()
	res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": email}, "")
	wantStatus(t, res, http.StatusOK)
	if got := str(t, res, "email"); got != email {
		t.Errorf("email is %q, want %q", got, email)
	}
	if str(t, res, "verification_token") == "" {
		t.Error("verification_token is empty")
	}
	expires := timestamp(t, res, "expires_at")
	if lo, hi := before.Add(10*time.Minute-time.Second), time.Now().Add(10*time.Minute+time.Second); expires.Before(lo) || expires.After(hi) {
		t.Errorf("expires_at is %s, want 10 minutes from now (%s..%s)", expires, lo, hi)
	}
	if n := e.mail.count(email); n != 1 {
		t.Errorf("%d e-mails went to %s, want 1", n, email)
	}
	if code := e.mail.code(t, email); len(code) != 6 {
		t.Errorf("the e-mailed code is %q, want 6 digits", code)
	}
}

// A mail server out of reach is a 503 the caller can retry, not a 500, and
// its log line does not hold the address (the log outlives an erasure).
func TestSendCodeWhileTheMailServerIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{})
	e.mail.down.Store(true)
	email := uniqueEmail()
	res := e.doFailing(t, "POST", "/user/email/send-code", map[string]string{"email": email}, "")
	wantDetail(t, res, http.StatusServiceUnavailable, "The verification e-mail could not be sent; ask for a code again in a moment")
	wantHeader(t, res, "Retry-After", "1")
	if logged := strings.Join(e.logs.of(res.Header.Get("X-Request-ID")), "\n"); !strings.Contains(logged, "connection refused") ||
		strings.Contains(strings.ToLower(logged), strings.ToLower(email)) {
		t.Errorf("the request's log lines:\n%s", logged)
	}
	e.mail.down.Store(false)
	wantStatus(t, e.do(t, "POST", "/user/email/send-code", map[string]string{"email": email}, ""), http.StatusOK)
}

func TestSendCodeValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not an e-mail", `{"email":"not-an-email"}`,
			`{"detail":[{"type":"value_error","loc":["body","email"],"msg":"value is not a valid email address: An email address must have an @-sign.","input":"not-an-email","ctx":{"reason":"An email address must have an @-sign."}}]}`},
		{"nothing after the @-sign", `{"email":"ada@"}`,
			`{"detail":[{"type":"value_error","loc":["body","email"],"msg":"value is not a valid email address: There must be something after the @-sign.","input":"ada@","ctx":{"reason":"There must be something after the @-sign."}}]}`},
		{"missing, empty object", `{}`,
			`{"detail":[{"type":"missing","loc":["body","email"],"msg":"Field required","input":{}}]}`},
		{"missing, input is the body", `{"mail":"ada@example.com"}`,
			`{"detail":[{"type":"missing","loc":["body","email"],"msg":"Field required","input":{"mail":"ada@example.com"}}]}`},
		{"a number", `{"email":5}`,
			`{"detail":[{"type":"string_type","loc":["body","email"],"msg":"Input should be a valid string","input":5}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(t, "POST", "/user/email/send-code", tc.body, "")
			wantBody(t, res, http.StatusUnprocessableEntity, tc.want)
		})
	}
}

func TestSendCodeRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{now: newClock(time.Now()).Now})
	email := uniqueEmail()
	for i := 1; i <= 5; i++ {
		res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": email}, "")
		wantStatus(t, res, http.StatusOK)
	}
	res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": email}, "")
	wantDetail(t, res, http.StatusTooManyRequests, "Too many codes sent to this address; try again later")
	// A sliding window: the first code leaves it 15 minutes after it went.
	wantHeader(t, res, "Retry-After", "900")
	if n := e.mail.count(email); n != 5 {
		t.Errorf("%d e-mails went to %s, want 5", n, email)
	}
}

func TestVerifyCode(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	const badCode = `{"detail":"Invalid or expired verification code"}`
	verify := func(t *testing.T, email, code, token string) response {
		t.Helper()
		return e.do(t, "POST", "/user/email/verify-code", map[string]string{
			"email": email, "code": code, "verification_token": token,
		}, "")
	}

	t.Run("the e-mailed code", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		res := verify(t, email, code, token)
		wantStatus(t, res, http.StatusOK)
		if got := str(t, res, "email"); got != email {
			t.Errorf("email is %q, want %q", got, email)
		}
		if str(t, res, "email_verified_token") == "" {
			t.Error("email_verified_token is empty")
		}
	})
	t.Run("a wrong code", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		wantBody(t, verify(t, email, wrongCode(code), token), http.StatusBadRequest, badCode)
	})
	t.Run("a wrong verification token", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		_, code := e.sendCode(t, email)
		wantBody(t, verify(t, email, code, "not-the-token"), http.StatusBadRequest, badCode)
	})
	t.Run("another address's token and code", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		wantBody(t, verify(t, uniqueEmail(), code, token), http.StatusBadRequest, badCode)
	})
	t.Run("the fifth try may be right", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		for i := 1; i <= 4; i++ {
			wantBody(t, verify(t, email, wrongCode(code), token), http.StatusBadRequest, badCode)
		}
		wantStatus(t, verify(t, email, code, token), http.StatusOK)
	})
	t.Run("after five wrong tries the right code fails", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		for i := 1; i <= 5; i++ {
			wantBody(t, verify(t, email, wrongCode(code), token), http.StatusBadRequest, badCode)
		}
		res := verify(t, email, code, token)
		wantBody(t, res, http.StatusTooManyRequests, `{"detail":"Too many failed attempts; try again later"}`)
		if res.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After header", res)
		}
	})
	t.Run("a verified code does not verify again", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		wantStatus(t, verify(t, email, code, token), http.StatusOK)
		wantBody(t, verify(t, email, code, token), http.StatusBadRequest, badCode)
	})
	t.Run("racing verifications of one code: one wins", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		token, code := e.sendCode(t, email)
		won := 0
		for _, res := range concurrently(4, func(int) response { return verify(t, email, code, token) }) {
			if res.Status == http.StatusOK {
				won++
			}
		}
		if won != 1 {
			t.Errorf("%d of 4 racing verifications succeeded, want 1", won)
		}
	})
	t.Run("a dump of the codes does not reveal them", func(t *testing.T) {
		t.Parallel()
		email := uniqueEmail()
		_, code := e.sendCode(t, email)
		plain := sha256.Sum256([]byte(code))
		var stored string
		if err := e.pool.QueryRow(context.Background(), `SELECT code_hash FROM email_codes WHERE email = $1`, email).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored == hex.EncodeToString(plain[:]) || strings.Contains(stored, code) {
			t.Errorf("the stored code hash %s is the code's unkeyed SHA-256", stored)
		}
	})
	t.Run("missing fields", func(t *testing.T) {
		t.Parallel()
		res := e.do(t, "POST", "/user/email/verify-code", `{"code":"123456"}`, "")
		wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[`+
			`{"type":"missing","loc":["body","email"],"msg":"Field required","input":{"code":"123456"}},`+
			`{"type":"missing","loc":["body","verification_token"],"msg":"Field required","input":{"code":"123456"}}]}`)
	})
}

// A code allows five tries, whatever the failure counts: the right code
// from another address, which has no failures, still fails.
func TestVerifyCodeAllowsFiveTries(t *testing.T) {
	t.Parallel()
	windowEnd := time.Now().UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
	clk := newClock(windowEnd.Add(-10 * time.Second))
	e := newEnv(t, envConfig{now: clk.Now})
	email := uniqueEmail()
	token, code := e.sendCode(t, email)
	body := func(code string) map[string]string {
		return map[string]string{"email": email, "code": code, "verification_token": token}
	}
	for i := 1; i <= 5; i++ {
		res := e.do(t, "POST", "/user/email/verify-code", body(wrongCode(code)), "")
		wantStatus(t, res, http.StatusBadRequest)
	}
	// Past a quarter-hour's edge, where a fixed window started afresh, the
	// sliding one still holds the five failures.
	clk.Advance(20 * time.Second)
	res := e.do(t, "POST", "/user/email/verify-code", body(code), "")
	wantDetail(t, res, http.StatusTooManyRequests, "Too many failed attempts; try again later")
	wantHeader(t, res, "Retry-After", "880")
	res = e.from(t).do(t, "POST", "/user/email/verify-code", body(code), "")
	wantDetail(t, res, http.StatusBadRequest, "Invalid or expired verification code")
}

func TestVerifyCodeExpires(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now})

	fresh, stale := uniqueEmail(), uniqueEmail()
	freshToken, freshCode := e.sendCode(t, fresh)
	staleToken, staleCode := e.sendCode(t, stale)

	clk.Advance(10*time.Minute - time.Second)
	res := e.do(t, "POST", "/user/email/verify-code", map[string]string{
		"email": fresh, "code": freshCode, "verification_token": freshToken}, "")
	wantStatus(t, res, http.StatusOK)

	clk.Advance(2 * time.Second) // 10 minutes and a second after sending
	res = e.do(t, "POST", "/user/email/verify-code", map[string]string{
		"email": stale, "code": staleCode, "verification_token": staleToken}, "")
	wantDetail(t, res, http.StatusBadRequest, "Invalid or expired verification code")
}

func TestSignUp(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	email := uniqueEmail()
	verified := e.verifiedToken(t, email)
	res := e.do(t, "POST", "/user/signup", map[string]string{
		"email": email, "password": "correct horse battery", "name": "Grace Hopper", "email_verified_token": verified,
	}, "")
	wantStatus(t, res, http.StatusCreated)
	if res.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: no X-Event-Position header", res)
	}
	if got := str(t, res, "token_type"); got != "bearer" {
		t.Errorf("token_type is %q, want bearer", got)
	}
	if str(t, res, "access_token") == "" || str(t, res, "refresh_token") == "" {
		t.Errorf("%s: empty tokens", res)
	}
	created, ok := field(t, res, "user").(map[string]any)
	if !ok {
		t.Fatalf("%s: user is not an object", res)
	}
	userRes := response{Method: res.Method, Path: res.Path, JSON: created}
	id := num(t, userRes, "id")
	createdAt := timestamp(t, userRes, "created_at")
	if updatedAt := timestamp(t, userRes, "updated_at"); !updatedAt.Equal(createdAt) {
		t.Errorf("updated_at %s, want created_at %s", updatedAt, createdAt)
	}
	want := map[string]any{
		"id": json.Number(strconv.FormatInt(id, 10)), "email": email, "name": "Grace Hopper",
		"roles": []any{"user"}, "partner_ids": []any{},
		"created_at": created["created_at"], "updated_at": created["updated_at"],
	}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("user (-want +got):\n%s", diff)
	}

	// The new account is readable at once with the token sign-up returned.
	me := e.do(t, "GET", "/user/me", nil, str(t, res, "access_token"))
	wantStatus(t, me, http.StatusOK)
	if diff := cmp.Diff(created, me.JSON); diff != "" {
		t.Errorf("GET /user/me after sign-up (-signup +me):\n%s", diff)
	}

	t.Run("the same e-mail again", func(t *testing.T) {
		res := e.do(t, "POST", "/user/signup", map[string]string{
			"email": email, "password": "another password", "name": "Grace", "email_verified_token": e.verifiedToken(t, email),
		}, "")
		wantDetail(t, res, http.StatusConflict, "Email already registered")
	})
}

func TestSignUpErrors(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	const badToken = "Invalid or expired email_verified_token for this email"

	t.Run("a token for another e-mail", func(t *testing.T) {
		t.Parallel()
		verified := e.verifiedToken(t, uniqueEmail())
		res := e.do(t, "POST", "/user/signup", map[string]string{
			"email": uniqueEmail(), "password": "correct horse battery", "name": "Eve", "email_verified_token": verified,
		}, "")
		wantDetail(t, res, http.StatusBadRequest, badToken)
	})
	t.Run("a forged token", func(t *testing.T) {
		t.Parallel()
		res := e.do(t, "POST", "/user/signup", map[string]string{
			"email": uniqueEmail(), "password": "correct horse battery", "name": "Eve", "email_verified_token": "forged",
		}, "")
		wantDetail(t, res, http.StatusBadRequest, badToken)
	})
	t.Run("a password too short", func(t *testing.T) {
		t.Parallel()
		res := e.do(t, "POST", "/user/signup", `{"email":"ada@example.com","password":"short","name":"Ada","email_verified_token":"x"}`, "")
		wantBody(t, res, http.StatusUnprocessableEntity,
			`{"detail":[{"type":"string_too_short","loc":["body","password"],"msg":"String should have at least 8 characters","input":"short","ctx":{"min_length":8}}]}`)
	})
	t.Run("every field missing", func(t *testing.T) {
		t.Parallel()
		res := e.do(t, "POST", "/user/signup", `{}`, "")
		wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[`+
			`{"type":"missing","loc":["body","email"],"msg":"Field required","input":{}},`+
			`{"type":"missing","loc":["body","password"],"msg":"Field required","input":{}},`+
			`{"type":"missing","loc":["body","name"],"msg":"Field required","input":{}},`+
			`{"type":"missing","loc":["body","email_verified_token"],"msg":"Field required","input":{}}]}`)
	})
}

// The e-mail-verified token lives 30 minutes.
func TestSignUpVerifiedTokenExpires(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now})
	email := uniqueEmail()
	verified := e.verifiedToken(t, email)
	clk.Advance(30*time.Minute + time.Second)
	res := e.do(t, "POST", "/user/signup", map[string]string{
		"email": email, "password": "correct horse battery", "name": "Ada", "email_verified_token": verified,
	}, "")
	wantDetail(t, res, http.StatusBadRequest, "Invalid or expired email_verified_token for this email")
}

func TestAdminEmails(t *testing.T) {
	t.Parallel()
	admin := uniqueEmail()
	e := newEnv(t, envConfig{adminEmails: []string{" " + strings.ToUpper(admin) + " "}})

	for _, tc := range []struct {
		email string
		roles []any
	}{
		{admin, []any{"user", "admin"}},
		{uniqueEmail(), []any{"user"}},
	} {
		verified := e.verifiedToken(t, tc.email)
		res := e.do(t, "POST", "/user/signup", map[string]string{
			"email": tc.email, "password": "correct horse battery", "name": "Root", "email_verified_token": verified,
		}, "")
		wantStatus(t, res, http.StatusCreated)
		created := field(t, res, "user").(map[string]any)
		if diff := cmp.Diff(tc.roles, created["roles"]); diff != "" {
			t.Errorf("%s: sign-up roles (-want +got):\n%s", tc.email, diff)
		}
		me := e.do(t, "GET", "/user/me", nil, str(t, res, "access_token"))
		wantStatus(t, me, http.StatusOK)
		if diff := cmp.Diff(tc.roles, field(t, me, "roles")); diff != "" {
			t.Errorf("%s: GET /user/me roles (-want +got):\n%s", tc.email, diff)
		}
	}
}

func login(t testing.TB, e *env, email, password string) response {
	t.Helper()
	return e.do(t, "POST", "/user/login", map[string]string{"email": email, "password": password}, "")
}

func TestLogin(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	res := login(t, e, u.Email, u.Password)
	wantStatus(t, res, http.StatusOK)
	if got := str(t, res, "token_type"); got != "bearer" {
		t.Errorf("token_type is %q, want bearer", got)
	}
	if str(t, res, "refresh_token") == u.Refresh {
		t.Error("login returned sign-up's refresh token")
	}
	me := e.do(t, "GET", "/user/me", nil, str(t, res, "access_token"))
	wantStatus(t, me, http.StatusOK)
	if got := num(t, me, "id"); got != u.ID {
		t.Errorf("GET /user/me with the login's token: id %d, want %d", got, u.ID)
	}

	t.Run("the e-mail in another case", func(t *testing.T) {
		wantStatus(t, login(t, e, strings.ToUpper(u.Email), u.Password), http.StatusOK)
	})
	t.Run("a wrong password", func(t *testing.T) {
		wantDetail(t, login(t, e, u.Email, "wrong password"), http.StatusUnauthorized, "Incorrect email or password")
	})
	t.Run("an unknown e-mail", func(t *testing.T) {
		wantDetail(t, login(t, e, uniqueEmail(), u.Password), http.StatusUnauthorized, "Incorrect email or password")
	})
	t.Run("a missing password", func(t *testing.T) {
		res := e.do(t, "POST", "/user/login", `{"email":"ada@example.com"}`, "")
		wantBody(t, res, http.StatusUnprocessableEntity,
			`{"detail":[{"type":"missing","loc":["body","password"],"msg":"Field required","input":{"email":"ada@example.com"}}]}`)
	})
}

// A flood of logins from many addresses gets past every per-client limit:
// the password checks (19 MiB each while they run) are then admitted a few
// at a time, and one that waits too long for its turn is a 503 to retry,
// the same for a known and an unknown e-mail. Not parallel: it takes every
// slot of the test binary.
func TestPasswordChecksBusy(t *testing.T) {
	e := sharedEnv(t)
	u := e.signUp(t)
	const busy = "Too many passwords are being checked at once; retry in a moment"
	auth.BusyArgonInTests(t, 20*time.Millisecond)
	for _, email := range []string{u.Email, uniqueEmail()} {
		res := e.doFailing(t, "POST", "/user/login", map[string]string{"email": email, "password": u.Password}, "")
		wantDetail(t, res, http.StatusServiceUnavailable, busy)
		wantHeader(t, res, "Retry-After", "1")
	}
	res := e.doFailing(t, "POST", "/user/me/password", map[string]string{"current_password": u.Password, "new_password": "another long password"}, u.Access)
	wantDetail(t, res, http.StatusServiceUnavailable, busy)
	wantHeader(t, res, "Retry-After", "1")
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now})
	const tooMany = "Too many failed attempts; try again later"

	t.Run("five failures, then 429 even with the right password", func(t *testing.T) {
		u := e.signUp(t)
		for i := 1; i <= 5; i++ {
			wantDetail(t, login(t, e, u.Email, "wrong password"), http.StatusUnauthorized, "Incorrect email or password")
		}
		res := login(t, e, u.Email, u.Password)
		wantDetail(t, res, http.StatusTooManyRequests, tooMany)
		wantHeader(t, res, "Retry-After", "900") // when the first failure leaves the sliding window
	})
	t.Run("a successful login is not a failure", func(t *testing.T) {
		u := e.signUp(t)
		for i := 1; i <= 4; i++ {
			wantStatus(t, login(t, e, u.Email, "wrong password"), http.StatusUnauthorized)
		}
		wantStatus(t, login(t, e, u.Email, u.Password), http.StatusOK)
		// Fifth failure: still a 401, since the success did not count.
		wantDetail(t, login(t, e, u.Email, "wrong password"), http.StatusUnauthorized, "Incorrect email or password")
		wantDetail(t, login(t, e, u.Email, u.Password), http.StatusTooManyRequests, tooMany)
	})
	t.Run("the limit lifts when the window passes", func(t *testing.T) {
		u := e.signUp(t)
		for i := 1; i <= 5; i++ {
			wantStatus(t, login(t, e, u.Email, "wrong password"), http.StatusUnauthorized)
		}
		wantStatus(t, login(t, e, u.Email, u.Password), http.StatusTooManyRequests)
		// Subtests run in order, so moving the clock is safe here.
		clk.Advance(15 * time.Minute)
		wantStatus(t, login(t, e, u.Email, u.Password), http.StatusOK)
	})
}

func refresh(t testing.TB, e *env, token string) response {
	t.Helper()
	return e.do(t, "POST", "/user/token/refresh", map[string]string{"refresh_token": token}, "")
}

func TestRefreshRotates(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	res := refresh(t, e, u.Refresh)
	wantStatus(t, res, http.StatusOK)
	if got := str(t, res, "token_type"); got != "bearer" {
		t.Errorf("token_type is %q, want bearer", got)
	}
	rotated := str(t, res, "refresh_token")
	if rotated == u.Refresh {
		t.Fatal("refresh returned the same refresh token")
	}
	wantStatus(t, e.do(t, "GET", "/user/me", nil, str(t, res, "access_token")), http.StatusOK)

	// Reusing the old token means it leaked: it fails, and so does the family.
	wantDetail(t, refresh(t, e, u.Refresh), http.StatusUnauthorized, "Could not validate credentials")
	wantDetail(t, refresh(t, e, rotated), http.StatusUnauthorized, "Could not validate credentials")

	t.Run("an unknown token", func(t *testing.T) {
		wantDetail(t, refresh(t, e, "no-such-token"), http.StatusUnauthorized, "Could not validate credentials")
	})
}

// A revocation racing a rotation revokes the rotated token but cannot see
// the one the rotation inserts as it commits. The family then holds a
// revoked token, and that stops it: the new token rotates no more (and is
// revoked in turn), and the family's access tokens are refused.
func TestARevokedFamilyRotatesNoMore(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	res := refresh(t, e, u.Refresh)
	wantStatus(t, res, http.StatusOK)
	next, access := str(t, res, "refresh_token"), str(t, res, "access_token")
	// What the race leaves: the first token revoked, the second not.
	if _, err := e.pool.Exec(context.Background(), `UPDATE refresh_tokens SET revoked_at = now() WHERE token_hash = $1`,
		auth.HashSecret(u.Refresh)); err != nil {
		t.Fatal(err)
	}
	wantDetail(t, e.do(t, "GET", "/user/me", nil, access), http.StatusUnauthorized, "Could not validate credentials")
	wantDetail(t, refresh(t, e, next), http.StatusUnauthorized, "Could not validate credentials")
	var revoked bool
	if err := e.pool.QueryRow(context.Background(), `SELECT revoked_at IS NOT NULL FROM refresh_tokens WHERE token_hash = $1`,
		auth.HashSecret(next)).Scan(&revoked); err != nil {
		t.Fatal(err)
	}
	if !revoked {
		t.Error("the family's last token is still open after a refresh was refused for its family")
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	other := str(t, login(t, e, u.Email, u.Password), "refresh_token")

	res := e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, "")
	wantStatus(t, res, http.StatusNoContent)
	if len(res.Body) != 0 {
		t.Errorf("%s: a 204 with a body", res)
	}
	wantDetail(t, refresh(t, e, u.Refresh), http.StatusUnauthorized, "Could not validate credentials")
	// Another session (another login) is not logged out.
	wantStatus(t, refresh(t, e, other), http.StatusOK)
	// Logging out an unknown token is not an error.
	wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": "no-such-token"}, ""), http.StatusNoContent)
}

func TestTokensExpire(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now})
	u := e.signUp(t)

	clk.Advance(15*time.Minute + time.Second)
	res := e.do(t, "GET", "/user/me", nil, u.Access)
	wantDetail(t, res, http.StatusUnauthorized, "Could not validate credentials")
	wantHeader(t, res, "WWW-Authenticate", "Bearer")
	// The refresh token still works...
	res = refresh(t, e, u.Refresh)
	wantStatus(t, res, http.StatusOK)
	// ...for 14 days.
	clk.Advance(14*24*time.Hour + time.Second)
	wantDetail(t, refresh(t, e, str(t, res, "refresh_token")), http.StatusUnauthorized, "Could not validate credentials")
}

// jwtPart is one base64url part of a hand-made token.
func jwtPart(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestMe(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	res := e.do(t, "GET", "/user/me", nil, u.Access)
	wantStatus(t, res, http.StatusOK)
	want := map[string]any{
		"id": json.Number(strconv.FormatInt(u.ID, 10)), "email": u.Email, "name": u.Name,
		"roles": []any{"user"}, "partner_ids": []any{},
		"created_at": field(t, res, "created_at"), "updated_at": field(t, res, "updated_at"),
	}
	if diff := cmp.Diff(want, res.JSON); diff != "" {
		t.Errorf("GET /user/me (-want +got):\n%s", diff)
	}
	timestamp(t, res, "created_at")
	timestamp(t, res, "updated_at")

	otherKey := make([]byte, 32)
	if _, err := rand.Read(otherKey); err != nil {
		t.Fatal(err)
	}
	foreign, err := auth.NewTokens(otherKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	foreignToken, _, err := foreign.IssueAccess(u.ID, []string{"user", "admin"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := auth.NewTokens(e.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	ghostToken, _, err := own.IssueSessionAccess(1<<40, []string{"user"}, uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	unsigned := jwtPart(t, map[string]string{"alg": "none", "typ": "JWT"}) + "." + jwtPart(t, map[string]any{
		"iss": "lectern", "sub": strconv.FormatInt(u.ID, 10), "aud": []string{"access"},
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
	}) + "."

	for _, tc := range []struct {
		name, authorization, detail string
	}{
		{"no header", "", "Not authenticated"},
		{"a bearer with no token", "Bearer ", "Not authenticated"},
		{"garbage", "Bearer garbage", "Could not validate credentials"},
		{"signed with another key", "Bearer " + foreignToken, "Could not validate credentials"},
		{"a user that does not exist", "Bearer " + ghostToken, "Could not validate credentials"},
		{"an unsigned token", "Bearer " + unsigned, "Could not validate credentials"},
		{"an e-mail-verified token", "Bearer " + e.verifiedToken(t, uniqueEmail()), "Could not validate credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.authorization != "" {
				headers = []string{"Authorization", tc.authorization}
			}
			res := e.do(t, "GET", "/user/me", nil, "", headers...)
			wantDetail(t, res, http.StatusUnauthorized, tc.detail)
			wantHeader(t, res, "WWW-Authenticate", "Bearer")
		})
	}
}

// Access tokens end with their session: a logout, or a refresh token's
// reuse, refuses them at once, not when they expire.
func TestAccessTokensEndWithTheirSession(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	const refused = `{"detail":"Could not validate credentials"}`

	t.Run("logout", func(t *testing.T) {
		t.Parallel()
		u := e.signUp(t)
		wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusOK)
		wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, ""), http.StatusNoContent)
		res := e.do(t, "GET", "/user/me", nil, u.Access)
		wantBody(t, res, http.StatusUnauthorized, refused)
		wantHeader(t, res, "WWW-Authenticate", "Bearer")
		// Another session of the same user is not touched.
		res = e.do(t, "POST", "/user/login", map[string]string{"email": u.Email, "password": u.Password}, "")
		wantStatus(t, res, http.StatusOK)
		wantStatus(t, e.do(t, "GET", "/user/me", nil, str(t, res, "access_token")), http.StatusOK)
	})
	t.Run("a reused refresh token", func(t *testing.T) {
		t.Parallel()
		u := e.signUp(t)
		res := e.do(t, "POST", "/user/token/refresh", map[string]string{"refresh_token": u.Refresh}, "")
		wantStatus(t, res, http.StatusOK)
		rotated := str(t, res, "access_token")
		wantStatus(t, e.do(t, "GET", "/user/me", nil, rotated), http.StatusOK)
		// The first refresh token again: it leaked, the family is revoked.
		wantStatus(t, e.do(t, "POST", "/user/token/refresh", map[string]string{"refresh_token": u.Refresh}, ""), http.StatusUnauthorized)
		wantBody(t, e.do(t, "GET", "/user/me", nil, rotated), http.StatusUnauthorized, refused)
		wantBody(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized, refused)
	})
	t.Run("roles are the user's, not the token's", func(t *testing.T) {
		t.Parallel()
		u := e.signUp(t)
		own, err := auth.NewTokens(e.key, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A token that claims a role the user no longer (or never) had.
		claimsAdmin, _, err := own.IssueSessionAccess(u.ID, []string{"user", "admin"}, uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, e.do(t, "GET", "/admin/organizations", nil, claimsAdmin), http.StatusForbidden)
		// And the other way round: a real admin's token that claims no role.
		admin := asAdmin(t, e)
		claimsNothing, _, err := own.IssueSessionAccess(admin.ID, nil, uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, e.do(t, "GET", "/admin/organizations", nil, claimsNothing), http.StatusOK)
	})
	t.Run("a logout through another process", func(t *testing.T) {
		t.Parallel()
		u := e.signUp(t)
		wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusOK) // remembered now
		// Another replica's logout: the revocation reaches this process as
		// the database's announcement, not through its own handler.
		if _, err := e.pool.Exec(context.Background(), `UPDATE refresh_tokens SET revoked_at = now()
			WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE user_id = $1 LIMIT 1)`, u.ID); err != nil {
			t.Fatal(err)
		}
		poll.Must(t, 5*time.Second, "the access token is refused once its session is revoked elsewhere", func() bool {
			return e.send(t, "GET", "/user/me", nil, u.Access).Status == http.StatusUnauthorized
		})
	})
	t.Run("a token without a session", func(t *testing.T) {
		t.Parallel()
		u := e.signUp(t)
		own, err := auth.NewTokens(e.key, nil)
		if err != nil {
			t.Fatal(err)
		}
		bare, _, err := own.IssueAccess(u.ID, []string{"user"})
		if err != nil {
			t.Fatal(err)
		}
		wantBody(t, e.do(t, "GET", "/user/me", nil, bare), http.StatusUnauthorized, refused)
	})
}

// An account created before password hashes left the events (its
// user.signed_up at version 1 holds the hash, and the migration could not
// copy it: on EventStoreDB it was not projected yet) logs in: the hash is
// taken from its event, once, into the credentials.
func TestLoginOfAnAccountFromBeforeTheCredentials(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	var id int64
	if err := e.pool.QueryRow(ctx, `SELECT nextval('user_ids')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	email := fmt.Sprintf("legacy-%d@example.com", id)
	hash, err := auth.HashPassword(context.Background(), "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprintf("user-%d", id)
	data, _ := json.Marshal(map[string]any{"user_id": id, "email": email, "name": "Legacy", "password_hash": hash, "roles": []string{"user"}})
	if _, err := e.pool.Exec(ctx, `INSERT INTO unique_claims (scope, key, owner) VALUES ('user_email', $1, $2)`, email, stream); err != nil {
		t.Fatal(err)
	}
	if _, err := e.events(t).Append(ctx, stream, eventstore.NoStream, []eventstore.EventData{{
		ID: uuid.New(), Type: "user.signed_up", SchemaVersion: 1, Data: data, RecordedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}

	login := func(password string) response {
		return e.do(t, "POST", "/user/login", map[string]string{"email": email, "password": password}, "")
	}
	wantStatus(t, login("wrong horse"), http.StatusUnauthorized)
	wantStatus(t, login("correct horse"), http.StatusOK)
	var stored string
	if err := e.pool.QueryRow(ctx, `SELECT password_hash FROM credentials WHERE user_id = $1`, id).Scan(&stored); err != nil || stored != hash {
		t.Errorf("credentials after the login: %q, %v", stored, err)
	}
}

// A sign-up's password hash is in the credentials, not in its event.
func TestSignUpKeepsThePasswordOutOfTheEvent(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM credentials WHERE user_id = $1 AND password_hash LIKE '$argon2id$%'`,
		u.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("credentials of user %d: %d rows, %v", u.ID, n, err)
	}
	evs := e.streamEvents(t, fmt.Sprintf("user-%d", u.ID))
	if len(evs) != 1 || evs[0].SchemaVersion != 2 || strings.Contains(string(evs[0].Data), "password") || strings.Contains(string(evs[0].Data), "argon2") {
		t.Errorf("the sign-up event: %+v", evs)
	}
}
