package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"lectern/aggregates"
	"lectern/auth"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/mail"
	"lectern/ratelimit"
)

// Identity limits and lifetimes (DESIGN §5).
const (
	CodeTTL          = 10 * time.Minute
	CodeMaxAttempts  = 5
	VerifiedTokenTTL = 30 * time.Minute
	RefreshTTL       = 14 * 24 * time.Hour
	FailureLimit     = 5
	FailureWindow    = 15 * time.Minute
	AddressWindow    = time.Minute
)

// DefaultAddressLimit is how many login, code and verification attempts one
// client address may make per AddressWindow (a token bucket).
const DefaultAddressLimit = 120

// emailScope is the uniqueness claim scope of e-mail addresses.
const emailScope = "user_email"

// Identity is sign-up, login and token rotation.
type Identity struct {
	d           Deps
	tokens      *auth.Tokens
	mail        mail.Sender
	limiter     *ratelimit.Limiter
	adminEmails map[string]bool
	logger      *slog.Logger
	// limits are d.Limits with their defaults (tests from one address).
	limits Limits
}

// NewIdentity refuses missing dependencies: it needs d.Tokens, d.Mail and
// d.Logger. d.AdminEmails become admins when they sign up.
func NewIdentity(d Deps) (*Identity, error) {
	err := d.Validate()
	if d.Tokens == nil {
		err = errors.Join(err, errors.New("identity: nil tokens"))
	}
	if d.Mail == nil {
		err = errors.Join(err, errors.New("identity: nil mail sender"))
	}
	if d.Logger == nil {
		err = errors.Join(err, errors.New("identity: nil logger"))
	}
	if err != nil {
		return nil, err
	}
	admins := map[string]bool{}
	for _, e := range d.AdminEmails {
		if e = NormalizeEmail(e); e != "" {
			admins[e] = true
		}
	}
	return &Identity{d: d, tokens: d.Tokens, mail: d.Mail, limiter: ratelimit.New(d.DB, d.Now), adminEmails: admins,
		logger: d.Logger, limits: d.Limits.withDefaults()}, nil
}

// NormalizeEmail is the form e-mails are stored and compared in.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Tokens are what a login returns.
type Tokens struct {
	AccessToken  string
	RefreshToken string
	ExpiresAt    time.Time
}

func (i *Identity) limitAddress(ctx context.Context, action, addr string) error {
	return allow(ctx, i.limiter, action+"-addr:"+addr, i.limits.Address, tooManyRequests)
}

// attempt is a failure counted before the secret is checked, given back if
// the secret was right: counting after the check let concurrent guesses all
// pass a check that none of them had counted against yet.
type attempt struct{ hits []ratelimit.Hit }

// takeAttempt counts a failure of email's secret from addr up front: one of
// Limits.Failures for the pair (account, address), so that a third party's
// failures from elsewhere never lock the owner out of their own address,
// and one of Limits.AccountFailures for the account, which bounds guessing
// from many addresses. known reports whether addr is one the owner uses:
// such an address goes on past a full account window, still held to its own
// Failures, so that a distributed attack cannot lock the owner out either.
func (i *Identity) takeAttempt(ctx context.Context, action, email, addr string, known func() bool) (*attempt, error) {
	lim := i.limits
	pair, d, err := i.limiter.Take(ctx, action+"-fail:"+addr+" "+email, lim.Failures)
	if err != nil {
		return nil, err
	}
	if !d.OK {
		return nil, &derrors.RateLimitedError{RetryAfter: d.RetryAfter, Detail: tooManyFailures}
	}
	a := &attempt{hits: []ratelimit.Hit{pair}}
	account, d, err := i.limiter.Take(ctx, action+"-fail:"+email, lim.AccountFailures)
	switch {
	case err != nil:
		i.giveBack(ctx, a)
		return nil, err
	case d.OK:
		a.hits = append(a.hits, account)
		return a, nil
	case known != nil && known():
		return a, nil
	}
	i.giveBack(ctx, a)
	return nil, &derrors.RateLimitedError{RetryAfter: d.RetryAfter, Detail: tooManyFailures}
}

// giveBack uncounts an attempt that was not a failure.
func (i *Identity) giveBack(ctx context.Context, a *attempt) {
	for _, h := range a.hits {
		if err := i.limiter.Return(context.WithoutCancel(ctx), h); err != nil {
			i.logger.Error("give back an attempt", "error", err)
		}
	}
}

