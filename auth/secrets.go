package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
)

// opaqueTokenBytes is the entropy of opaque tokens: 256 bits, far beyond
// guessing, so a fast unsalted hash is enough to store them.
const opaqueTokenBytes = 32

// NewOpaqueToken returns 32 random bytes as unpadded base64url (43
// characters), for refresh tokens and similar bearer secrets.
func NewOpaqueToken() (string, error) {
	b := make([]byte, opaqueTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("auth: reading random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// HashSecret returns the hex SHA-256 of s. Store this instead of a
// high-entropy secret (refresh or verification token) so that a database
// leak does not hand out usable tokens; look secrets up by this value.
// It is not for passwords or short codes: use HashPassword for those.
func HashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var million = big.NewInt(1_000_000)

// NewCode returns a uniformly random 6-digit decimal code such as "042917",
// leading zeros kept, for e-mailed sign-up verification.
func NewCode() (string, error) {
	n, err := rand.Int(rand.Reader, million) // rand.Int rejects, so no modulo bias
	if err != nil {
		return "", fmt.Errorf("auth: reading random code: %w", err)
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// EqualSecret reports whether a and b are equal in time that depends on
// neither their contents nor their lengths (both are hashed first), for
// comparing codes or tokens a client sent with stored ones.
func EqualSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
