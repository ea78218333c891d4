package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"lectern/clocktest"
)

var testKey = bytes.Repeat([]byte("k"), 32)

func newTestTokens(t *testing.T, opts ...TokensOption) (*Tokens, *clocktest.Clock) {
	t.Helper()
	clock := clocktest.New(time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC))
	tokens, err := NewTokens(testKey, clock.Now, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tokens, clock
}

// signRaw signs arbitrary claims, for forging tokens the API would never make.
func signRaw(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validClaims are claims ParseAccess accepts at the fake clock's start.
func validClaims(clock *clocktest.Clock) jwt.MapClaims {
	now := clock.Now()
	return jwt.MapClaims{
		"iss": Issuer,
		"sub": "42",
		"aud": []string{AudienceAccess},
		"exp": now.Add(time.Minute).Unix(),
		"iat": now.Unix(),
		"jti": "x",
	}
}

func TestNewTokensRejectsShortKey(t *testing.T) {
	if _, err := NewTokens(make([]byte, 31), nil); err == nil {
		t.Error("NewTokens accepted a 31-byte key")
	}
	if _, err := NewTokens(nil, nil); err == nil {
		t.Error("NewTokens accepted no key")
	}
	if _, err := NewTokens(testKey, nil, WithAccessTTL(0)); err == nil {
		t.Error("NewTokens accepted a zero TTL")
	}
}

func TestAccessRoundTrip(t *testing.T) {
	tokens, clock := newTestTokens(t)
	tok, exp, err := tokens.IssueAccess(42, []string{"admin", "author"})
	if err != nil {
		t.Fatal(err)
	}
	wantExp := time.Date(2030, 1, 2, 3, 19, 5, 0, time.UTC) // +15 min, whole seconds
	if !exp.Equal(wantExp) {
		t.Errorf("expiresAt = %v, want %v", exp, wantExp)
	}

	clock.Advance(15*time.Minute - time.Second)
	got, err := tokens.ParseAccess(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == "" {
		t.Error("token has no ID")
	}
	want := AccessClaims{UserID: 42, Roles: []string{"admin", "author"}, ExpiresAt: exp, ID: got.ID}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseAccess mismatch (-want +got):\n%s", diff)
	}

	// Without roles.
	tok, _, err = tokens.IssueAccess(7, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = tokens.ParseAccess(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.UserID != 7 || got.Roles != nil {
		t.Errorf("ParseAccess = %+v, want user 7 and nil roles", got)
	}

	// Every token is distinct, even for the same user at the same instant.
	a, _, _ := tokens.IssueAccess(1, nil)
	b, _, _ := tokens.IssueAccess(1, nil)
	if a == b {
		t.Error("two access tokens are identical")
	}
}

func TestIssueAccessRejectsBadUserID(t *testing.T) {
	tokens, _ := newTestTokens(t)
	for _, id := range []int64{0, -1} {
		if _, _, err := tokens.IssueAccess(id, nil); err == nil {
			t.Errorf("IssueAccess(%d) succeeded", id)
		}
	}
}

func TestAccessTTLOption(t *testing.T) {
	tokens, clock := newTestTokens(t, WithAccessTTL(time.Hour))
	tok, exp, err := tokens.IssueAccess(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := clock.Now().Add(time.Hour).Truncate(time.Second); !exp.Equal(want) {
		t.Errorf("expiresAt = %v, want %v", exp, want)
	}
	clock.Advance(30 * time.Minute)
	if _, err := tokens.ParseAccess(tok); err != nil {
		t.Errorf("token rejected within its hour: %v", err)
	}
}

func TestAccessExpired(t *testing.T) {
	tokens, clock := newTestTokens(t)
	tok, _, err := tokens.IssueAccess(42, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(15 * time.Minute)
	_, err = tokens.ParseAccess(tok)
	if !errors.Is(err, ErrInvalidToken) || !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("ParseAccess(expired) error = %v, want ErrInvalidToken and jwt.ErrTokenExpired", err)
	}
}

// A token checked once is remembered, but never past its expiry, and a
// caller changing the roles it got does not change what the token says.
func TestCheckedTokenStillExpires(t *testing.T) {
	tokens, clock := newTestTokens(t)
	tok, _, err := tokens.IssueAccess(42, []string{"partner"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := tokens.ParseAccess(tok)
	if err != nil {
		t.Fatal(err)
	}
	first.Roles[0] = "admin"
	clock.Advance(14 * time.Minute)
	again, err := tokens.ParseAccess(tok)
	if err != nil || again.UserID != 42 || len(again.Roles) != 1 || again.Roles[0] != "partner" {
		t.Fatalf("ParseAccess again = %+v, %v; want user 42 with role partner", again, err)
	}
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	forged := tok[:len(tok)-len(sig)] + strings.Repeat("A", len(sig))
	if _, err := tokens.ParseAccess(forged); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a checked token with another signature is accepted: %v", err)
	}
	clock.Advance(time.Minute)
	if _, err := tokens.ParseAccess(tok); !errors.Is(err, ErrInvalidToken) || !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("ParseAccess(expired, checked before) error = %v, want ErrInvalidToken and jwt.ErrTokenExpired", err)
	}
}

func TestEmailVerifiedRoundTrip(t *testing.T) {
	tokens, clock := newTestTokens(t)
	tok, err := tokens.IssueEmailVerified("ada@example.com", 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(29 * time.Minute)
	email, err := tokens.ParseEmailVerified(tok)
	if err != nil || email != "ada@example.com" {
		t.Errorf("ParseEmailVerified = %q, %v; want ada@example.com, nil", email, err)
	}
	clock.Advance(time.Minute)
	if _, err := tokens.ParseEmailVerified(tok); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("ParseEmailVerified(expired) error = %v, want ErrInvalidToken", err)
	}

	if _, err := tokens.IssueEmailVerified("", time.Minute); err == nil {
		t.Error("IssueEmailVerified accepted an empty address")
	}
	if _, err := tokens.IssueEmailVerified("a@b.c", 0); err == nil {
		t.Error("IssueEmailVerified accepted a zero TTL")
	}
}

func TestAudiencesAreSeparate(t *testing.T) {
	tokens, _ := newTestTokens(t)
	access, _, err := tokens.IssueAccess(42, []string{"admin"})
	if err != nil {
		t.Fatal(err)
	}
	verified, err := tokens.IssueEmailVerified("42", time.Hour) // a numeric "e-mail" to make the subject plausible
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.ParseAccess(verified); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("e-mail-verified token accepted as access token (err %v)", err)
	}
	if _, err := tokens.ParseEmailVerified(access); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("access token accepted as e-mail-verified token (err %v)", err)
	}
}

func TestParseRejectsForgedTokens(t *testing.T) {
	tokens, clock := newTestTokens(t)
	otherKey := bytes.Repeat([]byte("o"), 32)
	with := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims(clock)
		change(c)
		return c
	}
	// Sanity: the baseline forged token is accepted.
	if _, err := tokens.ParseAccess(signRaw(t, jwt.SigningMethodHS256, testKey, validClaims(clock))); err != nil {
		t.Fatalf("baseline token rejected: %v", err)
	}

	cases := map[string]string{
		"empty":         "",
		"garbage":       "not.a.token",
		"alg none":      signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, validClaims(clock)),
		"alg HS512":     signRaw(t, jwt.SigningMethodHS512, testKey, validClaims(clock)),
		"alg HS384":     signRaw(t, jwt.SigningMethodHS384, testKey, validClaims(clock)),
		"wrong key":     signRaw(t, jwt.SigningMethodHS256, otherKey, validClaims(clock)),
		"wrong issuer":  signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { c["iss"] = "other" })),
		"no issuer":     signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { delete(c, "iss") })),
		"no expiry":     signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { delete(c, "exp") })),
		"no audience":   signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { delete(c, "aud") })),
		"two audiences": signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { c["aud"] = []string{AudienceAccess, AudienceEmailVerified} })),
		"sub not id":    signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { c["sub"] = "ada@example.com" })),
		"sub zero":      signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { c["sub"] = "0" })),
		"sub plus":      signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { c["sub"] = "+42" })),
		"not yet valid": signRaw(t, jwt.SigningMethodHS256, testKey, with(func(c jwt.MapClaims) { c["nbf"] = clock.Now().Add(time.Hour).Unix() })),
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := tokens.ParseAccess(tok); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("ParseAccess = %+v, %v; want ErrInvalidToken", got, err)
			}
		})
	}
}

func TestParseRejectsTamperedTokens(t *testing.T) {
	tokens, _ := newTestTokens(t)
	tok, _, err := tokens.IssueAccess(42, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q has %d parts", tok, len(parts))
	}

	// Rewrite the payload to claim another user and an admin role, keeping
	// the original signature.
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	claims["sub"] = "1"
	claims["roles"] = []string{"admin"}
	payload, err = json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	forgedPayload := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]

	// Flip one bit of the signature.
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sig[0] ^= 1
	forgedSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	for name, bad := range map[string]string{
		"payload":   forgedPayload,
		"signature": forgedSig,
		"truncated": tok[:len(tok)-2],
		"no sig":    parts[0] + "." + parts[1] + ".",
	} {
		if _, err := tokens.ParseAccess(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s tampered: ParseAccess error = %v, want ErrInvalidToken", name, err)
		}
	}
}