func knownAddressBucket(email, addr string) string { return "login-ok:" + addr + " " + email }

// knownAddress reports whether email logged in from addr within
// Limits.KnownAddress. On error it says no: the account bound then holds.
func (i *Identity) knownAddress(ctx context.Context, email, addr string) bool {
	lim := i.limits
	n, _, err := i.limiter.Count(ctx, knownAddressBucket(email, addr), ratelimit.Window{N: 1, Size: lim.KnownAddress})
	if err != nil {
		i.logger.Error("look up a known login address", "error", err)
		return false
	}
	return n > 0
}

// loggedIn gives back a successful login's attempt and remembers its address.
func (i *Identity) loggedIn(ctx context.Context, a *attempt, email, addr string) {
	i.giveBack(ctx, a)
	lim := i.limits
	if err := i.limiter.Record(context.WithoutCancel(ctx), knownAddressBucket(email, addr), ratelimit.Window{N: 1, Size: lim.KnownAddress}); err != nil {
		i.logger.Error("remember a login address", "error", err)
	}
}

// SendCode e-mails a 6-digit code and returns the verification token that
// must accompany it.
func (i *Identity) SendCode(ctx context.Context, email, addr string) (token string, expiresAt time.Time, err error) {
	email = NormalizeEmail(email)
	if err := i.limitAddress(ctx, "send-code", addr); err != nil {
		return "", time.Time{}, err
	}
	sent, d, err := i.limiter.Take(ctx, SendCodeBucket(email), i.limits.SendCode)
	if err != nil {
		return "", time.Time{}, err
	}
	if !d.OK {
		return "", time.Time{}, &derrors.RateLimitedError{RetryAfter: d.RetryAfter, Detail: "Too many codes sent to this address; try again later"}
	}
	code, err := auth.NewCode()
	if err != nil {
		return "", time.Time{}, err
	}
	token, err = auth.NewOpaqueToken()
	if err != nil {
		return "", time.Time{}, err
	}
	expiresAt = i.d.Now().UTC().Add(CodeTTL).Truncate(time.Microsecond)
	if _, err := i.d.DB.Exec(ctx, `INSERT INTO email_codes (token, email, code_hash, expires_at) VALUES ($1, $2, $3, $4)`,
		auth.HashSecret(token), email, i.tokens.HashCode(code), expiresAt); err != nil {
		return "", time.Time{}, err
	}
	body := fmt.Sprintf("Your Lectern verification code is %s. It expires in %d minutes.", code, int(CodeTTL.Minutes()))
	if err := i.mail.Send(ctx, mail.Message{To: email, Subject: "Your Lectern verification code", Body: body}); err != nil {
		// The mail server's failure, for the log (without the address);
		// the caller may ask for a code again, as the answer says: a code
		// that was not sent does not count as one sent to the address.
		if rerr := i.limiter.Return(context.WithoutCancel(ctx), sent); rerr != nil {
			i.logger.Error("give back a code that was not sent", "error", rerr)
		}
		return "", time.Time{}, errors.Join(
			derrors.New(derrors.ErrUnavailable, "The verification e-mail could not be sent; ask for a code again in a moment"), err)
	}
	return token, expiresAt, nil
}

var errBadCode = derrors.New(derrors.ErrBadRequest, "Invalid or expired verification code")

