package api_test

// A review of the account flows as an attacker and a confused user would use
// them, over HTTP.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"lectern/poll"
)

// E-mails are one address whatever their case and surrounding spaces: the
// code, the sign-up, a second sign-up and the login all meet the same account.
func TestEmailCaseAndSpaces(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	email := uniqueEmail()
	shouted := "  " + strings.ToUpper(email) + " "

	res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": shouted}, "")
	wantStatus(t, res, http.StatusOK)
	if got := str(t, res, "email"); got != email {
		t.Errorf("send-code answered email %q, want %q", got, email)
	}
	token, code := str(t, res, "verification_token"), e.mail.code(t, email)
	res = e.do(t, "POST", "/user/email/verify-code", map[string]string{"email": strings.ToUpper(email), "code": code, "verification_token": token}, "")
	wantStatus(t, res, http.StatusOK)
	verified := str(t, res, "email_verified_token")
	res = e.do(t, "POST", "/user/signup", map[string]string{
		"email": " " + email, "password": "correct horse battery", "name": "Ada", "email_verified_token": verified}, "")
	wantStatus(t, res, http.StatusCreated)
	if got := field(t, res, "user").(map[string]any)["email"]; got != email {
		t.Errorf("sign-up stored %q, want %q", got, email)
	}
	// A second account for the same address in other letters: 409.
	res = e.do(t, "POST", "/user/signup", map[string]string{
		"email": strings.ToUpper(email), "password": "correct horse battery", "name": "Eve",
		"email_verified_token": e.verifiedToken(t, strings.ToUpper(email))}, "")
	wantDetail(t, res, http.StatusConflict, "Email already registered")
	wantStatus(t, login(t, e, shouted, "correct horse battery"), http.StatusOK)
}

// The per-address limits of send-code and verify-code are not bypassed by
// writing the address in other letters or with spaces.
func TestLimitsIgnoreCaseAndSpaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{now: newClock(time.Now()).Now})
	email := uniqueEmail()
	spellings := []string{email, strings.ToUpper(email), " " + email + " ", "\t" + strings.ToUpper(email), email}
	for _, s := range spellings {
		wantStatus(t, e.do(t, "POST", "/user/email/send-code", map[string]string{"email": s}, ""), http.StatusOK)
	}
	res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": " " + strings.ToUpper(email[:1]) + email[1:]}, "")
	wantStatus(t, res, http.StatusTooManyRequests)

	other := uniqueEmail()
	token, code := e.sendCode(t, other)
	for i, s := range []string{other, strings.ToUpper(other), " " + other, other + " ", strings.ToUpper(other)} {
		res := e.do(t, "POST", "/user/email/verify-code", map[string]string{"email": s, "code": wrongCode(code), "verification_token": token}, "")
		if res.Status != http.StatusBadRequest {
			t.Fatalf("try %d: %s", i+1, res)
		}
	}
	token2, code2 := e.sendCode(t, other)
	res = e.do(t, "POST", "/user/email/verify-code", map[string]string{"email": strings.ToUpper(other), "code": code2, "verification_token": token2}, "")
	wantStatus(t, res, http.StatusTooManyRequests)
}

// Codes sent are counted per mailbox: a subaddress, an internationalized
// domain in Punycode, or a decomposed accent reaches the same inbox, so none
// of them gets a new allowance. Another mailbox keeps its own.
func TestSendCodeLimitIsPerMailbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{now: newClock(time.Now()).Now})
	local := "jos\u00e9-" + strings.TrimSuffix(uniqueEmail(), "@example.com")
	spellings := []string{
		local + "@bücher.example.com",
		local + "+1@bücher.example.com",
		local + "+2@xn--bcher-kva.example.com",
		strings.Replace(local, "\u00e9", "e\u0301", 1) + "@BÜCHER.example.com",
		strings.ToUpper(local) + "+news@Bücher.example.com",
	}
	for _, s := range spellings {
		wantStatus(t, e.do(t, "POST", "/user/email/send-code", map[string]string{"email": s}, ""), http.StatusOK)
	}
	res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": local + "+6@xn--bcher-kva.example.com"}, "")
	wantDetail(t, res, http.StatusTooManyRequests, "Too many codes sent to this address; try again later")
	wantStatus(t, e.do(t, "POST", "/user/email/send-code", map[string]string{"email": "x" + local + "@bücher.example.com"}, ""), http.StatusOK)
	wantStatus(t, e.do(t, "POST", "/user/email/send-code", map[string]string{"email": local + "@example.com"}, ""), http.StatusOK)
}

