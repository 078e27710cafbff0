package buckets

import "github.com/sluicehq/sluice/internal/errs"

// Kind is what a limit counts. The zero Kind is KindBucket: every limit
// created before kinds existed is a token bucket.
type Kind string

// The kinds of limit.
const (
	// KindBucket is a token bucket: MaxPermits tokens, refilled at Rate.
	KindBucket Kind = "bucket"
	// KindConcurrency allows at most MaxPermits calls in progress at once:
	// a slot is taken when work starts and released when it ends, and
	// expires after its lease time unless renewed. It has no Rate.
	KindConcurrency Kind = "concurrency"
	// KindQuota admits MaxPermits calls per calendar period in a named
	// time zone, counted exactly and reset at the period's start. It has
	// no Rate.
	KindQuota Kind = "quota"
)

// Kinds lists every kind, in the order forms offer them.
var Kinds = []Kind{KindBucket, KindConcurrency, KindQuota}

// KindRule is what a kind must be, in words.
const KindRule = `must be "bucket", "concurrency" or "quota"`

// Or returns k, or KindBucket when k is empty.
func (k Kind) Or() Kind {
	if k == "" {
		return KindBucket
	}
	return k
}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool {
	return k == KindBucket || k == KindConcurrency || k == KindQuota
}

// Refills reports whether a limit of kind k has a refill Rate. An unknown
// kind is taken for a bucket, so that only the kind is reported wrong.
func (k Kind) Refills() bool { return k != KindConcurrency && k != KindQuota }

// ParseKind reads a kind as forms and flags send it; empty is KindBucket.
// Anything else is a *errs.Validation on kind.
func ParseKind(s string) (Kind, error) {
	k := Kind(s).Or()
	if !k.Valid() {
		return "", errs.Invalid("kind", KindRule)
	}
	return k, nil
}
