package api_test

// Attacks on the rate limits of login and of joining a class, as a client
// sees them. Every service here runs on a frozen clock the test moves.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"lectern/auth"
	"lectern/commands"
	"lectern/eventstore"
	"lectern/quota"
	"lectern/ratelimit"
)

const (
	badLogin        = "Incorrect email or password"
	tooManyFailures = "Too many failed attempts; try again later"
	tooManyRequests = "Too many requests; try again later"
	tooManyJoins    = "Too many failed attempts to join a class; try again later"
)

// wantLimited checks a 429 in the contract's shape with its Retry-After.
func wantLimited(t testing.TB, res response, detail string, retryAfter time.Duration) {
	t.Helper()
	wantDetail(t, res, http.StatusTooManyRequests, detail)
	wantHeader(t, res, "Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
}

// The window-edge attack: five guesses ten seconds before a quarter-hour
// edge and five ten seconds after it. Fixed windows let all ten through; a
// sliding window refuses the second five, and the right password too, until
// the first failure is 15 minutes old.
func TestLoginWindowEdge(t *testing.T) {
	t.Parallel()
	edge := time.Now().UTC().Truncate(15 * time.Minute).Add(15 * time.Minute)
	clk := newClock(edge.Add(-10 * time.Second))
	e := newEnv(t, envConfig{now: clk.Now})
	u := e.signUp(t)
	for i := 1; i <= 5; i++ {
		wantDetail(t, login(t, e, u.Email, fmt.Sprintf("guess %d", i)), http.StatusUnauthorized, badLogin)
	}
	clk.Advance(20 * time.Second)
	for i := 6; i <= 10; i++ {
		wantLimited(t, login(t, e, u.Email, fmt.Sprintf("guess %d", i)), tooManyFailures, 15*time.Minute-20*time.Second)
	}
	clk.Advance(15*time.Minute - 20*time.Second - time.Second)
	wantLimited(t, login(t, e, u.Email, u.Password), tooManyFailures, time.Second)
	clk.Advance(time.Second)
	wantStatus(t, login(t, e, u.Email, u.Password), http.StatusOK)
}

// Concurrent guesses cannot slip past the count: failures are counted
// before the password is checked.
func TestLoginConcurrentGuesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{now: newClock(time.Now()).Now})
	u := e.signUp(t)
	results := concurrently(30, func(i int) response { return login(t, e, u.Email, fmt.Sprintf("guess %d", i)) })
	count := map[int]int{}
	for _, res := range results {
		count[res.Status]++
		if res.Status == http.StatusTooManyRequests {
			wantLimited(t, res, tooManyFailures, 15*time.Minute)
		}
	}
	if count[http.StatusUnauthorized] != 5 || count[http.StatusTooManyRequests] != 25 {
		t.Errorf("30 concurrent guesses: %v, want 5 401s and 25 429s", count)
	}
}

// The lockout attack: a third party fails 100 times at the owner's account
// from another address. The owner still logs in from theirs, and their own
// typo is a plain 401.
func TestLoginLockoutFromAnotherAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{now: newClock(time.Now()).Now})
	owner := e.signUp(t)
	attacker := e.from(t)
	for i := 1; i <= 100; i++ {
		res := login(t, attacker, owner.Email, fmt.Sprintf("guess %d", i))
		if i <= 5 {
			wantDetail(t, res, http.StatusUnauthorized, badLogin)
		} else {
			wantLimited(t, res, tooManyFailures, 15*time.Minute)
		}
	}
	wantDetail(t, login(t, e, owner.Email, "a typo"), http.StatusUnauthorized, badLogin)
	wantStatus(t, login(t, e, owner.Email, owner.Password), http.StatusOK)
	// The attacker's address stays refused, right password or not.
	wantLimited(t, login(t, attacker, owner.Email, owner.Password), tooManyFailures, 15*time.Minute)
}