// After DELETE /user/me nothing of the session works, and the address may
// sign up again as a new user.
func TestErasureEndsEverything(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	other := login(t, e, u.Email, u.Password)
	wantStatus(t, other, http.StatusOK)
	wantDetail(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": "not it"}, u.Access), http.StatusForbidden, "The password is not correct")
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusNoContent)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, str(t, other, "access_token")), http.StatusUnauthorized)
	wantStatus(t, refresh(t, e, u.Refresh), http.StatusUnauthorized)
	wantStatus(t, refresh(t, e, str(t, other, "refresh_token")), http.StatusUnauthorized)
	wantStatus(t, login(t, e, u.Email, u.Password), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", "/user/me/password", map[string]string{"current_password": u.Password, "new_password": "another one here"}, u.Access), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusUnauthorized)
	id, access, _ := e.signUpAs(t, u.Email, "a new password", "Ada again")
	if id == u.ID {
		t.Errorf("the address signed up again as the erased user %d", id)
	}
	wantStatus(t, e.do(t, "GET", "/user/me", nil, access), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized)
}

// A partner cannot be made for an erased user: 404, and no partner record
// is left behind.
func TestPartnerOfAnErasedUser(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	org := createOrg(t, e, admin)
	u := e.signUp(t)
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, admin.Access), http.StatusNoContent)
	res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", org), map[string]any{
		"org_id": org, "full_name": "Ghost", "email": "ghost@example.com", "user_id": u.ID}, admin.Access)
	wantStatus(t, res, http.StatusNotFound)
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM unique_claims WHERE scope = 'partner_user_org' AND key = $1`,
		fmt.Sprintf("%d:%d", u.ID, org)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("a refused partner of erased user %d left %d partner record(s) in organisation %d", u.ID, n, org)
	}
}

// A partner record of a user is erased with the user: asked to erase it
// before, the admin is told to erase the user (409); after, there is
// nothing left to erase (204), not a 409 asking for what was done.
func TestErasingThePartnerOfAnErasedUser(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	org := createOrg(t, e, admin)
	u := e.signUp(t)
	partner := createPartner(t, e, admin, org, u.ID)
	erase := fmt.Sprintf("/admin/partners/%d/erase", partner)
	wantDetail(t, e.do(t, "POST", erase, nil, admin.Access), http.StatusConflict,
		fmt.Sprintf("This partner has a user account (user %d): erase the user, which erases the partner record too", u.ID))
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, admin.Access), http.StatusNoContent)
	wantStatus(t, e.do(t, "POST", erase, nil, admin.Access), http.StatusNoContent)
}

// Logging out with an access token in place of the refresh token, a
// refresh token twice, and refreshing a logged-out token are all refused
// or harmless, never a 5xx.
func TestTokenOddities(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	wantStatus(t, refresh(t, e, u.Access[:256]), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Access[:256]}, ""), http.StatusNoContent)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Refresh), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, ""), http.StatusNoContent)
	wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": u.Refresh}, ""), http.StatusNoContent)
	wantStatus(t, refresh(t, e, u.Refresh), http.StatusUnauthorized)
	for _, v := range []string{"", " ", "\u00e9\u00e9", strings.Repeat("x", 256)} {
		res := e.do(t, "POST", "/user/token/refresh", map[string]string{"refresh_token": v}, "")
		if res.Status >= 500 {
			t.Errorf("%s", res)
		}
	}
	// An e-mail-verified token is no access token, and an access token no
	// e-mail-verified one.
	email := uniqueEmail()
	res := e.do(t, "POST", "/user/signup", map[string]string{
		"email": email, "password": "correct horse battery", "name": "Eve", "email_verified_token": u.Access}, "")
	wantStatus(t, res, http.StatusBadRequest)
}

// waitForLockWaiters waits until n statements that start with prefix wait
// for a lock.
func waitForLockWaiters(t *testing.T, e *env, prefix string, n int, or <-chan response) (response, bool) {
	t.Helper()
	var res response
	answered := false
	poll.Must(t, 10*time.Second, fmt.Sprintf("%d statements %q... waiting for a lock", n, prefix), func() bool {
		select {
		case res = <-or:
			answered = true
			return true
		default:
		}
		var waiting int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND ltrim(query) LIKE $1 || '%'`, prefix).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting >= n
	})
	return res, answered
}

