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
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
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
	var buf [DigestLen]byte
	return string(AppendDigest(buf[:0], secret))
}

// DigestLen is the length of a digest.
const DigestLen = 2 * sha256.Size

// AppendDigest appends Digest(secret) to dst: a caller that only looks the
// digest up (a map index of string(b) does not allocate) can keep it on
// its stack.
func AppendDigest(dst []byte, secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return hex.AppendEncode(dst, sum[:])
}

// Token is a bearer token about to be created: its checked name and
// expiry, and its secret.
type Token struct {
	Name string
	// Plaintext is the whole secret, shown once and never stored.
	Plaintext string
	// Display is its start, kept to tell tokens apart: the kind's
	// prefix and eight characters.
	Display   string
	ExpiresAt *time.Time
}

// MaxTokenName is the longest name of a bearer token, personal or an
// app's, in characters: the width of both tables' name columns.
const MaxTokenName = 100

// NewToken checks a token's name (1 to MaxTokenName printable characters,
// as names.LabelProblem says) and expiry (none, or after now), then makes
// its secret, which starts with prefix. Bad input gives a
// *errs.Validation.
func NewToken(prefix, name string, expires *time.Time, now time.Time) (Token, error) {
	name = strings.TrimSpace(name)
	var v errs.Validation
	if p := names.LabelProblem(name, MaxTokenName); p != "" {
		v.Add("name", p)
	}
	if expires != nil && !expires.After(now) {
		v.Add("expires_at", "must be in the future")
	}
	if err := v.Err(); err != nil {
		return Token{}, err
	}
	secret, err := New()
	if err != nil {
		return Token{}, fmt.Errorf("make token secret: %w", err)
	}
	t := Token{Name: name, Plaintext: prefix + secret}
	t.Display = t.Plaintext[:len(prefix)+8]
	if expires != nil {
		e := expires.UTC().Truncate(time.Microsecond)
		t.ExpiresAt = &e
	}
	return t, nil
}

// Active reports whether a token revoked at revoked (nil: never) that
// expires at expires (nil: never) can be used at now.
func Active(revoked, expires *time.Time, now time.Time) bool {
	return revoked == nil && (expires == nil || now.Before(*expires))
}