// The account-wide bound: guesses from many addresses stop at 50 failures
// an hour. A fresh address is then refused, the owner's own (one they
// logged in from before) is not.
func TestLoginAccountBound(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now})
	owner := e.signUp(t)
	wantStatus(t, login(t, e, owner.Email, owner.Password), http.StatusOK) // e's address is now known
	bound := commands.DefaultLimits.AccountFailures.N
	failures := 0
	for range bound/5 + 1 {
		clk.Advance(time.Second)
		bot := e.from(t)
		for i := range 5 {
			res := login(t, bot, owner.Email, fmt.Sprintf("guess %d", i))
			if res.Status == http.StatusUnauthorized {
				failures++
				continue
			}
			// The first guess past the bound, an hour after the first failure.
			wantLimited(t, res, tooManyFailures, time.Hour-time.Duration(bound/5)*time.Second)
		}
	}
	if failures != bound {
		t.Errorf("%d failures from %d addresses, want the bound, %d", failures, bound/5+1, bound)
	}
	// The owner, from a new place, waits like everyone else...
	wantLimited(t, login(t, e.from(t), owner.Email, owner.Password), tooManyFailures, time.Hour-time.Duration(bound/5)*time.Second)
	// ...but from the address they logged in from, they get in,
	wantStatus(t, login(t, e, owner.Email, owner.Password), http.StatusOK)
	// and that address still has only its own five guesses.
	for i := 1; i <= 5; i++ {
		wantDetail(t, login(t, e, owner.Email, "a typo"), http.StatusUnauthorized, badLogin)
	}
	wantLimited(t, login(t, e, owner.Email, owner.Password), tooManyFailures, 15*time.Minute)
	// The bound slides: an hour after the first failure, a new address gets in.
	clk.Advance(time.Hour - time.Duration(bound/5)*time.Second)
	wantStatus(t, login(t, e.from(t), owner.Email, owner.Password), http.StatusOK)
}

// Login, send-code and verify-code each allow AddressLimit attempts a
// minute from one address: a token bucket, refilled one every 60/N s.
func TestAddressLimit(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now, addressLimit: 4})
	for i := 1; i <= 4; i++ {
		wantStatus(t, login(t, e, uniqueEmail(), "whatever"), http.StatusUnauthorized)
	}
	wantLimited(t, login(t, e, uniqueEmail(), "whatever"), tooManyRequests, 15*time.Second)
	clk.Advance(15 * time.Second)
	wantStatus(t, login(t, e, uniqueEmail(), "whatever"), http.StatusUnauthorized)
	wantLimited(t, login(t, e, uniqueEmail(), "whatever"), tooManyRequests, 15*time.Second)
	// Another address has a bucket of its own.
	wantStatus(t, login(t, e.from(t), uniqueEmail(), "whatever"), http.StatusUnauthorized)
}

// Sign-ups count against the client address's bucket, as logins do (a
// verified e-mail token lasts half an hour and may be sent again and
// again), and one for an address an account holds is refused before its
// password is hashed: it needs no argon2id slot, which every client shares.
func TestSignUpIsLimitedPerAddress(t *testing.T) {
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now, addressLimit: 4})
	email := uniqueEmail()
	body := map[string]string{"email": email, "password": "correct horse battery", "name": "A", "email_verified_token": e.verifiedToken(t, email)}
	wantStatus(t, e.do(t, "POST", "/user/signup", body, ""), http.StatusCreated)
	auth.BusyArgonInTests(t, 20*time.Millisecond) // not parallel: it takes every argon2id slot of the binary
	for i := 2; i <= 4; i++ {
		wantDetail(t, e.do(t, "POST", "/user/signup", body, ""), http.StatusConflict, "Email already registered")
	}
	wantLimited(t, e.do(t, "POST", "/user/signup", body, ""), tooManyRequests, 15*time.Second)
	// Another address has a bucket of its own.
	wantDetail(t, e.from(t).do(t, "POST", "/user/signup", body, ""), http.StatusConflict, "Email already registered")
}

// joinEnv is a service on a frozen clock with a school, a class and its
// student invite code.
func joinEnv(t *testing.T, cfg envConfig) (e *env, clk *clock, code string) {
	t.Helper()
	clk = newClock(time.Now())
	cfg.now = clk.Now
	e = newEnv(t, cfg)
	s := openSchool(t, e)
	created := e.createClass(t, s, `{"name":"Guessing","capacity":100}`)
	return e, clk, inviteCodes(t, created)["student"]["code"].(string)
}

// guess is an invite code that does not exist.
func guess(i int) string { return fmt.Sprintf("ZZ%06d", i) }

