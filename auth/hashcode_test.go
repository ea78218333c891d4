package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
)

// A code's hash depends on the server's key: the same key gives the same
// hash (so a code verifies), another key another hash (so a dump, without
// the key, says nothing of the code).
func TestHashCodeIsKeyed(t *testing.T) {
	one, err := NewTokens(bytes.Repeat([]byte("a"), MinKeyLen), nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewTokens(bytes.Repeat([]byte("a"), MinKeyLen), nil)
	if err != nil {
		t.Fatal(err)
	}
	// One bit away from one's key: the whole key counts, not a prefix.
	otherKey := bytes.Repeat([]byte("a"), MinKeyLen)
	otherKey[MinKeyLen-1] ^= 1
	other, err := NewTokens(otherKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"000000", "042917", "999999"} {
		h := one.HashCode(code)
		if got := again.HashCode(code); got != h {
			t.Errorf("HashCode(%q) under the same key: %s, then %s", code, h, got)
		}
		if got := other.HashCode(code); got == h {
			t.Errorf("HashCode(%q) is %s under two different keys", code, h)
		}
		if len(h) != 2*sha256.Size {
			t.Errorf("HashCode(%q) = %q: want %d hex digits", code, h, 2*sha256.Size)
		}
	}
	if one.HashCode("042917") == one.HashCode("042918") {
		t.Error("two codes have the same hash")
	}
}

// A dump of code hashes cannot be reversed by hashing every possible code
// without the key: no stored hash is among the plain SHA-256 of the 10^6
// six-digit codes.
func TestHashCodeIsNotInTheUnkeyedDictionary(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes a million codes")
	}
	tokens, err := NewTokens(testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	dictionary := make(map[string]string, 1_000_000)
	for n := range 1_000_000 {
		code := fmt.Sprintf("%06d", n)
		sum := sha256.Sum256([]byte(code))
		dictionary[hex.EncodeToString(sum[:])] = code
	}
	for n := 0; n < 1_000_000; n += 9973 { // a prime step: codes across the range
		code := fmt.Sprintf("%06d", n)
		if found, ok := dictionary[tokens.HashCode(code)]; ok {
			t.Fatalf("HashCode(%q) is the unkeyed SHA-256 of %q", code, found)
		}
	}
}