// VerifyCode checks email, code and verification token together and returns
// the token sign-up takes. A code allows CodeMaxAttempts tries.
func (i *Identity) VerifyCode(ctx context.Context, email, code, token, addr string) (string, error) {
	email = NormalizeEmail(email)
	if err := i.limitAddress(ctx, "verify", addr); err != nil {
		return "", err
	}
	// Verification has no address the owner is known by: the account bound
	// holds for every address.
	attempt, limited := i.takeAttempt(ctx, "verify", email, addr, nil)
	if limited != nil {
		return "", limited
	}
	var stored, codeHash string
	var expires time.Time
	var attempts int
	var verified *time.Time
	err := i.d.DB.QueryRow(ctx, `
		UPDATE email_codes SET attempts = attempts + 1 WHERE token = $1
		RETURNING email, code_hash, expires_at, attempts, verified_at`, auth.HashSecret(token)).
		Scan(&stored, &codeHash, &expires, &attempts, &verified)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errBadCode
	}
	if err != nil {
		return "", err
	}
	if stored != email || verified != nil || attempts > CodeMaxAttempts || !i.d.Now().Before(expires) ||
		!auth.EqualSecret(codeHash, i.tokens.HashCode(code)) {
		return "", errBadCode
	}
	// A code is used once: of two verifications racing, one marks it.
	tag, err := i.d.DB.Exec(ctx, `UPDATE email_codes SET verified_at = now() WHERE token = $1 AND verified_at IS NULL`, auth.HashSecret(token))
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() == 0 {
		return "", errBadCode
	}
	i.giveBack(ctx, attempt)
	return i.tokens.IssueEmailVerified(email, VerifiedTokenTTL)
}

// SignUp creates an account for a verified e-mail and logs it in. Attempts
// count against the client address's bucket, as logins do: a verified
// token lasts half an hour, and each attempt with a new password hashes it.
func (i *Identity) SignUp(ctx context.Context, email, password, name, verifiedToken, addr string) (aggregates.User, Tokens, Result, error) {
	if err := i.limitAddress(ctx, "signup", addr); err != nil {
		return aggregates.User{}, Tokens{}, Result{}, err
	}
	email = NormalizeEmail(email)
	proven, err := i.tokens.ParseEmailVerified(verifiedToken)
	if err != nil || NormalizeEmail(proven) != email {
		return aggregates.User{}, Tokens{}, Result{}, derrors.New(derrors.ErrBadRequest, "Invalid or expired email_verified_token for this email")
	}
	user, res, err := i.CreateUser(ctx, email, password, name, false)
	if err != nil {
		return user, Tokens{}, res, err
	}
	toks, err := i.issue(ctx, user, uuid.New())
	return user, toks, res, err
}

// takeOverAbandonedEmail gives email's claim to owner when the account that
// holds it was never recorded: a sign-up that stopped between its claim and
// its event (a crash, or a database that went away, so that the release of
// its failure failed too) would otherwise lock the address out for good.
// Its credentials go with it.
func (i *Identity) takeOverAbandonedEmail(ctx context.Context, email, owner string) (bool, error) {
	holder, err := claimOwner(ctx, i.d, emailScope, email)
	if err != nil {
		return false, err
	}
	if holder == "" {
		return claim(ctx, i.d, emailScope, email, owner) // released meanwhile
	}
	if abandoned, err := abandonedClaim(ctx, i.d.DB, i.d.Store, emailScope, email, holder); err != nil || !abandoned {
		return false, err
	}
	tag, err := i.d.DB.Exec(ctx, `UPDATE unique_claims SET owner = $3, claimed_at = now()
		WHERE scope = $1 AND key = $2 AND owner = $4`, emailScope, email, owner, holder)
	if err != nil || tag.RowsAffected() == 0 {
		return false, err // another sign-up took it first
	}
	if id, ok := strings.CutPrefix(holder, events.CategoryUser+"-"); ok {
		_, err = i.d.DB.Exec(ctx, `DELETE FROM credentials WHERE user_id = $1::bigint`, id)
	}
	return true, err
}

// emailTaken reports whether an account holds email's claim: one recorded,
// or being signed up (not an abandoned claim, which a sign-up takes over).
func (i *Identity) emailTaken(ctx context.Context, email string) (bool, error) {
	holder, err := claimOwner(ctx, i.d, emailScope, email)
	if err != nil || holder == "" {
		return false, err
	}
	abandoned, err := abandonedClaim(ctx, i.d.DB, i.d.Store, emailScope, email, holder)
	return !abandoned, err
}