// Guessing invite codes at full speed: 50 concurrent guesses of one user,
// of which the first ten are answered and the rest refused.
func TestJoinGuessingAtSpeed(t *testing.T) {
	t.Parallel()
	e, _, _ := joinEnv(t, envConfig{})
	guesser := e.signUp(t)
	results := concurrently(50, func(i int) response { return e.join(t, guesser, guess(i)) })
	count := map[int]int{}
	for _, res := range results {
		count[res.Status]++
		switch res.Status {
		case http.StatusNotFound:
			wantDetail(t, res, http.StatusNotFound, "Invite code not found")
		case http.StatusTooManyRequests:
			wantLimited(t, res, tooManyRequests, 6*time.Second) // 10 a minute: one every 6 s
		}
	}
	if count[http.StatusNotFound] != 10 || count[http.StatusTooManyRequests] != 40 {
		t.Errorf("50 concurrent guesses: %v, want 10 404s and 40 429s", count)
	}
}

// Failed joins lock the user's joins: ten an hour, then 429, even with a
// valid code, until the oldest failure is an hour old. A join that works
// is not a failure.
func TestJoinFailureLockout(t *testing.T) {
	t.Parallel()
	e, clk, code := joinEnv(t, envConfig{})
	guesser := e.signUp(t)
	for i := range 9 {
		wantDetail(t, e.join(t, guesser, guess(i)), http.StatusNotFound, "Invite code not found")
	}
	clk.Advance(time.Minute) // a full token bucket again
	wantStatus(t, e.join(t, guesser, code), http.StatusCreated)
	wantDetail(t, e.join(t, guesser, guess(9)), http.StatusNotFound, "Invite code not found")
	clk.Advance(time.Minute)
	// The first failure was two minutes ago.
	for i := 10; i < 15; i++ {
		wantLimited(t, e.join(t, guesser, guess(i)), tooManyJoins, time.Hour-2*time.Minute)
	}
	other := e.createClass(t, openSchool(t, e), `{"name":"Another"}`)
	otherCode := inviteCodes(t, other)["student"]["code"].(string)
	wantLimited(t, e.join(t, guesser, otherCode), tooManyJoins, time.Hour-2*time.Minute)
	// Another user is not locked.
	wantStatus(t, e.join(t, e.signUp(t), otherCode), http.StatusCreated)

	clk.Advance(time.Hour - 2*time.Minute)
	guesser.Access = str(t, login(t, e, guesser.Email, guesser.Password), "access_token") // an hour on, a fresh token
	wantStatus(t, e.join(t, guesser, otherCode), http.StatusCreated)
}

// Joins per client address: many users at one address share its bucket
// (here at the default limit; the harness lifts it for other tests).
func TestJoinAddressLimit(t *testing.T) {
	t.Parallel()
	limit := commands.DefaultLimits.JoinAddress
	e, _, _ := joinEnv(t, envConfig{addressLimit: limit.N})
	guessers := make([]user, limit.N/commands.DefaultLimits.JoinUser.N+1)
	for i := range guessers {
		guessers[i] = e.signUp(t)
	}
	n := 0
	for _, g := range guessers {
		for range commands.DefaultLimits.JoinUser.N {
			res := e.join(t, g, guess(n))
			n++
			if n <= limit.N {
				wantStatus(t, res, http.StatusNotFound)
			} else {
				wantLimited(t, res, tooManyRequests, limit.Per/time.Duration(limit.N))
			}
		}
	}
	// Another address is not held back.
	wantStatus(t, e.from(t).join(t, e.signUp(t), guess(n)), http.StatusNotFound)
}

const tooManyTurns = "Too many practice turns; try again later"

