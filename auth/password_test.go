package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

var ctx = context.Background()

var phcPattern = regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

func TestHashPasswordRoundTrip(t *testing.T) {
	const pw = "correct horse battery staple ✓"
	phc, err := HashPassword(ctx, pw)
	if err != nil {
		t.Fatal(err)
	}
	if !phcPattern.MatchString(phc) {
		t.Fatalf("HashPassword = %q, not the expected PHC form", phc)
	}

	ok, err := VerifyPassword(ctx, phc, pw)
	if err != nil || !ok {
		t.Errorf("VerifyPassword(right password) = %v, %v; want true, nil", ok, err)
	}
	for _, wrong := range []string{"", "correct horse battery staple", pw + " "} {
		ok, err := VerifyPassword(ctx, phc, wrong)
		if err != nil || ok {
			t.Errorf("VerifyPassword(%q) = %v, %v; want false, nil", wrong, ok, err)
		}
	}

	// A fresh salt each time: the same password never hashes the same.
	phc2, err := HashPassword(ctx, pw)
	if err != nil {
		t.Fatal(err)
	}
	if phc2 == phc {
		t.Error("two hashes of the same password are equal; salt is not random")
	}
}

// Parameters come from the stored string, so hashes made with other
// settings keep verifying after the defaults change.
func TestVerifyPasswordUsesStoredParameters(t *testing.T) {
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte("pw"), salt, 1, 64, 2, 20)
	enc := base64.RawStdEncoding.EncodeToString
	phc := fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=2$%s$%s", enc(salt), enc(key))

	if ok, err := VerifyPassword(ctx, phc, "pw"); err != nil || !ok {
		t.Errorf("VerifyPassword(right) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := VerifyPassword(ctx, phc, "px"); err != nil || ok {
		t.Errorf("VerifyPassword(wrong) = %v, %v; want false, nil", ok, err)
	}
}

func TestVerifyPasswordMalformed(t *testing.T) {
	salt := base64.RawStdEncoding.EncodeToString([]byte("0123456789abcdef"))
	hash := base64.RawStdEncoding.EncodeToString(make([]byte, 32))
	ok := func(params string) string { return "$argon2id$v=19$" + params + "$" + salt + "$" + hash }
	// Sanity: the template itself parses.
	if _, err := parsePHC(ok("m=64,t=1,p=1")); err != nil {
		t.Fatalf("template does not parse: %v", err)
	}

	cases := map[string]string{
		"empty":               "",
		"garbage":             "not a hash",
		"only prefix":         "$argon2id$",
		"bcrypt":              "$2b$10$abcdefghijklmnopqrstuuN1d7JgWl9k1qgkjHtJ5JqYkQn1w5Nha",
		"argon2i":             strings.Replace(ok("m=64,t=1,p=1"), "argon2id", "argon2i", 1),
		"no leading dollar":   strings.TrimPrefix(ok("m=64,t=1,p=1"), "$"),
		"version 16":          strings.Replace(ok("m=64,t=1,p=1"), "v=19", "v=16", 1),
		"missing version":     "$argon2id$m=64,t=1,p=1$" + salt + "$" + hash,
		"missing hash":        "$argon2id$v=19$m=64,t=1,p=1$" + salt,
		"extra field":         ok("m=64,t=1,p=1") + "$x",
		"params out of order": ok("t=1,m=64,p=1"),
		"two params":          ok("m=64,t=1"),
		"four params":         ok("m=64,t=1,p=1,k=2"),
		"m not a number":      ok("m=abc,t=1,p=1"),
		"negative t":          ok("m=64,t=-1,p=1"),
		"plus sign":           ok("m=+64,t=1,p=1"),
		"leading zero":        ok("m=064,t=1,p=1"),
		"empty m":             ok("m=,t=1,p=1"),
		"t zero":              ok("m=64,t=0,p=1"),
		"p zero":              ok("m=64,t=1,p=0"),
		"p too big":           ok("m=4096,t=1,p=256"),
		"m below 8p":          ok("m=15,t=1,p=2"),
		"m huge":              ok("m=4294967295,t=1,p=1"),
		"m overflow":          ok("m=99999999999,t=1,p=1"),
		"t huge":              ok("m=64,t=1000000,p=1"),
		"salt not base64":     "$argon2id$v=19$m=64,t=1,p=1$!!!!$" + hash,
		"salt padded":         "$argon2id$v=19$m=64,t=1,p=1$" + salt + "==$" + hash,
		"salt too short":      "$argon2id$v=19$m=64,t=1,p=1$YWJj$" + hash,
		"hash not base64":     "$argon2id$v=19$m=64,t=1,p=1$" + salt + "$%%%",
		"hash empty":          "$argon2id$v=19$m=64,t=1,p=1$" + salt + "$",
		"hash too short":      "$argon2id$v=19$m=64,t=1,p=1$" + salt + "$YWJj",
	}
	for name, phc := range cases {
		t.Run(name, func(t *testing.T) {
			ok, err := VerifyPassword(ctx, phc, "pw")
			if ok || !errors.Is(err, ErrMalformedHash) {
				t.Errorf("VerifyPassword(%q) = %v, %v; want false, ErrMalformedHash", phc, ok, err)
			}
		})
	}
}

// DummyVerify must cost about what a real verification costs; a loose
// bound keeps this stable on noisy machines while catching a no-op.
func TestDummyVerifyTakesComparableTime(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	phc, err := HashPassword(ctx, "pw")
	if err != nil {
		t.Fatal(err)
	}
	// The fastest of three runs each: a pause of the machine during one run
	// does not count.
	fastest := func(run func()) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 3 {
			start := time.Now()
			run()
			best = min(best, time.Since(start))
		}
		return best
	}
	real := fastest(func() {
		if _, err := VerifyPassword(ctx, phc, "guess"); err != nil {
			t.Fatal(err)
		}
	})
	dummy := fastest(func() { _ = DummyVerify(ctx, "guess") })
	if dummy < real/4 {
		t.Errorf("DummyVerify took %v, a real verification %v", dummy, real)
	}
}

// A check that finds every slot taken for longer than its wait fails with
// ErrBusy, having computed nothing; one whose context ends first fails with
// the context's error. Both kinds of check, and a hash, wait alike.
func TestPasswordChecksThatFindNoSlotGiveUp(t *testing.T) {
	phc, err := HashPassword(ctx, "pw")
	if err != nil {
		t.Fatal(err)
	}
	BusyArgonInTests(t, 20*time.Millisecond)
	if ok, err := VerifyPassword(ctx, phc, "pw"); ok || !errors.Is(err, ErrBusy) {
		t.Errorf("VerifyPassword with every slot taken = %v, %v; want false, ErrBusy", ok, err)
	}
	if err := DummyVerify(ctx, "pw"); !errors.Is(err, ErrBusy) {
		t.Errorf("DummyVerify with every slot taken = %v; want ErrBusy", err)
	}
	if got, err := HashPassword(ctx, "pw"); got != "" || !errors.Is(err, ErrBusy) {
		t.Errorf("HashPassword with every slot taken = %q, %v; want ErrBusy", got, err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := VerifyPassword(gone, phc, "pw"); !errors.Is(err, context.Canceled) {
		t.Errorf("VerifyPassword on an ended context = %v; want context.Canceled", err)
	}
}