// CreateUser creates an account directly (the operator's command line, and
// sign-up once the e-mail is verified).
func (i *Identity) CreateUser(ctx context.Context, email, password, name string, admin bool) (aggregates.User, Result, error) {
	email = NormalizeEmail(email)
	// An address an account holds is refused before the password is
	// hashed: argon2id's slots are every client's (the claim below still
	// decides a race).
	if taken, err := i.emailTaken(ctx, email); err != nil || taken {
		if err == nil {
			err = derrors.New(derrors.ErrConflict, "Email already registered")
		}
		return aggregates.User{}, Result{}, err
	}
	hash, err := auth.HashPassword(ctx, password)
	if err != nil {
		return aggregates.User{}, Result{}, passwordBusy(err)
	}
	id, err := nextID(ctx, i.d, "user_ids")
	if err != nil {
		return aggregates.User{}, Result{}, err
	}
	stream := eventstore.StreamName(events.CategoryUser, id)
	ok, err := claim(ctx, i.d, emailScope, email, stream)
	if err == nil && !ok {
		ok, err = i.takeOverAbandonedEmail(ctx, email, stream)
	}
	if err != nil {
		return aggregates.User{}, Result{}, err
	}
	if !ok {
		return aggregates.User{}, Result{}, derrors.New(derrors.ErrConflict, "Email already registered")
	}
	// The hash goes to the credentials, never into the event; written first,
	// so that an account whose event stands always has its password.
	if _, err := i.d.DB.Exec(ctx, `INSERT INTO credentials (user_id, password_hash, updated_at) VALUES ($1, $2, $3)`,
		id, hash, i.d.Now().UTC()); err != nil {
		release(ctx, i.d, emailScope, email, stream)
		return aggregates.User{}, Result{}, err
	}
	user, res, err := create(ctx, i.d, stream, aggregates.EvolveUser, func(u aggregates.User) ([]events.Event, error) {
		return aggregates.DecideSignUp(u, aggregates.SignUp{
			UserID: id, Email: email, Name: name, Admin: admin || i.adminEmails[email],
		})
	})
	if err != nil {
		_, _ = i.d.DB.Exec(context.WithoutCancel(ctx), `DELETE FROM credentials WHERE user_id = $1`, id)
		release(ctx, i.d, emailScope, email, stream)
	}
	return user, res, err
}

// passwordHash is the user's password hash from the credentials. An account
// created before they existed, whose hash the migration could not copy (on
// EventStoreDB, not yet projected then), has it in its first event
// (user.signed_up version 1): it is copied into the credentials then.
func (i *Identity) passwordHash(ctx context.Context, userID int64) (string, error) {
	var hash string
	err := i.d.DB.QueryRow(ctx, `SELECT password_hash FROM credentials WHERE user_id = $1`, userID).Scan(&hash)
	if !errors.Is(err, pgx.ErrNoRows) {
		return hash, err
	}
	first, err := i.d.Store.ReadStream(ctx, eventstore.StreamName(events.CategoryUser, userID), eventstore.Forwards, 1, 1)
	if err != nil {
		return "", err
	}
	var legacy struct {
		PasswordHash string `json:"password_hash"`
	}
	if len(first) == 0 || first[0].Type != "user.signed_up" || json.Unmarshal(first[0].Data, &legacy) != nil || legacy.PasswordHash == "" {
		// Erased (perhaps by a request still under way, which deleted the
		// credentials before the account reads as erased): no password is
		// the account's any more.
		return "", errBadLogin
	}
	_, err = i.d.DB.Exec(ctx, `INSERT INTO credentials (user_id, password_hash, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (user_id) DO NOTHING`, userID, legacy.PasswordHash, first[0].RecordedAt)
	return legacy.PasswordHash, err
}

// GrantRole grants a role to a user.
func (i *Identity) GrantRole(ctx context.Context, userID int64, role string) (aggregates.User, Result, error) {
	return execute(ctx, i.d, eventstore.StreamName(events.CategoryUser, userID), aggregates.EvolveUser,
		func(u aggregates.User) ([]events.Event, error) { return aggregates.DecideGrantRole(u, role) })
}

// credentialsByEmail is the id and password hash of the account that holds
// email's claim, in one statement; errBadLogin when there is none (no
// claim, or an erased account's). An account recorded before the
// credentials table keeps its hash in its first event (passwordHash).
func (i *Identity) credentialsByEmail(ctx context.Context, email string) (int64, string, error) {
	var owner string
	var hash *string
	err := i.d.DB.QueryRow(ctx, `SELECT u.owner, c.password_hash FROM unique_claims u
		LEFT JOIN credentials c ON c.user_id = CASE WHEN u.owner ~ '^user-[0-9]{1,18}$' THEN substr(u.owner, 6)::bigint END
		WHERE u.scope = $1 AND u.key = $2`, emailScope, email).Scan(&owner, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", errBadLogin
	}
	if err != nil {
		return 0, "", err
	}
	id, perr := streamID(owner)
	if perr != nil || !strings.HasPrefix(owner, events.CategoryUser+"-") {
		return 0, "", errBadLogin
	}
	if hash != nil {
		return id, *hash, nil
	}
	h, err := i.passwordHash(ctx, id) // before credentials, or erased
	return id, h, err
}

