package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrInvalidToken is wrapped by every error ParseAccess and
// ParseEmailVerified return. The underlying jwt error is wrapped too, so
// errors.Is(err, jwt.ErrTokenExpired) still tells an expired token apart.
var ErrInvalidToken = errors.New("invalid token")

// Clock returns the current time. Tokens use it both to stamp and to check
// tokens, so tests can move time forward.
type Clock func() time.Time

const (
	// Issuer is the "iss" claim of every token Lectern signs.
	Issuer = "lectern"
	// AudienceAccess is the "aud" claim of access tokens.
	AudienceAccess = "access"
	// AudienceEmailVerified is the "aud" claim of e-mail-verified tokens.
	AudienceEmailVerified = "email-verified"
	// DefaultAccessTTL is how long an access token lives unless
	// WithAccessTTL says otherwise.
	DefaultAccessTTL = 15 * time.Minute
	// MinKeyLen is the shortest signing key NewTokens accepts: HS256 keys
	// shorter than the hash output weaken it (RFC 7518 §3.2).
	MinKeyLen = 32
)

// signingMethod is the only algorithm signed and accepted.
var signingMethod = jwt.SigningMethodHS256

// Tokens issues and checks HS256-signed JWTs. It is safe for concurrent use.
type Tokens struct {
	key       []byte
	now       Clock
	accessTTL time.Duration
	checked   checkedTokens
}

// checkedTokens remembers access tokens whose signature and claims have been
// checked, with what they say: a client sends the same token with every
// request for its lifetime, and checking it (base64, JSON, HMAC) costs more
// than the rest of a small request's own work. A remembered token is still
// refused once it expires. Bounded: when full it starts again empty.
type checkedTokens struct {
	mu     sync.Mutex
	claims map[string]AccessClaims
}

const maxCheckedTokens = 8192

// get and put copy the roles, so no caller shares them with another.
func (c *checkedTokens) get(token string) (AccessClaims, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	claims, ok := c.claims[token]
	claims.Roles = slices.Clone(claims.Roles)
	return claims, ok
}

func (c *checkedTokens) put(token string, claims AccessClaims) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claims == nil || len(c.claims) >= maxCheckedTokens {
		c.claims = make(map[string]AccessClaims)
	}
	claims.Roles = slices.Clone(claims.Roles)
	c.claims[token] = claims
}

// TokensOption changes a default of NewTokens.
type TokensOption func(*Tokens) error

// WithAccessTTL sets the lifetime of access tokens (default
// DefaultAccessTTL). It must be positive.
func WithAccessTTL(d time.Duration) TokensOption {
	return func(t *Tokens) error {
		if d <= 0 {
			return fmt.Errorf("auth: access TTL %v is not positive", d)
		}
		t.accessTTL = d
		return nil
	}
}