// Practice turns at full speed: 30 concurrent first turns of one student,
// of which the default 20 are answered and the rest refused before any
// model is asked; the refused ones record nothing. Another student is not
// held back.
func TestTurnsAtSpeed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{now: newClock(time.Now()).Now})
	c := e.newClassroom(t, nil)
	results := concurrently(30, func(i int) response {
		return e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": fmt.Sprintf("turn %d", i)}, c.student.Access)
	})
	count := map[int]int{}
	for _, res := range results {
		count[res.Status]++
		if res.Status == http.StatusTooManyRequests {
			wantLimited(t, res, tooManyTurns, 3*time.Second) // 20 a minute: one every 3 s
		}
	}
	limit := commands.DefaultLimits.Turns.N
	if count[http.StatusCreated] != limit || count[http.StatusTooManyRequests] != 30-limit {
		t.Errorf("30 concurrent turns: %v, want %d 201s and %d 429s", count, limit, 30-limit)
	}
	if n := num(t, e.do(t, "GET", sessionsPath, nil, c.student.Access, "X-Min-Position", lastPosition(results)), "total"); n != int64(limit) {
		t.Errorf("%d sessions recorded, want %d", n, limit)
	}
	other := e.newClassroom(t, nil)
	e.startSession(t, other.student.Access, other.class, map[string]any{"prompt_text": "mine"})
}

// lastPosition is the greatest X-Event-Position of responses.
func lastPosition(responses []response) string {
	var last eventstore.Position
	for _, res := range responses {
		if p, err := eventstore.ParsePosition(res.Header.Get("X-Event-Position")); err == nil && p.Compare(last) > 0 {
			last = p
		}
	}
	return last.String()
}

// A continued turn, streamed or not, takes from the same bucket; a turn
// refused for its input, or a session not found, takes nothing; the bucket
// refills at its rate.
func TestTurnLimit(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now, limits: commands.Limits{Turns: ratelimit.Rate{N: 2, Per: time.Minute}}})
	c := e.newClassroom(t, nil)
	_, first := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "one"})
	chat := sessionPath(first.SessionID) + "/chat"
	wantStatus(t, e.do(t, "POST", chat, map[string]any{"prompt_text": ""}, c.student.Access), http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "POST", sessionPath(first.SessionID+1_000_000)+"/chat", map[string]any{"prompt_text": "two"}, c.student.Access), http.StatusNotFound)
	wantStatus(t, e.do(t, "POST", chat, map[string]any{"prompt_text": "two"}, c.student.Access), http.StatusOK)

	wantLimited(t, e.do(t, "POST", chat, map[string]any{"prompt_text": "three"}, c.student.Access), tooManyTurns, 30*time.Second)
	if s := e.stream(t, chat, map[string]any{"prompt_text": "three"}, c.student.Access, nil); s.Status != http.StatusTooManyRequests || s.Header.Get("Retry-After") != "30" {
		t.Errorf("a streamed turn past the limit: %d (Retry-After %q), want 429 after 30 s", s.Status, s.Header.Get("Retry-After"))
	}
	wantLimited(t, e.do(t, "POST", runPath(c.class), map[string]any{"prompt_text": "another"}, c.student.Access), tooManyTurns, 30*time.Second)
	if got := eventTypes(e.streamEvents(t, fmt.Sprintf("session-%d", first.SessionID))); len(got) != 3 {
		t.Errorf("the session's events: %v, want the start and two turns", got)
	}

	clk.Advance(30 * time.Second)
	wantStatus(t, e.do(t, "POST", chat, map[string]any{"prompt_text": "three"}, c.student.Access), http.StatusOK)
	wantLimited(t, e.do(t, "POST", chat, map[string]any{"prompt_text": "four"}, c.student.Access), tooManyTurns, 30*time.Second)
}

const tooManyUploads = "Too many documents uploaded; try again later"

// Uploads per user are a token bucket (Limits.Uploads): a burst, then one
// every Per/N. The token is taken before the upload is read, so a file
// that is refused for its content (here a PDF that is not one) still
// costs one: its extraction is the cost the limit bounds. Another user
// has a bucket of their own.
func TestUploadLimit(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now, limits: commands.Limits{Uploads: ratelimit.Rate{N: 2, Per: time.Minute}}})
	u, other := e.signUp(t), e.signUp(t)
	e.uploadDocument(t, u.Access, "One", "Cells divide.")
	wantStatus(t, e.uploadFile(t, u.Access, "two.pdf", "application/pdf", []byte("not a PDF"), ""), http.StatusUnprocessableEntity)
	wantLimited(t, e.do(t, "POST", documentsPath, map[string]any{"title": "Three", "content": "Cells grow."}, u.Access), tooManyUploads, 30*time.Second)
	wantLimited(t, e.uploadFile(t, u.Access, "three.txt", "text/plain", []byte("Cells grow."), ""), tooManyUploads, 30*time.Second)
	e.uploadDocument(t, other.Access, "Theirs", "Cells divide.")

	clk.Advance(30 * time.Second)
	e.uploadDocument(t, u.Access, "Three", "Cells grow.")
	wantLimited(t, e.do(t, "POST", documentsPath, map[string]any{"title": "Four", "content": "Cells part."}, u.Access), tooManyUploads, 30*time.Second)
	list := e.do(t, "GET", documentsPath, nil, u.Access)
	if got := num(t, list, "total"); got != 2 {
		t.Errorf("%d documents recorded, want the two uploads let through", got)
	}
}

