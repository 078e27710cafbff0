package usage

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// HotKey is a key of a keyed bucket and the acquires denied to it.
type HotKey struct {
	Key    string `json:"key"`
	Denied int64  `json:"denied"`
}

// Limits of HotKeys.
const (
	DefaultHotKeys = 20
	MaxHotKeys     = redisscript.HotKeysKept
)

// HotKeys returns up to limit keys of keyed bucket with the most denied
// acquires in the current and the previous clock hour (so the last hour
// at least), most denied first, ties by key. limit is DefaultHotKeys when
// 0, at most MaxHotKeys. It reads two small sorted sets that clients keep
// trimmed (see package client/usage), so its cost does not grow with the
// number of keys. An invalid name is an error matching errs.ErrInvalid;
// Redis failing, one matching errs.ErrUnavailable.
func (r *Reader) HotKeys(ctx context.Context, bucket string, limit int) ([]HotKey, error) {
	if !redisscript.ValidName(bucket) {
		v := &errs.Validation{}
		v.Add("bucket", "is not a valid bucket name")
		return nil, v
	}
	if limit <= 0 {
		limit = DefaultHotKeys
	}
	limit = min(limit, MaxHotKeys)
	hour := floorDiv(r.now().Unix(), 3600)
	pipe := r.rdb.Pipeline()
	cmds := []*redis.ZSliceCmd{
		// Whole sets (at most HotKeysKept each): a key can rank low in
		// each hour and high in both together.
		pipe.ZRevRangeWithScores(ctx, r.ks.HotKeys(bucket, hour), 0, -1),
		pipe.ZRevRangeWithScores(ctx, r.ks.HotKeys(bucket, hour-1), 0, -1),
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("usage: read hot keys: %w: %w", errs.ErrUnavailable, err)
	}
	sums := map[string]int64{}
	for _, c := range cmds {
		for _, z := range c.Val() {
			if key, ok := z.Member.(string); ok {
				sums[key] += int64(z.Score)
			}
		}
	}
	out := make([]HotKey, 0, len(sums))
	for k, n := range sums {
		out = append(out, HotKey{Key: k, Denied: n})
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		if a.Denied != b.Denied {
			return int(b.Denied - a.Denied)
		}
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out[:min(len(out), limit)], nil
}
