package redisscript

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyState is what Redis holds about one key of a keyed bucket: the state
// string the keyed acquire script writes ("<id> <full_at>", see
// keyed_acquire.lua) and the Redis clock at the read.
type KeyState struct {
	// Exists is false when the key has no state: it is idle, and its
	// bucket full.
	Exists bool
	// ID is the bucket id the state belongs to (a recreated bucket ignores
	// the state of the old one).
	ID int64
	// FullAt is when the key's bucket is full again.
	FullAt time.Time
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
	now := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return KeyState{}, fmt.Errorf("read key state of %q: %w", name, err)
	}
	st := KeyState{Now: now.Val()}
	v, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return st, nil
	}
	id, full, ok := strings.Cut(v, " ")
	idn, err1 := strconv.ParseInt(id, 10, 64)
	us, err2 := strconv.ParseInt(full, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return KeyState{}, fmt.Errorf("%w: key state %q", ErrBadAnswer, v)
	}
	st.Exists, st.ID, st.FullAt = true, idn, time.UnixMicro(us)
	return st, nil
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