// UserByEmail loads a user's aggregate through the e-mail claim.
func (i *Identity) UserByEmail(ctx context.Context, email string) (aggregates.User, error) {
	stream, err := claimOwner(ctx, i.d, emailScope, NormalizeEmail(email))
	if err != nil {
		return aggregates.User{}, err
	}
	if stream == "" {
		return aggregates.User{}, derrors.New(derrors.ErrNotFound, "User not found")
	}
	user, _, _, err := load(ctx, i.d, stream, aggregates.EvolveUser)
	if err == nil && !user.Exists() {
		return user, derrors.New(derrors.ErrNotFound, "User not found")
	}
	return user, err
}

var errBadLogin = derrors.New(derrors.ErrUnauthenticated, "Incorrect email or password")

// passwordBusy is err, or the client's 503 when it says that too many
// password checks ran at once for this one to get its turn in time
// (auth.ErrBusy): nothing was checked or changed, the same request may be
// sent again.
func passwordBusy(err error) error {
	if errors.Is(err, auth.ErrBusy) {
		return derrors.New(derrors.ErrUnavailable, "Too many passwords are being checked at once; retry in a moment")
	}
	return err
}

// Login checks a password and issues tokens. Failures are limited per
// (e-mail, client address) and per e-mail (takeAttempt); a successful login
// is never counted as one.
func (i *Identity) Login(ctx context.Context, email, password, addr string) (Tokens, error) {
	email = NormalizeEmail(email)
	if err := i.limitAddress(ctx, "login", addr); err != nil {
		return Tokens{}, err
	}
	attempt, err := i.takeAttempt(ctx, "login", email, addr, func() bool { return i.knownAddress(ctx, email, addr) })
	if err != nil {
		return Tokens{}, err
	}
	// The password's hash is read by the e-mail, in the one statement an
	// unknown e-mail costs too, and the account only once it matched: a
	// failed login of an account did two more reads (its stream, its
	// credentials), and took longer than one of an unknown e-mail.
	userID, hash, err := i.credentialsByEmail(ctx, email)
	if errors.Is(err, errBadLogin) {
		// The same time as a real check, and the same answer when the
		// checks are busy: no account enumeration.
		if err := auth.DummyVerify(ctx, password); err != nil {
			return Tokens{}, passwordBusy(err)
		}
		return Tokens{}, errBadLogin
	}
	if err != nil {
		return Tokens{}, err
	}
	ok, err := auth.VerifyPassword(ctx, hash, password)
	if err != nil {
		return Tokens{}, passwordBusy(err)
	}
	if !ok {
		return Tokens{}, errBadLogin
	}
	// The account of the claim read with the hash (not the claim again).
	user, _, _, err := load(ctx, i.d, eventstore.StreamName(events.CategoryUser, userID), aggregates.EvolveUser)
	if err != nil {
		return Tokens{}, err
	}
	if !user.Exists() || user.Erased {
		return Tokens{}, errBadLogin // never recorded (an abandoned claim), or erased since
	}
	toks, err := i.issueFor(ctx, user, hash)
	if err != nil {
		return Tokens{}, err
	}
	i.loggedIn(ctx, attempt, email, addr)
	return toks, nil
}

// issueFor issues a new session's tokens for a login whose password matched
// hash, provided hash is still the account's when the refresh token is
// stored: a password change or an erasure that committed since the check
// (which takes an argon2id verification's time) refuses the login, and one
// under way makes it wait (the credentials row is read FOR SHARE, which the
// change's UPDATE and the erasure's DELETE hold). Without it, a login
// checked against the old password could store its session after the change
// or the erasure had revoked the others, and outlive it.
func (i *Identity) issueFor(ctx context.Context, user aggregates.User, hash string) (Tokens, error) {
	return i.issueWhile(ctx, i.d.DB, user, uuid.New(), hash)
}

