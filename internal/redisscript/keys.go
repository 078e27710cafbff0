// Package redisscript is the Redis side of Sluice: the key and field names
// of a bucket hash, and the Lua scripts that write config (Apply, Delete),
// read it (Read) and take tokens (the acquire script). It is the only Go
// code that spells those names; docs/protocol.md describes the same
// contract for clients in other languages.
package redisscript

import (
	"strings"

	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// DefaultPrefix is the key prefix of the zero Keyspace.
const DefaultPrefix = "sluice:"

// Hash fields of a bucket. The config fields are written only by Apply;
// the state fields only by the acquire script (and by Apply when a bucket
// is created or its capacity shrinks).
const (
	// FieldID is the MySQL id of the bucket; a recreated bucket has a larger one.
	FieldID = "id"
	// FieldVersion is the MySQL row version, increasing per id.
	FieldVersion = "version"
	// FieldCapacity is the most tokens the bucket holds, an integer 1..1e9.
	FieldCapacity = "capacity"
	// FieldPermits is the permits added per period, a canonical decimal ("0.5").
	FieldPermits = "permits"
	// FieldPeriod is the refill period in whole seconds.
	FieldPeriod = "period"
	// FieldApps lists the allowed apps as ",a,b,".
	FieldApps = "apps"
	// FieldLeaseMillis is how long a lease of the bucket lives, in
	// milliseconds; absent or 0 when the bucket is not in lease mode.
	FieldLeaseMillis = "lease_ms"
	// FieldState is a token bucket's state in the binary form: its tokens
	// and the time of their last refill (microseconds of Redis TIME), two
	// little-endian doubles. A hash without it keeps the decimal form,
	// FieldTokens and FieldTS (docs/protocol.md, "The bucket state").
	FieldState = "st"
	// FieldTokens is the fractional token count at FieldTS ("%.17g"), in
	// the decimal form of the state.
	FieldTokens = "tokens"
	// FieldTS is the time of the last refill in microseconds of Redis
	// TIME, in the decimal form of the state.
	FieldTS = "ts"
	// FieldShadow is "1" for a bucket in shadow mode: it decides and
	// counts as usual but never refuses, answering WouldDeny instead.
	// Absent means "0". Written by Apply.
	FieldShadow = "shadow"
	// FieldKind is the kind of the limit: "bucket", "concurrency" or
	// "quota". Absent means "bucket". Written by Apply.
	FieldKind = "kind"
	// FieldBounds is a quota's table: the Unix seconds at which its
	// periods start, 10 digits each, ascending (package quota). Written by
	// Apply and refreshed by the sync worker.
	FieldBounds = "bounds"
	// FieldUsed and FieldPeriodStart are a plain quota's count and the
	// start (Unix seconds) of the period it counts; a count of another
	// period is 0. Written by the acquire scripts.
	FieldUsed        = "used"
	FieldPeriodStart = "pstart"
	// FieldPeriodEnd is the end (Unix seconds) of the period FieldUsed
	// counts, written with it by the acquire script so that the next
	// acquire in the same period needs no look into the table; Apply
	// writes 0 (none) whenever the table may have changed.
	FieldPeriodEnd = "pend"
	// FieldReserve is the bucket's reserve: tokens that only requests
	// marked critical may take, a whole number below the capacity; absent
	// means "0" (none). Written by Apply.
	FieldReserve = "reserve"
	// FieldPacked is the packed limit: the kind (0 token bucket, 1 quota,
	// 2 concurrency), capacity, permits in millionths, period, lease_ms,
	// shadow and reserve once more, as seven little-endian float64, which
	// the acquire reads as one field (docs/protocol.md, "The packed
	// limit"). Written by Apply where Redis's Lua has the struct library;
	// absent, the acquire reads the fields.
	FieldPacked = "cfg"
)

// TombstoneTTLSeconds is how long a tombstone outlives its bucket: long
// enough to outlast any queued or retried event of the deleted incarnation.
const TombstoneTTLSeconds = 7 * 24 * 3600

// Keyspace names the Redis keys of buckets. The zero value uses
// DefaultPrefix. Keys are hash-tagged on the bucket name, so the hash and
// the tombstone of a bucket live in the same Redis Cluster slot.
type Keyspace struct {
	// Prefix is put before every key; empty means DefaultPrefix.
	Prefix string
}

func (ks Keyspace) prefix() string {
	if ks.Prefix == "" {
		return DefaultPrefix
	}
	return ks.Prefix
}

// Bucket returns the key of the hash of bucket name: "<prefix>{<name>}".
func (ks Keyspace) Bucket(name string) string {
	return ks.prefix() + "{" + name + "}"
}

// Tombstone returns the key that remembers a deleted bucket's largest id:
// "<prefix>{<name>}:deleted".
func (ks Keyspace) Tombstone(name string) string {
	return ks.prefix() + "{" + name + "}:deleted"
}

// SyncMarker returns the key the sync worker writes at each reconcile and
// whose absence tells it that Redis lost its data: "<prefix>sync:marker".
// It sits beside the bucket hashes but outside their SCAN pattern.
func (ks Keyspace) SyncMarker() string { return ks.prefix() + "sync:marker" }

// Pattern returns the SCAN MATCH pattern of bucket hashes (not tombstones).
// Glob characters of the prefix are escaped.
func (ks Keyspace) Pattern() string {
	p := ks.prefix()
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	b.WriteString("{*}")
	return b.String()
}

// NameOf returns the bucket name of a bucket hash key, and false for any
// other key (a tombstone, another prefix, a malformed name).
func (ks Keyspace) NameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, ks.prefix())
	if !ok || len(rest) < 3 || rest[0] != '{' || rest[len(rest)-1] != '}' {
		return "", false
	}
	name := rest[1 : len(rest)-1]
	if !ValidName(name) {
		return "", false
	}
	return name, true
}

// ValidName reports whether s is a valid app or bucket name:
// ^[a-z0-9][a-z0-9._-]{0,62}$. It does not allocate.
func ValidName(s string) bool { return names.Valid(s) }