// A login with the old password that runs while a password change is under
// way must not leave a session that outlives the change: every other
// session ends (docs/decisions.md).
func TestLoginRacingAPasswordChange(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t).from(t)
	u := e.signUp(t)
	ctx := context.Background()
	// Hold the account's credentials, so that the change waits as it
	// replaces the hash (a slow commit, a busy database).
	hold, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM credentials WHERE user_id = $1 FOR UPDATE`, u.ID); err != nil {
		t.Fatal(err)
	}
	changed := make(chan response, 1)
	go func() { changed <- changePassword(t, e, u.Access, u.Password, "a brand new password") }()
	waitForLockWaiters(t, e, "UPDATE credentials", 1, nil)

	// Whoever knows the old password (why it is being changed) logs in now.
	logged := make(chan response, 1)
	go func() { logged <- login(t, e, u.Email, u.Password) }()
	res, done := waitForLockWaiters(t, e, "INSERT INTO refresh_tokens", 1, logged)
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, <-changed, http.StatusNoContent)
	if !done {
		res = <-logged
	}
	if res.Status == http.StatusOK {
		wantDetail(t, e.do(t, "GET", "/user/me", nil, str(t, res, "access_token")), http.StatusUnauthorized, "Could not validate credentials")
		wantDetail(t, refresh(t, e, str(t, res, "refresh_token")), http.StatusUnauthorized, "Could not validate credentials")
	} else {
		wantDetail(t, res, http.StatusUnauthorized, "Incorrect email or password")
	}
	wantStatus(t, login(t, e, u.Email, "a brand new password"), http.StatusOK)
}

// A login that runs while the account is being erased must not leave a
// session of the erased account: "refused from the next request ... when
// the account [is] erased" (docs/security.md).
func TestLoginRacingAnErasure(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t).from(t)
	u := e.signUp(t)
	ctx := context.Background()
	wantStatus(t, e.do(t, "POST", "/agents", map[string]any{"name": "Tutor", "system_prompt": "Be kind"}, u.Access,
		"Idempotency-Key", "review-"+uniqueEmail()), http.StatusCreated)
	// Hold the account's stored answers, so that the erasure waits part-way
	// through forgetting (a slow database).
	hold, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM idempotency_keys WHERE user_id = $1 FOR UPDATE`, u.ID); err != nil {
		t.Fatal(err)
	}
	erased := make(chan response, 1)
	go func() { erased <- e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access) }()
	waitForLockWaiters(t, e, "DELETE FROM idempotency_keys", 1, nil)

	logged := make(chan response, 1)
	go func() { logged <- login(t, e, u.Email, u.Password) }()
	res, done := waitForLockWaiters(t, e, "INSERT INTO refresh_tokens", 1, logged)
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, <-erased, http.StatusNoContent)
	if !done {
		res = <-logged
	}
	if res.Status == http.StatusOK {
		me := e.do(t, "GET", "/user/me", nil, str(t, res, "access_token"))
		if me.Status != http.StatusUnauthorized {
			t.Errorf("a login that raced the erasure of user %d: its access token still works: %s", u.ID, me)
		}
		rotated := refresh(t, e, str(t, res, "refresh_token"))
		if rotated.Status != http.StatusUnauthorized {
			t.Errorf("a login that raced the erasure of user %d: its refresh token still rotates: %s", u.ID, rotated)
		}
	} else {
		wantDetail(t, res, http.StatusUnauthorized, "Incorrect email or password")
	}
}