// issue creates an access token and a refresh token of family.
func (i *Identity) issue(ctx context.Context, user aggregates.User, family uuid.UUID) (Tokens, error) {
	return i.issueIn(ctx, i.d.DB, user, family)
}

// issueIn is issue with the refresh token inserted through db (a
// transaction, for a rotation).
func (i *Identity) issueIn(ctx context.Context, db execer, user aggregates.User, family uuid.UUID) (Tokens, error) {
	return i.issueWhile(ctx, db, user, family, "")
}

type execer interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

// issueWhile is issueIn whose refresh token, when hash is set, is stored
// only while hash is the account's password hash (issueFor): else the
// login is refused.
func (i *Identity) issueWhile(ctx context.Context, db execer, user aggregates.User, family uuid.UUID, hash string) (Tokens, error) {
	access, exp, err := i.tokens.IssueSessionAccess(user.ID, user.Roles, family.String())
	if err != nil {
		return Tokens{}, err
	}
	refresh, err := auth.NewOpaqueToken()
	if err != nil {
		return Tokens{}, err
	}
	args := []any{auth.HashSecret(refresh), user.ID, family, i.d.Now().Add(RefreshTTL)}
	insert := `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at) VALUES ($1, $2, $3, $4)`
	if hash != "" {
		insert = `INSERT INTO refresh_tokens (token_hash, user_id, family_id, expires_at)
			SELECT $1, $2, $3, $4 FROM credentials WHERE user_id = $2 AND password_hash = $5 FOR SHARE`
		args = append(args, hash)
	}
	tag, err := db.Exec(ctx, insert, args...)
	switch {
	case err != nil:
		return Tokens{}, err
	case tag.RowsAffected() == 0:
		return Tokens{}, errBadLogin // the password is no longer the account's
	}
	return Tokens{AccessToken: access, RefreshToken: refresh, ExpiresAt: exp}, nil
}

var errBadRefresh = derrors.New(derrors.ErrUnauthenticated, "Could not validate credentials")