const writeBudgetSpent = "Too much written for now: your daily write budget is spent; try again later"

// The write budget (quota): a user whose writes have recorded the day's budget
// gets a 429 on every write that draws on it, with when it will have room
// again, and nothing of the refused writes is recorded. What must work
// once it is spent does: reads, a password change, the erasure. Another
// user's budget is their own. The budget refills as the day goes on.
func TestWriteBudget(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	budget := ratelimit.Rate{N: 64 << 10, Per: 24 * time.Hour} // leases of 4 KiB
	e := newEnv(t, envConfig{now: clk.Now, writeBudget: budget})
	u, other := e.signUp(t), e.signUp(t)
	prompt := strings.Repeat("Explain it step by step. ", 400) // 10 000 bytes
	agent := map[string]any{"name": "Tutor", "system_prompt": prompt}

	body, err := json.Marshal(agent)
	if err != nil {
		t.Fatal(err)
	}
	var accepted, sent int
	var refused, mine response
	for range 20 {
		res := e.do(t, "POST", "/agents", string(body), u.Access)
		if res.Status != http.StatusCreated {
			refused = res
			break
		}
		mine = res
		accepted++
		sent += len(body)
	}
	wantDetail(t, refused, http.StatusTooManyRequests, writeBudgetSpent)
	// What is counted is each agent.created event: the body's text and a
	// few hundred bytes of the event's own. The budget and one write past
	// it at most; the budget less the replica's lease at least.
	if lo, hi := sent, sent+accepted*512; lo > budget.N+len(body)+512 || hi < budget.N-4<<10 {
		t.Errorf("%d agents (%d bytes of bodies) accepted on a budget of %d bytes", accepted, sent, budget.N)
	}
	retry, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	if err != nil || retry <= 0 || retry > 24*60*60 {
		t.Fatalf("Retry-After %q, want the seconds until the budget has room, within a day", refused.Header.Get("Retry-After"))
	}

	// Every write that draws on the budget is refused; nothing is recorded.
	e.createAgent(t, other.Access, agent) // another user's budget is theirs
	wantDetail(t, e.do(t, "PATCH", agentPath(mine, t), map[string]any{"name": "x"}, u.Access), http.StatusTooManyRequests, writeBudgetSpent)
	wantDetail(t, e.do(t, "POST", fewShotsPath, map[string]any{"input_text": "i", "output_text": "o"}, u.Access),
		http.StatusTooManyRequests, writeBudgetSpent)
	wantDetail(t, e.do(t, "POST", documentsPath, map[string]any{"title": "Notes", "content": "Cells divide."}, u.Access),
		http.StatusTooManyRequests, writeBudgetSpent)
	list := e.do(t, "GET", "/agents", nil, u.Access)
	wantStatus(t, list, http.StatusOK)
	if got := num(t, list, "total"); got != int64(accepted) {
		t.Errorf("%d agents listed, want the %d accepted", got, accepted)
	}
	wantStatus(t, e.do(t, "GET", fewShotsPath, nil, u.Access), http.StatusOK)
	wantStatus(t, changePassword(t, e, u.Access, u.Password, "a brand new passphrase"), http.StatusNoContent)
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": "not the password"}, u.Access), http.StatusForbidden)

	// The budget refills: at Retry-After a write fits again.
	clk.Advance(time.Duration(retry) * time.Second)
	res := login(t, e, u.Email, "a brand new passphrase") // the access token expired meanwhile
	wantStatus(t, res, http.StatusOK)
	access := str(t, res, "access_token")
	wantStatus(t, e.do(t, "POST", fewShotsPath, map[string]any{"input_text": "i", "output_text": "o"}, access), http.StatusCreated)
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": "a brand new passphrase"}, access), http.StatusNoContent)
}

