package buckets

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Match says which keys an Override applies to.
type Match string

// Kinds of Override.
const (
	// MatchExact applies to the one key equal to Override.Key.
	MatchExact Match = "exact"
	// MatchPrefix applies to every key that starts with Override.Key.
	MatchPrefix Match = "prefix"
)

// Limits of keys and overrides.
const (
	// MaxKeyLength is the longest caller key, in bytes. Callers may pass
	// any bytes; keys never reach Redis key names unhashed.
	MaxKeyLength = 256
	// MaxPrefixOverrides caps the prefix overrides of one bucket: every
	// acquire looks up each distinct prefix length present, and every
	// prefix override is copied into each of the bucket's Redis key groups.
	// Prefixes describe classes of keys ("premium:"), so a few suffice;
	// exact overrides are not capped.
	MaxPrefixOverrides = 1000
)

// Override is a different limit for some keys of a keyed bucket: one exact
// key, or every key starting with a prefix. For a key, the most specific
// override wins: an exact one, else the longest matching prefix, else the
// bucket's own limit.
type Override struct {
	ID int64 `json:"id"`
	// Bucket is the name of the keyed bucket.
	Bucket string `json:"bucket"`
	Match  Match  `json:"match"`
	// Key is the exact key or the prefix: 1 to MaxKeyLength bytes of
	// UTF-8 text without control characters (so that it can be typed,
	// shown and audited as is). Fixed when the override is created.
	Key         string `json:"key"`
	Description string `json:"description"`
	// MaxPermits and Rate are the limit of the matching keys.
	MaxPermits int64 `json:"max_permits"`
	Rate       Rate  `json:"rate"`
	// Shadow puts the matching keys in shadow mode: where this override's
	// limit would deny, the caller is allowed and told it would have been
	// denied. The bucket's own Shadow covers every key, overrides included.
	Shadow bool `json:"shadow"`
	// Kind is the kind of the bucket, which decides whether the override
	// has a Rate; empty is KindBucket. The Store sets it from the bucket.
	Kind Kind `json:"-"`
	database.Stamp
}

// Validate checks every field a user sets and returns a *errs.Validation
// naming each invalid one (bucket, match, key, description, max_permits,
// rate), or nil. Only the override of a token bucket (Kind) has a rate.
func (o *Override) Validate() error {
	var v errs.Validation
	if r := names.Problem(o.Bucket); r != "" {
		v.Add("bucket", r)
	}
	if o.Match != MatchExact && o.Match != MatchPrefix {
		v.Add("match", `must be "exact" or "prefix"`)
	}
	if r := KeyProblem(o.Key); r != "" {
		v.Add("key", r)
	}
	checkLimit(&v, o.Kind.Or(), o.Description, o.MaxPermits, o.Rate)
	return v.Err()
}

// KeyProblem says why s cannot be the key of an override, or "".
func KeyProblem(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxKeyLength:
		return fmt.Sprintf("must be at most %d bytes", MaxKeyLength)
	case !utf8.ValidString(s):
		return "must be valid UTF-8 text"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	return ""
}

// Matches reports whether o applies to key.
func (o *Override) Matches(key string) bool {
	if o.Match == MatchExact {
		return key == o.Key
	}
	return strings.HasPrefix(key, o.Key)
}

// MostSpecific returns the override among os that applies to key: an
// exact one, else the longest matching prefix; nil when none matches. It
// is the rule the acquire script applies in Redis.
func MostSpecific(os []*Override, key string) *Override {
	var best *Override
	for _, o := range os {
		if !o.Matches(key) {
			continue
		}
		switch {
		case best == nil:
			best = o
		case o.Match == MatchExact:
			return o
		case best.Match == MatchPrefix && len(o.Key) > len(best.Key):
			best = o
		}
	}
	return best
}

// CheckVersion refuses a change based on version based of o (0: whatever
// is stored) with an *errs.Stale carrying o.
func (o *Override) CheckVersion(based int64) error {
	return errs.CheckVersion(fmt.Sprintf("override %d of bucket %q", o.ID, o.Bucket), o, o.Version, based)
}

// CheckFixed refuses n, a change of old, when it changes its match or
// key: they say which keys it covers, so another set of keys is another
// override. It is a *errs.Validation naming each.
func (n *Override) CheckFixed(old *Override) error {
	var v errs.Validation
	const why = "cannot be changed; delete the override and create another"
	if n.Match != old.Match {
		v.Add("match", why)
	}
	if n.Key != old.Key {
		v.Add("key", why)
	}
	return v.Err()
}
