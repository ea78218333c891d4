package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"lectern/admit"
)

// Argon2id parameters for new hashes (OWASP's minimum recommendation for
// argon2id). Existing hashes keep the parameters recorded in their PHC
// string, so these can be raised later without invalidating stored passwords.
const (
	argonMemoryKiB = 19 * 1024 // 19 MiB
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// Bounds accepted when reading a stored PHC string. They stop a corrupted or
// hostile row from making verification allocate gigabytes or spin for
// minutes, and keep argon2 away from inputs it panics on.
const (
	maxArgonMemoryKiB = 1 << 20 // 1 GiB
	maxArgonTime      = 64
	minArgonSaltLen   = 8 // the argon2 spec's minimum
	maxArgonSaltLen   = 64
	minArgonKeyLen    = 16
	maxArgonKeyLen    = 128
)

// ErrMalformedHash is wrapped by the error VerifyPassword returns when the
// stored string is not a PHC argon2id string it can use.
var ErrMalformedHash = errors.New("malformed password hash")

var b64 = base64.RawStdEncoding.Strict()

// The cost of new hashes and of DummyVerify: the constants above, except in
// a test binary that asked for UseCheapHashesInTests.
var hashMemoryKiB, hashTime uint32 = argonMemoryKiB, argonTime

// UseCheapHashesInTests makes new hashes, and DummyVerify, cost argon2id's
// least (8 KiB, one pass). It is for a test binary that signs up and logs in
// many users, where the real cost under the race detector was most of its
// CPU (the api package's suite: 62%). Verification reads the parameters
// from each stored hash, so it is unaffected. Call it before any test runs
// (TestMain). Outside a test binary it panics: no server can be made cheap.
func UseCheapHashesInTests() {
	if !testing.Testing() {
		panic("auth: UseCheapHashesInTests outside a test binary")
	}
	hashMemoryKiB, hashTime = 8, 1
}

// Each argon2id computation holds its memory (19 MiB for a hash made now)
// for as long as it runs, tens of milliseconds of one core. The limits per
// e-mail and per client address bound how often one client gets a check,
// not how many run at once across clients (an IPv6 /48 holds 65 536 /64
// buckets): argonSlots does, one a core (a computation is single-threaded)
// and at least two. A check or hash waits for a slot up to MaxArgonWait (or
// its context's end) and then fails with ErrBusy, a 503: more at once would
// not finish sooner on these cores, and would only add memory.
var argonSlots = admit.New(max(2, runtime.GOMAXPROCS(0)), MaxArgonWait, ErrBusy)

// MaxArgonWait bounds the wait for a slot.
const MaxArgonWait = 5 * time.Second

// ErrBusy is returned when no argon2id slot came free within MaxArgonWait.
var ErrBusy = errors.New("auth: too many password checks at once")

// BusyArgonInTests takes every argon2id slot until t ends and shortens the
// wait for one to wait: password checks then fail with ErrBusy after it, as
// under a flood of logins (admit.Slots.HoldAllInTests).
func BusyArgonInTests(t testing.TB, wait time.Duration) { argonSlots.HoldAllInTests(t, wait) }

// HashPassword hashes password with argon2id and a fresh random salt and
// returns it as a PHC string:
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>
//
// with salt and hash in unpadded standard base64. Length or strength rules
// for the password are the caller's business. It fails with ErrBusy when
// no slot came free in time (see argonSlots).
func HashPassword(ctx context.Context, password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: reading salt: %w", err)
	}
	var key []byte
	if err := argonSlots.Do(ctx, func() {
		key = argon2.IDKey([]byte(password), salt, hashTime, hashMemoryKiB, argonThreads, argonKeyLen)
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, hashMemoryKiB, hashTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// VerifyPassword reports whether password matches the PHC string phc made by
// HashPassword. The argon2 parameters are read from phc, so hashes made with
// older parameters keep verifying. A wrong password gives (false, nil); a
// string that cannot be parsed gives an error wrapping ErrMalformedHash, and
// no slot in time ErrBusy.
func VerifyPassword(ctx context.Context, phc, password string) (bool, error) {
	p, err := parsePHC(phc)
	if err != nil {
		return false, err
	}
	var key []byte
	if err := argonSlots.Do(ctx, func() {
		key = argon2.IDKey([]byte(password), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	}); err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(key, p.key) == 1, nil
}

// dummySalt only has to be a valid salt; DummyVerify's result is thrown away.
var dummySalt = make([]byte, argonSaltLen)

// dummyKey is what DummyVerify compares against, so that it does the same
// work as VerifyPassword including the final comparison.
var dummyKey = make([]byte, argonKeyLen)

// DummyVerify spends about as long as VerifyPassword on a hash made with the
// current parameters, and returns nothing. Call it when a login names an
// unknown e-mail address, so that response time does not reveal which
// addresses have accounts. It waits for a slot as a real check does, and
// fails as one would (ErrBusy, or ctx's error).
func DummyVerify(ctx context.Context, password string) error {
	return argonSlots.Do(ctx, func() {
		key := argon2.IDKey([]byte(password), dummySalt, hashTime, hashMemoryKiB, argonThreads, argonKeyLen)
		subtle.ConstantTimeCompare(key, dummyKey)
	})
}

type phcParams struct {
	memory  uint32
	time    uint32
	threads uint8
	salt    []byte
	key     []byte
}

// parsePHC reads "$argon2id$v=19$m=M,t=T,p=P$salt$hash" strictly: fields in
// that order, decimal numbers without signs, unpadded standard base64.
func parsePHC(s string) (phcParams, error) {
	var p phcParams
	bad := func(format string, args ...any) (phcParams, error) {
		return phcParams{}, fmt.Errorf("auth: %w: %s", ErrMalformedHash, fmt.Sprintf(format, args...))
	}
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" {
		return bad("want 5 $-separated fields")
	}
	if parts[1] != "argon2id" {
		return bad("algorithm %q is not argon2id", parts[1])
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return bad("unsupported version field %q", parts[2])
	}
	params := strings.Split(parts[3], ",")
	if len(params) != 3 {
		return bad("want parameters m=,t=,p=")
	}
	var nums [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(params[i], name+"=")
		if !ok {
			return bad("parameter %d is not %s=", i+1, name)
		}
		n, err := parseDecimal(v)
		if err != nil {
			return bad("parameter %s: %v", name, err)
		}
		nums[i] = n
	}
	m, t, threads := nums[0], nums[1], nums[2]
	switch {
	case threads < 1 || threads > 255:
		return bad("p=%d out of range 1..255", threads)
	case t < 1 || t > maxArgonTime:
		return bad("t=%d out of range 1..%d", t, maxArgonTime)
	case m < 8*threads || m > maxArgonMemoryKiB:
		return bad("m=%d out of range %d..%d", m, 8*threads, maxArgonMemoryKiB)
	}
	p.memory, p.time, p.threads = uint32(m), uint32(t), uint8(threads)

	var err error
	if p.salt, err = b64.DecodeString(parts[4]); err != nil {
		return bad("salt is not unpadded base64")
	}
	if len(p.salt) < minArgonSaltLen || len(p.salt) > maxArgonSaltLen {
		return bad("salt length %d out of range %d..%d", len(p.salt), minArgonSaltLen, maxArgonSaltLen)
	}
	if p.key, err = b64.DecodeString(parts[5]); err != nil {
		return bad("hash is not unpadded base64")
	}
	if len(p.key) < minArgonKeyLen || len(p.key) > maxArgonKeyLen {
		return bad("hash length %d out of range %d..%d", len(p.key), minArgonKeyLen, maxArgonKeyLen)
	}
	return p, nil
}

// parseDecimal accepts only plain ASCII digits (no sign, no spaces, no
// leading zeros), so each hash has exactly one spelling.
func parseDecimal(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, errors.New("not a canonical decimal number")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("not a canonical decimal number")
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, errors.New("number too large")
	}
	return n, nil
}