// NewTokens returns a Tokens signing with key, which must be at least
// MinKeyLen bytes. now is the clock used to issue and validate tokens; nil
// means time.Now. The key is copied.
func NewTokens(key []byte, now Clock, opts ...TokensOption) (*Tokens, error) {
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("auth: signing key is %d bytes, need at least %d", len(key), MinKeyLen)
	}
	if now == nil {
		now = time.Now
	}
	t := &Tokens{key: slices.Clone(key), now: now, accessTTL: DefaultAccessTTL}
	for _, opt := range opts {
		if err := opt(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// AccessClaims is what an access token says about its bearer.
type AccessClaims struct {
	// UserID is the user the token was issued to (the "sub" claim, in
	// decimal).
	UserID int64
	// Roles are the roles granted at issue time; nil when there are none.
	Roles []string
	// ExpiresAt is when the token stops being accepted, in UTC, whole
	// seconds.
	ExpiresAt time.Time
	// ID is the token's unique "jti" claim.
	ID string
	// Session is the login session (refresh-token family) the token belongs
	// to (the "sid" claim): logging out, or a refresh token's reuse, ends it
	// and with it every access token of the session. Empty for tokens
	// issued outside a session.
	Session string
}

// accessJWT is the JSON form of an access token's claims.
type accessJWT struct {
	Roles   []string `json:"roles,omitempty"`
	Session string   `json:"sid,omitempty"`
	jwt.RegisteredClaims
}

// IssueAccess signs an access token for userID (which must be positive)
// with the given roles, valid for the access TTL from now. expiresAt is the
// token's expiry exactly as ParseAccess will report it.
func (t *Tokens) IssueAccess(userID int64, roles []string) (token string, expiresAt time.Time, err error) {
	return t.IssueSessionAccess(userID, roles, "")
}

// IssueSessionAccess is IssueAccess for a token of a login session (see
// AccessClaims.Session).
func (t *Tokens) IssueSessionAccess(userID int64, roles []string, session string) (token string, expiresAt time.Time, err error) {
	if userID <= 0 {
		return "", time.Time{}, fmt.Errorf("auth: user id %d is not positive", userID)
	}
	rc, err := t.registered(strconv.FormatInt(userID, 10), AudienceAccess, t.accessTTL)
	if err != nil {
		return "", time.Time{}, err
	}
	claims := accessJWT{Roles: slices.Clone(roles), Session: session, RegisteredClaims: rc}
	if len(claims.Roles) == 0 {
		claims.Roles = nil
	}
	token, err = t.sign(claims)
	if err != nil {
		return "", time.Time{}, err
	}
	return token, rc.ExpiresAt.UTC(), nil
}

// ParseAccess checks token's signature (HS256 only), issuer, audience and
// expiry against the clock, and returns its claims. Any failure gives an
// error wrapping ErrInvalidToken.
func (t *Tokens) ParseAccess(token string) (AccessClaims, error) {
	// Valid while now is before exp, as jwt checks it.
	if claims, ok := t.checked.get(token); ok && t.now().Before(claims.ExpiresAt) {
		return claims, nil
	}
	var c accessJWT
	if err := t.parse(token, &c, AudienceAccess); err != nil {
		return AccessClaims{}, err
	}
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != c.Subject {
		return AccessClaims{}, fmt.Errorf("%w: subject is not a user id", ErrInvalidToken)
	}
	if len(c.Roles) == 0 {
		c.Roles = nil
	}
	claims := AccessClaims{
		UserID:    id,
		Roles:     c.Roles,
		ExpiresAt: c.ExpiresAt.UTC(),
		ID:        c.ID,
		Session:   c.Session,
	}
	t.checked.put(token, claims)
	return claims, nil
}

// IssueEmailVerified signs a token, valid for ttl, proving that email was
// verified (for example by a sign-up code). Its audience is
// AudienceEmailVerified, so it is never accepted as an access token.
func (t *Tokens) IssueEmailVerified(email string, ttl time.Duration) (string, error) {
	if email == "" {
		return "", errors.New("auth: e-mail address is empty")
	}
	if ttl <= 0 {
		return "", fmt.Errorf("auth: TTL %v is not positive", ttl)
	}
	rc, err := t.registered(email, AudienceEmailVerified, ttl)
	if err != nil {
		return "", err
	}
	return t.sign(rc)
}

// ParseEmailVerified checks a token made by IssueEmailVerified and returns
// the e-mail address it vouches for. Any failure gives an error wrapping
// ErrInvalidToken.
func (t *Tokens) ParseEmailVerified(token string) (email string, err error) {
	var c jwt.RegisteredClaims
	if err := t.parse(token, &c, AudienceEmailVerified); err != nil {
		return "", err
	}
	if c.Subject == "" {
		return "", fmt.Errorf("%w: no e-mail address", ErrInvalidToken)
	}
	return c.Subject, nil
}

// registered builds the standard claims shared by every token. A random jti
// makes every token distinct, so one can be revoked or logged by id.
func (t *Tokens) registered(subject, audience string, ttl time.Duration) (jwt.RegisteredClaims, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return jwt.RegisteredClaims{}, fmt.Errorf("auth: reading token id: %w", err)
	}
	now := t.now()
	return jwt.RegisteredClaims{
		Issuer:    Issuer,
		Subject:   subject,
		Audience:  jwt.ClaimStrings{audience},
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		IssuedAt:  jwt.NewNumericDate(now),
		ID:        base64.RawURLEncoding.EncodeToString(id[:]),
	}, nil
}

func (t *Tokens) sign(claims jwt.Claims) (string, error) {
	s, err := jwt.NewWithClaims(signingMethod, claims).SignedString(t.key)
	if err != nil {
		return "", fmt.Errorf("auth: signing token: %w", err)
	}
	return s, nil
}

// parse validates token into claims. The algorithm is pinned twice (parser
// option and key function) so a token can never choose how it is checked.
func (t *Tokens) parse(token string, claims jwt.Claims, audience string) error {
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{signingMethod.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(audience),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(t.now),
		jwt.WithStrictDecoding(),
	)
	_, err := p.ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
		if tok.Method != signingMethod {
			return nil, fmt.Errorf("unexpected signing method %v", tok.Header["alg"])
		}
		return t.key, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	// jwt accepts any token whose audience list contains ours; we only
	// issue single-audience tokens, so anything else is not ours.
	aud, err := claims.GetAudience()
	if err != nil || len(aud) != 1 || aud[0] != audience {
		return fmt.Errorf("%w: audience is not exactly %q", ErrInvalidToken, audience)
	}
	return nil
}

// codeLabel separates the e-mail code key from every other use of the
// signing key.
const codeLabel = "lectern e-mail verification code v1"

// HashCode returns the hex HMAC-SHA256 of an e-mail verification code under
// a key derived from the signing key. Six digits hashed without a key are
// reversed from a database dump in a million hashes; under a server secret
// the dump alone reveals nothing.
func (t *Tokens) HashCode(code string) string {
	derive := hmac.New(sha256.New, t.key)
	derive.Write([]byte(codeLabel))
	mac := hmac.New(sha256.New, derive.Sum(nil))
	mac.Write([]byte(code))
	return hex.EncodeToString(mac.Sum(nil))
}