// Refresh rotates a refresh token. Presenting a token that was already
// rotated means it leaked: the whole family is revoked. A family any of whose
// tokens was revoked (a logout, a password change, a detected reuse) rotates
// no more, even through a token issued while the revocation ran: an UPDATE
// that revokes a family does not see a token inserted by a rotation that
// commits under it, but it does revoke the token that rotation locked, so
// the family keeps a revoked row (the janitor purges revoked rows only with
// their whole family).
// The rotation and its new token commit together.
func (i *Identity) Refresh(ctx context.Context, token string) (Tokens, error) {
	tx, err := i.d.DB.Begin(ctx)
	if err != nil {
		return Tokens{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var userID int64
	var family uuid.UUID
	var expires time.Time
	var rotated, revoked *time.Time
	err = tx.QueryRow(ctx, `SELECT user_id, family_id, expires_at, rotated_at, revoked_at FROM refresh_tokens WHERE token_hash = $1 FOR UPDATE`,
		auth.HashSecret(token)).Scan(&userID, &family, &expires, &rotated, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return Tokens{}, errBadRefresh
	}
	if err != nil {
		return Tokens{}, err
	}
	if revoked != nil || !i.d.Now().Before(expires) {
		return Tokens{}, errBadRefresh
	}
	var familyRevoked bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM refresh_tokens WHERE family_id = $1 AND revoked_at IS NOT NULL)`,
		family).Scan(&familyRevoked); err != nil {
		return Tokens{}, err
	}
	if rotated != nil || familyRevoked {
		if _, err := tx.Exec(ctx, `UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1 AND revoked_at IS NULL`, family); err != nil {
			return Tokens{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return Tokens{}, err
		}
		if rotated != nil {
			i.logger.Warn("refresh token reused; token family revoked", "user_id", userID, "family_id", family)
		}
		return Tokens{}, errBadRefresh
	}
	user, _, _, err := load(ctx, i.d, eventstore.StreamName(events.CategoryUser, userID), aggregates.EvolveUser)
	if err != nil {
		return Tokens{}, err
	}
	if !user.Exists() || user.Erased {
		return Tokens{}, errBadRefresh // the erasure revoked its tokens; a session it raced has none either
	}
	if _, err := tx.Exec(ctx, `UPDATE refresh_tokens SET rotated_at = now() WHERE token_hash = $1`, auth.HashSecret(token)); err != nil {
		return Tokens{}, err
	}
	tokens, err := i.issueIn(ctx, tx, user, family)
	if err != nil {
		return Tokens{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Tokens{}, err
	}
	return tokens, nil
}

// Logout revokes the refresh token's family. Unknown tokens are ignored.
func (i *Identity) Logout(ctx context.Context, token string) error {
	_, err := i.d.DB.Exec(ctx, `
		UPDATE refresh_tokens SET revoked_at = now()
		WHERE revoked_at IS NULL AND family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = $1)`, auth.HashSecret(token))
	return err
}

// ErrWrongPassword: a password that confirms an action (a password change)
// is not the account's.
var ErrWrongPassword = derrors.New(derrors.ErrForbidden, "The password is not correct")

// ChangePassword replaces userID's password once current proves it is the
// person, not a stolen token. current is checked as a login's password is,
// under the login's rate limits for the account and addr. The new hash goes
// to the credentials; user.password_changed, which holds no secret, records
// the change. Every refresh-token family of the user but keep (the caller's
// session; uuid.Nil: none) is revoked, which ends the other sessions and
// their access tokens.
func (i *Identity) ChangePassword(ctx context.Context, userID int64, current, next, addr string, keep uuid.UUID) (Result, error) {
	if err := i.limitAddress(ctx, "login", addr); err != nil {
		return Result{}, err
	}
	stream := eventstore.StreamName(events.CategoryUser, userID)
	user, _, _, err := load(ctx, i.d, stream, aggregates.EvolveUser)
	if err != nil {
		return Result{}, err
	}
	if !user.Exists() || user.Erased {
		return Result{}, errBadRefresh // a valid signature for an account that is gone
	}
	email := NormalizeEmail(user.Email)
	attempt, err := i.takeAttempt(ctx, "login", email, addr, func() bool { return i.knownAddress(ctx, email, addr) })
	if err != nil {
		return Result{}, err
	}
	old, err := i.passwordHash(ctx, userID)
	if err != nil {
		return Result{}, err
	}
	ok, err := auth.VerifyPassword(ctx, old, current)
	if err != nil {
		return Result{}, passwordBusy(err)
	}
	if !ok {
		return Result{}, ErrWrongPassword
	}
	i.loggedIn(ctx, attempt, email, addr)
	hash, err := auth.HashPassword(ctx, next)
	if err != nil {
		return Result{}, passwordBusy(err)
	}
	// The hash is replaced and the other sessions end in one transaction:
	// both or neither. The sessions are revoked after the hash is
	// replaced, so the revocation sees every session a login stored with
	// the old password (issueFor stores one only while the hash it checked
	// is the account's, and waits for this transaction's row lock); revoked
	// before, a login checked against the old password could store its
	// session in between and outlive the change.
	err = pgx.BeginFunc(ctx, i.d.DB, func(tx pgx.Tx) error {
		// Compare-and-set on the hash the current password matched: of two
		// changes racing with the same current password, one wins.
		tag, err := tx.Exec(ctx, `UPDATE credentials SET password_hash = $2, updated_at = $3 WHERE user_id = $1 AND password_hash = $4`,
			userID, hash, i.d.Now().UTC(), old)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return derrors.New(derrors.ErrConflict, "The password was changed by another request; try again")
		}
		_, err = tx.Exec(ctx, `UPDATE refresh_tokens SET revoked_at = now() WHERE user_id = $1 AND family_id <> $2 AND revoked_at IS NULL`,
			userID, keep)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	_, res, err := execute(ctx, i.d, stream, aggregates.EvolveUser, func(u aggregates.User) ([]events.Event, error) {
		return aggregates.DecideChangePassword(u)
	})
	if err != nil {
		// Not recorded: the old password stands.
		if _, rerr := i.d.DB.Exec(context.WithoutCancel(ctx), `UPDATE credentials SET password_hash = $2 WHERE user_id = $1 AND password_hash = $3`,
			userID, old, hash); rerr != nil {
			i.logger.Error("restore a password whose change was not recorded", "user_id", userID, "error", rerr)
		}
		return Result{}, err
	}
	return res, nil
}