// Requests sent at once on one account: never a 5xx.
func TestAccountRaces(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t).from(t)
	admin := asAdmin(t, e)

	t.Run("sign-ups of one address", func(t *testing.T) {
		email := uniqueEmail()
		tokens := make([]string, 4)
		for i := range tokens {
			tokens[i] = e.verifiedToken(t, email)
		}
		created := 0
		for _, res := range concurrently(4, func(i int) response {
			return e.do(t, "POST", "/user/signup", map[string]string{"email": email, "password": "correct horse battery", "name": "Ada", "email_verified_token": tokens[i]}, "")
		}) {
			switch res.Status {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
			default:
				t.Errorf("%s", res)
			}
		}
		if created != 1 {
			t.Errorf("%d sign-ups of one address succeeded", created)
		}
	})
	t.Run("password changes", func(t *testing.T) {
		u := e.signUp(t)
		ok := 0
		for _, res := range concurrently(4, func(i int) response {
			return changePassword(t, e, u.Access, u.Password, fmt.Sprintf("new password %d", i))
		}) {
			switch res.Status {
			case http.StatusNoContent:
				ok++
			case http.StatusConflict, http.StatusForbidden:
			default:
				t.Errorf("%s", res)
			}
		}
		if ok != 1 {
			t.Errorf("%d password changes succeeded", ok)
		}
	})
	t.Run("erasures", func(t *testing.T) {
		u := e.signUp(t)
		for _, res := range concurrently(6, func(i int) response {
			if i%2 == 0 {
				return e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access)
			}
			return e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, admin.Access)
		}) {
			switch res.Status {
			case http.StatusNoContent, http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict:
			default:
				t.Errorf("%s", res)
			}
		}
		wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized)
		wantStatus(t, login(t, e, u.Email, u.Password), http.StatusUnauthorized)
	})
	t.Run("refreshes of one token", func(t *testing.T) {
		u := e.signUp(t)
		ok := 0
		for _, res := range concurrently(4, func(int) response { return refresh(t, e, u.Refresh) }) {
			switch res.Status {
			case http.StatusOK:
				ok++
			case http.StatusUnauthorized:
			default:
				t.Errorf("%s", res)
			}
		}
		if ok > 1 {
			t.Errorf("%d refreshes of one token succeeded", ok)
		}
	})
	t.Run("odd organisation names", func(t *testing.T) {
		for _, name := range []string{" ", "\u00a0", "\u200b", strings.Repeat("é", 200)} {
			res := e.do(t, "POST", "/admin/organizations", map[string]any{"name": name}, admin.Access)
			if res.Status != http.StatusCreated && res.Status != http.StatusUnprocessableEntity && res.Status != http.StatusConflict {
				t.Errorf("%s", res)
			}
		}
	})
	t.Run("odd sign-up names and passwords", func(t *testing.T) {
		for _, tc := range []struct{ name, password string }{{" ", "        "}, {"\u200b", strings.Repeat("\U0001F600", 128)}} {
			email := uniqueEmail()
			res := e.do(t, "POST", "/user/signup", map[string]string{"email": email, "password": tc.password, "name": tc.name, "email_verified_token": e.verifiedToken(t, email)}, "")
			if res.Status == http.StatusCreated {
				wantStatus(t, login(t, e, email, tc.password), http.StatusOK)
			}
		}
	})
}

// A code that could not be sent is not a code sent: a user who asks again,
// as the 503 tells them to, while the mail server is down is not held to
// the limit of codes sent to the address once it is back.
func TestUnsentCodesDoNotCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{now: newClock(time.Now()).Now})
	email := uniqueEmail()
	e.mail.down.Store(true)
	for i := 1; i <= 6; i++ {
		res := e.doFailing(t, "POST", "/user/email/send-code", map[string]string{"email": email}, "")
		wantDetail(t, res, http.StatusServiceUnavailable, "The verification e-mail could not be sent; ask for a code again in a moment")
	}
	e.mail.down.Store(false)
	res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": email}, "")
	wantStatus(t, res, http.StatusOK)
	if n := e.mail.count(email); n != 1 {
		t.Errorf("%d e-mails went to %s, want 1", n, email)
	}
}

// The admin's list shows an organisation as matching a request whenever
// approving the request as "new" would be refused because that
// organisation has the name: both ignore case and surrounding spaces. (The
// list trimmed with SQL's btrim, ASCII spaces only, while the name's claim
// trims every Unicode space: a tab, a newline, a no-break space.)
func TestMatchingOrganisationsAgreeWithTheApproval(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	name := "Tabby " + uniqueEmail()
	res := e.do(t, "POST", "/admin/organizations", map[string]any{"name": name}, admin.Access)
	wantStatus(t, res, http.StatusCreated)
	orgID := num(t, res, "id")
	for _, variant := range []string{"\t" + name, name + "\u00a0", name + "\n"} {
		id := e.requestPromotion(t, e.signUp(t), variant)
		path := fmt.Sprintf("/admin/partner-promotion-requests/%d/approve", id)
		wantStatus(t, e.do(t, "POST", path, map[string]any{"organization": "new"}, admin.Access), http.StatusConflict)
		listed := e.do(t, "GET", "/admin/partner-promotion-requests?status=pending&size=200", nil, admin.Access)
		wantStatus(t, listed, http.StatusOK)
		at := strings.Index(string(listed.Body), fmt.Sprintf(`"request_id":%d,`, id))
		if at < 0 || !strings.Contains(string(listed.Body[at:]), fmt.Sprintf(`"matching_organizations":[{"id":%d,`, orgID)) {
			t.Errorf("org_name %q: approving it as new is 409 (organisation %d has the name), but the list shows no match: %s",
				variant, orgID, listed.Body)
		}
	}
}