// The budget counts what a write records, not what its request held: a
// practice session run copies its agent's whole system prompt into the
// session, for a body of a few bytes.
func TestWriteBudgetCountsWhatIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{writeBudget: ratelimit.Rate{N: 64 << 10, Per: 24 * time.Hour}})
	c := e.newClassroom(t, nil)
	prompt := strings.Repeat("Explain it step by step. ", 1600) // 40 000 bytes
	agent := e.createAgent(t, c.student.Access, map[string]any{"name": "Tutor", "system_prompt": prompt})
	run := map[string]any{"prompt_text": "hi", "agent_id": num(t, agent, "agent_id")}
	for i := 1; ; i++ {
		res := e.do(t, "POST", runPath(c.class), run, c.student.Access)
		if res.Status == http.StatusTooManyRequests {
			wantDetail(t, res, http.StatusTooManyRequests, writeBudgetSpent)
			break
		}
		wantStatus(t, res, http.StatusCreated)
		if i == 3 {
			t.Fatal("three runs of a 40 000-byte agent (and the agent) recorded on a budget of 64 KiB")
		}
	}
}

// The budget's statement is bounded as the write is: with the bucket's row
// held by a stalled transaction, a write that must buy a lease is a 503
// at the write's bound, not a request held while the stall lasts.
func TestStalledBudgetCheckIs503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{writeWait: time.Second, writeBudget: ratelimit.Rate{N: 64 << 10, Per: 24 * time.Hour}})
	u := e.signUp(t)
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO rate_buckets (bucket, tat, allowed) VALUES ($1, now(), true)`, quota.Bucket(u.ID)); err != nil {
		t.Fatal(err)
	}
	res := e.doFailing(t, "POST", "/agents", map[string]any{"name": "Tutor", "system_prompt": "Be kind."}, u.Access)
	wantDetail(t, res, http.StatusServiceUnavailable, "The write budget could not be checked in time; retry in a moment")
	wantHeader(t, res, "Retry-After", "1")
}

// Once the budget is spent, a retry of a recorded write under its
// Idempotency-Key still gets its answer (it records nothing more); a new
// key's write is refused, and its key released, so that it runs once
// there is room.
func TestWriteBudgetLetsARetryHaveItsAnswer(t *testing.T) {
	t.Parallel()
	clk := newClock(time.Now())
	e := newEnv(t, envConfig{now: clk.Now, writeBudget: ratelimit.Rate{N: 64 << 10, Per: 24 * time.Hour}})
	u := e.signUp(t)
	small := map[string]any{"name": "Tutor", "system_prompt": "Be kind."}
	first := e.do(t, "POST", "/agents", small, u.Access, "Idempotency-Key", "first")
	wantStatus(t, first, http.StatusCreated)
	big := map[string]any{"name": "Tutor", "system_prompt": strings.Repeat("Explain it step by step. ", 2000)} // 50 000 bytes
	var refused response
	for range 5 {
		if refused = e.do(t, "POST", "/agents", big, u.Access); refused.Status != http.StatusCreated {
			break
		}
	}
	wantDetail(t, refused, http.StatusTooManyRequests, writeBudgetSpent)

	replay := e.do(t, "POST", "/agents", small, u.Access, "Idempotency-Key", "first")
	wantBody(t, replay, http.StatusCreated, string(first.Body))
	wantHeader(t, replay, "Idempotent-Replayed", "true")
	wantDetail(t, e.do(t, "POST", "/agents", small, u.Access, "Idempotency-Key", "second"), http.StatusTooManyRequests, writeBudgetSpent)

	retry, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Duration(retry) * time.Second)
	res := login(t, e, u.Email, u.Password) // the access token expired meanwhile
	wantStatus(t, res, http.StatusOK)
	second := e.do(t, "POST", "/agents", small, str(t, res, "access_token"), "Idempotency-Key", "second")
	wantStatus(t, second, http.StatusCreated)
	if second.Header.Get("Idempotent-Replayed") != "" {
		t.Error("the refused key's write was replayed, not run")
	}
}
