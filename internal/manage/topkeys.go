package manage

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/usage"
)

// TopKeys returns the keys of a keyed bucket the caller may see denied
// most and taking most over window w (usage.Hour or usage.Day), most
// first. See usage.Reader.TopKeys for the counts' error bound.
func (s *Service) TopKeys(ctx context.Context, c Caller, bucket string, w usage.Window, limit int) (usage.TopKeys, error) {
	b, err := s.keyedFor(ctx, c, bucket)
	if err != nil {
		return usage.TopKeys{}, err
	}
	if s.usage == nil {
		return usage.TopKeys{}, ErrNoRedis
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return s.usage.TopKeys(ctx, b.Name, w, limit)
}

// keyedFor is bucketFor with the view action, for a keyed bucket only.
func (s *Service) keyedFor(ctx context.Context, c Caller, bucket string) (*buckets.Bucket, error) {
	b, err := s.bucketFor(ctx, c, bucket, rbac.ActionView)
	if err != nil {
		return nil, err
	}
	if !b.Keyed {
		return nil, errs.Invalid("bucket", fmt.Sprintf("%q is not a keyed bucket; only keyed buckets have keys", b.Name))
	}
	return b, nil
}

// KeyState is the live state of one key of a keyed bucket: the limit that
// applies to it and what it holds, by the bucket's kind: its tokens (a
// token bucket), its slots in use (a concurrency limit) or its count this
// period (a quota).
type KeyState struct {
	Key string
	// Kind is the bucket's kind (never empty).
	Kind buckets.Kind
	// Override is the override that applies to the key (exact, else the
	// longest matching prefix); nil when the key gets the bucket's limit.
	Override *buckets.Override
	// MaxPermits and Rate are the limit that applies: a token bucket's
	// capacity and rate, a concurrency limit's slots or a quota's count
	// per period (Rate zero for both).
	MaxPermits int64
	Rate       buckets.Rate
	// Shadow tells that the key's acquires are decided in shadow mode.
	Shadow bool
	// Reserve is the tokens of the key kept for critical requests: the
	// bucket's, or its share of the override's capacity.
	Reserve int64
	// Tokens is what the key holds at RedisTime; Full tells it is full
	// (idle keys have no state in Redis), FullAt when it will be. For the
	// other kinds, Tokens is what the key may still take (free slots, the
	// rest of its quota), and FullAt when all of it is back (the last
	// slot's expiry, the reset), so that a reader of tokens is not misled.
	Tokens float64
	Full   bool
	FullAt time.Time
	// InUse is, for a concurrency limit, the key's slots held at
	// RedisTime, the first of them expiring at NextExpiry (zero: none).
	InUse      int64
	NextExpiry time.Time
	// Used is, for a quota, the key's count in the period containing
	// RedisTime, PeriodStart and PeriodEnd that period (the reset); the
	// period is zero when the table in Redis does not cover RedisTime.
	Used                   int64
	PeriodStart, PeriodEnd time.Time
	RedisTime              time.Time
}

// ReserveLeft is how many of the key's reserved tokens it holds.
func (ks KeyState) ReserveLeft() int64 {
	return max(0, min(ks.Reserve, int64(math.Floor(ks.Tokens))))
}

// left sets what a key of a concurrency limit or a quota may still take,
// used of its MaxPermits being taken, as Tokens, and when all of it is
// back, back (unless none is taken).
func (ks *KeyState) left(used int64, back time.Time) {
	ks.Tokens, ks.Full = float64(max(0, ks.MaxPermits-used)), used == 0
	if !ks.Full {
		ks.FullAt = back
	}
}

// KeyState returns the live state of key in keyed bucket bucket, for
// anyone who may see the bucket. The limit comes from MySQL (the override
// rule of buckets.MostSpecific, as the acquire script applies it), the
// tokens, slots or count from the key's state in Redis.
func (s *Service) KeyState(ctx context.Context, c Caller, bucket, key string) (*buckets.Bucket, KeyState, error) {
	b, err := s.keyedFor(ctx, c, bucket)
	if err != nil {
		return nil, KeyState{}, err
	}
	if !redisscript.ValidKey(key) {
		return nil, KeyState{}, errs.Invalid("key", fmt.Sprintf("must be 1 to %d bytes", redisscript.MaxKeyLength))
	}
	o, err := s.buckets.EffectiveOverride(ctx, b.Name, key)
	if err != nil {
		return nil, KeyState{}, err
	}
	ks := KeyState{Key: key, Kind: b.Kind.Or(), Override: o, MaxPermits: b.MaxPermits, Rate: b.Rate, Shadow: b.Shadow,
		Reserve: b.Reserve}
	if o != nil {
		ks.MaxPermits, ks.Rate, ks.Shadow = o.MaxPermits, o.Rate, b.Shadow || o.Shadow
		ks.Reserve = b.ReserveOf(o.MaxPermits)
	}
	if s.rdb == nil {
		return b, ks, ErrNoRedis
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if ks.Kind == buckets.KindConcurrency {
		sl, err := redisscript.ReadSlots(rctx, s.rdb, s.ks, b.Name, key)
		if err != nil {
			return b, ks, fmt.Errorf("read slots of a key of %q: %w: %w", b.Name, errs.ErrUnavailable, err)
		}
		ks.RedisTime, ks.InUse, ks.NextExpiry = sl.Now, sl.InUse, sl.NextExpiry
		ks.left(sl.InUse, sl.LastExpiry)
		return b, ks, nil
	}
	st, err := redisscript.ReadKeyState(rctx, s.rdb, s.ks, b.Name, key)
	if err != nil {
		return b, ks, fmt.Errorf("read state of a key of %q: %w: %w", b.Name, errs.ErrUnavailable, err)
	}
	ks.RedisTime = st.Now
	if ks.Kind == buckets.KindQuota {
		ks.Used, ks.PeriodStart, ks.PeriodEnd, _ = st.Quota(b.ID)
		ks.left(ks.Used, ks.PeriodEnd)
		return b, ks, nil
	}
	ks.Tokens = st.Tokens(b.ID, ks.MaxPermits, ks.Rate.PerSecond())
	ks.Full = ks.Tokens >= float64(ks.MaxPermits)
	if !ks.Full {
		ks.FullAt = st.FullAt
	}
	return b, ks, nil
}
