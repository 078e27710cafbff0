package redisscript

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// KeyState is what Redis holds about one key of a keyed bucket: the state
// the keyed acquire script writes (the bucket id and full_at, see
// lua/keyed.lua; of a keyed quota, the bucket id, the period start and
// the count) and the Redis clock at the read.
type KeyState struct {
	// Exists is false when the key has no state: it is idle, and its
	// bucket full.
	Exists bool
	// ID is the bucket id the state belongs to (a recreated bucket ignores
	// the state of the old one).
	ID int64
	// FullAt is when the key's bucket is full again.
	FullAt time.Time
	// QuotaStart and QuotaUsed are a keyed quota's state: the start of
	// the period it counts (Unix seconds) and its count (both 0 for a
	// token bucket's state).
	QuotaStart, QuotaUsed int64
	// Bounds is the table of periods of the key's group, for a keyed
	// quota (nil for the other kinds, or a group without one).
	Bounds []int64
	// Now is the Redis clock at this read.
	Now time.Time
}

// ReadKeyState reads the state of key in keyed bucket name and the Redis
// clock, in one pipeline. It writes nothing.
func ReadKeyState(ctx context.Context, rdb redis.Cmdable, ks Keyspace, name, key string) (KeyState, error) {
	if !ValidName(name) || !ValidKey(key) {
		return KeyState{}, fmt.Errorf("read key state: invalid bucket name or key")
	}
	k := ks.Keyed(name, key)
	pipe := rdb.Pipeline()
	get := pipe.Get(ctx, k.State)
	bounds := pipe.HGet(ctx, k.Config, FieldBounds)
	now := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return KeyState{}, fmt.Errorf("read key state of %q: %w", name, err)
	}
	st := KeyState{Now: now.Val()}
	if b, err := bounds.Result(); err == nil && b != "" {
		st.Bounds, _ = quota.Decode(b) // a bad table is no table: the script answers unknown bucket
	}
	v, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return st, nil
	}
	if id, start, used, ok := parseQuotaState(v); ok {
		st.Exists, st.ID, st.QuotaStart, st.QuotaUsed = true, id, start, used
		return st, nil
	}
	idn, us, ok := parseKeyState(v)
	if !ok {
		return KeyState{}, fmt.Errorf("%w: key state %q", ErrBadAnswer, v)
	}
	st.Exists, st.ID, st.FullAt = true, idn, time.UnixMicro(us)
	return st, nil
}

// Quota returns a keyed quota's count for bucket id in the period
// containing st.Now, and that period [start, end), as the keyed acquire
// script reads them: a state of another incarnation or another period
// counts 0. ok is false when the group's table does not cover st.Now
// (the script then answers unknown bucket).
func (st KeyState) Quota(id int64) (used int64, start, end time.Time, ok bool) {
	s, e, ok := quota.Find(st.Bounds, st.Now.UnixMicro())
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	if st.Exists && st.ID == id && st.QuotaStart == s {
		used = st.QuotaUsed
	}
	return used, time.Unix(s, 0), time.Unix(e, 0), true
}

// parseQuotaState reads a keyed quota's state "<id> <start> <used>", each
// in base 64 (see lua/keyed.lua, quota_put).
func parseQuotaState(v string) (id, start, used int64, ok bool) {
	f := strings.Split(v, " ")
	if len(f) != 3 {
		return 0, 0, 0, false
	}
	var n [3]float64
	for i, x := range f {
		if n[i], ok = b64Value(x); !ok || x == "" || n[i] > 1e15 {
			return 0, 0, 0, false
		}
	}
	return int64(n[0]), int64(n[1]), int64(n[2]), true
}

// Tokens returns the tokens the key holds at st.Now under a limit of
// capacity tokens refilled at perSecond, for bucket id: full when the
// state is absent or of another bucket id, else capacity less what is
// still to refill until FullAt, never below zero.
func (st KeyState) Tokens(id, capacity int64, perSecond float64) float64 {
	if !st.Exists || st.ID != id || !st.FullAt.After(st.Now) {
		return float64(capacity)
	}
	missing := st.FullAt.Sub(st.Now).Seconds() * perSecond
	return max(0, float64(capacity)-missing)
}

// parseKeyState reads a state value "<id> <full_at x 4>", both numbers
// in base 64 with the digits of base64url, most significant first (see
// lua/keyed.lua). The decimal form "<id> <full_at>" of older releases is
// read too: its full_at has 16 digits or more, the base-64 one about 9.
func parseKeyState(v string) (id, fullAtMicros int64, ok bool) {
	a, b, found := strings.Cut(v, " ")
	if !found || a == "" || b == "" {
		return 0, 0, false
	}
	if len(b) >= 15 && strings.Trim(v, "0123456789 .e+") == "" {
		id, err1 := strconv.ParseInt(a, 10, 64)
		full, err2 := strconv.ParseFloat(b, 64)
		return id, int64(math.Ceil(full)), err1 == nil && err2 == nil && !math.IsInf(full, 0) && full < 1e18
	}
	idf, ok1 := b64Value(a)
	quarters, ok2 := b64Value(b)
	if !ok1 || !ok2 || quarters/4 > 1e18 {
		return 0, 0, false
	}
	return int64(idf), int64(math.Ceil(quarters / 4)), true
}

// b64Value reads a number the scripts wrote in base 64 (b64num).
func b64Value(s string) (float64, bool) {
	var x float64
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(base64url, s[i])
		if d < 0 {
			return 0, false
		}
		x = x*64 + float64(d)
	}
	return x, true
}
