// Package secrets makes and digests the bearer secrets of the product:
// browser sessions, personal and app API tokens, known-device tokens. A
// secret is 256 random bits, so a fast hash of it is as safe to store as a
// slow one and costs nothing on every lookup.
package secrets

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// Len is the number of random bytes in a secret.
const Len = 32

// New returns Len random bytes, base64url without padding.
func New() (string, error) {
	b := make([]byte, Len)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Digest is the stored form of a secret: its SHA-256 in hex.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
