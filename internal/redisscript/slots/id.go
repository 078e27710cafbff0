package slots

import (
	"encoding/base64"
	"encoding/binary"
	"math/rand/v2"
)

// NewID returns a random slot id: 128 bits in 22 base64url characters,
// within the protocol's id format, so that two takes never share one.
func NewID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return base64.RawURLEncoding.EncodeToString(b[:])
}
