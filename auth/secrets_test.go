package auth

import (
	"encoding/base64"
	"regexp"
	"testing"
)

func TestNewOpaqueToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := NewOpaqueToken()
		if err != nil {
			t.Fatal(err)
		}
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(b) != 32 {
			t.Fatalf("token %q: decoded %d bytes, err %v; want 32 bytes of base64url", tok, len(b), err)
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
	}
}

func TestHashSecret(t *testing.T) {
	// Known SHA-256 of "abc".
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashSecret("abc"); got != want {
		t.Errorf("HashSecret(abc) = %s, want %s", got, want)
	}
	if HashSecret("abd") == want {
		t.Error("different secrets hash the same")
	}
}

func TestEqualSecret(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"123456", "123456", true},
		{"", "", true},
		{"123456", "123457", false},
		{"123456", "12345", false},
		{"123456", "", false},
	}
	for _, c := range cases {
		if got := EqualSecret(c.a, c.b); got != c.want {
			t.Errorf("EqualSecret(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestNewCode(t *testing.T) {
	const n = 5000
	format := regexp.MustCompile(`^[0-9]{6}$`)
	var counts [6][10]int
	distinct := map[string]bool{}
	leadingZero := 0
	for range n {
		c, err := NewCode()
		if err != nil {
			t.Fatal(err)
		}
		if !format.MatchString(c) {
			t.Fatalf("code %q is not 6 digits", c)
		}
		distinct[c] = true
		if c[0] == '0' {
			leadingZero++
		}
		for i := range 6 {
			counts[i][c[i]-'0']++
		}
	}
	if leadingZero == 0 {
		t.Error("no code starts with 0; leading zeros are lost")
	}
	// Each digit in each position is expected n/10 = 500 times (sd ≈ 21);
	// ±150 is over 7 standard deviations, so this only fails on real bias.
	for pos, digits := range counts {
		for d, got := range digits {
			if got < 350 || got > 650 {
				t.Errorf("digit %d at position %d seen %d times in %d codes, want about 500", d, pos, got, n)
			}
		}
	}
	// Among 5000 draws from a million, about 12 collisions are expected.
	if len(distinct) < n-60 {
		t.Errorf("only %d distinct codes in %d", len(distinct), n)
	}
}