// An account whose credentials an erasure under way has deleted, while it
// does not yet read as erased, has no password: a login, a self-erasure
// (which checks the password) and a password change are refused, not a 500.
// (Found as a 500 of DELETE /user/me racing an admin's erasure.)
func TestAnAccountWithoutCredentialsHasNoPassword(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t).from(t)
	u := e.signUp(t)
	if _, err := e.pool.Exec(context.Background(), `DELETE FROM credentials WHERE user_id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	wantDetail(t, login(t, e, u.Email, u.Password), http.StatusUnauthorized, "Incorrect email or password")
	wantDetail(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusForbidden, "The password is not correct")
	wantStatus(t, changePassword(t, e, u.Access, u.Password, "a brand new password"), http.StatusUnauthorized)
}

// A refresh token of an erased account is refused even where the erasure
// did not revoke it (a session stored by a request that raced it): the
// account is gone.
func TestARefreshTokenOfAnErasedAccountIsRefused(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t).from(t)
	u := e.signUp(t)
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusNoContent)
	if _, err := e.pool.Exec(context.Background(), `UPDATE refresh_tokens SET revoked_at = NULL WHERE user_id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	wantDetail(t, refresh(t, e, u.Refresh), http.StatusUnauthorized, "Could not validate credentials")
}

// A sign-up that stopped between claiming its address and recording its
// account (a crash; a database gone, so that the release failed too) does
// not lock the address out: past a grace far longer than a write may run,
// the next sign-up takes the claim over, and the abandoned credentials go.
// A claim younger than that (a sign-up perhaps under way), and one of a
// recorded account however old, still answer 409.
func TestAnAbandonedSignUpDoesNotLockTheAddressOut(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t).from(t)
	ctx := context.Background()
	abandon := func(email, age string) (id int64) {
		t.Helper()
		id = offSequenceUserID() // the young claim's credentials stay: each run (-count) takes new ids
		if _, err := e.pool.Exec(ctx, `INSERT INTO unique_claims (scope, key, owner, claimed_at) VALUES ('user_email', $1, $2, now() - $3::interval)`,
			email, fmt.Sprint("user-", id), age); err != nil {
			t.Fatal(err)
		}
		if _, err := e.pool.Exec(ctx, `INSERT INTO credentials (user_id, password_hash, updated_at) VALUES ($1, 'abandoned', now())`, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	signUp := func(email string) response {
		return e.do(t, "POST", "/user/signup", map[string]string{"email": email, "password": "correct horse battery", "name": "Ada",
			"email_verified_token": e.verifiedToken(t, email)}, "")
	}
	old, young := uniqueEmail(), uniqueEmail()
	oldID := abandon(old, "11 minutes")
	abandon(young, "1 minute")
	wantStatus(t, signUp(old), http.StatusCreated)
	wantStatus(t, login(t, e, old, "correct horse battery"), http.StatusOK)
	var left int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM credentials WHERE user_id = $1`, oldID).Scan(&left); err != nil || left != 0 {
		t.Errorf("the abandoned sign-up's credentials: %d rows (%v), want none", left, err)
	}
	wantDetail(t, signUp(young), http.StatusConflict, "Email already registered")

	u := e.signUp(t)
	if _, err := e.pool.Exec(ctx, `UPDATE unique_claims SET claimed_at = now() - interval '1 year' WHERE scope = 'user_email' AND key = $1`,
		u.Email); err != nil {
		t.Fatal(err)
	}
	wantDetail(t, signUp(u.Email), http.StatusConflict, "Email already registered")
	wantStatus(t, login(t, e, u.Email, u.Password), http.StatusOK)
}
