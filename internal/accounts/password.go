package accounts

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Password length limits. The upper bound keeps hashing cost bounded and
// the form field sane; it counts bytes, the lower one characters.
const (
	MinPassword = 10
	MaxPassword = 200
)

// PasswordProblem says why p cannot be a password, or returns "" when it can.
func PasswordProblem(p string) string {
	switch {
	case utf8.RuneCountInString(p) < MinPassword:
		return fmt.Sprintf("must be at least %d characters", MinPassword)
	case len(p) > MaxPassword:
		return fmt.Sprintf("must be at most %d bytes", MaxPassword)
	}
	return ""
}

// HashParams are Argon2id parameters. They are stored with each hash, so
// changing them affects new hashes only; Authenticate rehashes a password
// with the store's parameters when they differ from the stored ones.
type HashParams struct {
	Time    uint32 // passes over memory
	Memory  uint32 // KiB
	Threads uint8
}

// DefaultHashParams follow the OWASP guidance for Argon2id (at least
// 46 MiB with one pass): 64 MiB, one pass, two lanes; about 0.1 s on one
// core of a current server.
var DefaultHashParams = HashParams{Time: 1, Memory: 64 * 1024, Threads: 2}

const (
	saltLen = 16
	keyLen  = 32
)

// hasher hashes and checks passwords, bounding how many hashes run at once:
// each takes HashParams.Memory, and a burst of sign-ins must not exhaust it.
type hasher struct {
	params HashParams
	slots  chan struct{}

	dummyOnce sync.Once
	dummy     string
}

func newHasher(p HashParams) *hasher {
	return &hasher{params: p, slots: make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))}
}

func (h *hasher) acquire(ctx context.Context) error {
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait to hash a password: %w", ctx.Err())
	}
}

func (h *hasher) release() { <-h.slots }

// hash returns the encoded Argon2id hash of password with a fresh salt, in
// the usual form $argon2id$v=19$m=...,t=...,p=...$salt$key.
func (h *hasher) hash(ctx context.Context, password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("read salt: %w", err)
	}
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	return encode(h.params, salt, argon2.IDKey([]byte(password), salt, h.params.Time, h.params.Memory, h.params.Threads, keyLen)), nil
}

// verify reports whether password matches encoded, and whether encoded
// was made with other parameters than the hasher's (so it should be
// replaced). A malformed hash matches nothing.
func (h *hasher) verify(ctx context.Context, password, encoded string) (ok, outdated bool, err error) {
	p, salt, key, perr := decode(encoded)
	if perr != nil {
		// Spend the usual time anyway: the answer must not tell apart
		// accounts with a broken hash.
		p, salt, key = h.params, make([]byte, saltLen), make([]byte, keyLen)
	}
	if err := h.acquire(ctx); err != nil {
		return false, false, err
	}
	defer h.release()
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(key)))
	ok = perr == nil && subtle.ConstantTimeCompare(got, key) == 1
	return ok, p != h.params, nil
}

// burn spends the time of one verification, for sign-ins with an unknown
// user name, so that timing does not reveal which names exist.
func (h *hasher) burn(ctx context.Context, password string) error {
	h.dummyOnce.Do(func() {
		salt := make([]byte, saltLen)
		_, _ = rand.Read(salt)
		h.dummy = encode(h.params, salt, make([]byte, keyLen))
	})
	_, _, err := h.verify(ctx, password, h.dummy)
	return err
}

var b64 = base64.RawStdEncoding

func encode(p HashParams, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

var errBadHash = errors.New("malformed password hash")

// Bounds on stored parameters, so that a corrupted row cannot make a
// sign-in allocate without limit.
const (
	maxMemory = 1 << 20 // 1 GiB in KiB
	maxTime   = 20
)

func decode(s string) (HashParams, []byte, []byte, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return HashParams{}, nil, nil, errBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return HashParams{}, nil, nil, errBadHash
	}
	var p HashParams
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil {
		return HashParams{}, nil, nil, errBadHash
	}
	if p.Time == 0 || p.Time > maxTime || p.Memory < 8*uint32(p.Threads) || p.Memory > maxMemory || p.Threads == 0 {
		return HashParams{}, nil, nil, errBadHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return HashParams{}, nil, nil, errBadHash
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return HashParams{}, nil, nil, errBadHash
	}
	return p, salt, key, nil
}
