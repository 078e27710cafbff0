package usage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// KeyCount is a key of a keyed bucket and how many of its acquires were
// denied, or allowed, in a window.
type KeyCount struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
}

// TopKeys are the keys of a keyed bucket denied most and taking most
// (allowed most) in a window.
type TopKeys struct {
	Denied []KeyCount `json:"denied"`
	Taken  []KeyCount `json:"taken"`
	// Since is the start of the clock hour of the oldest set read: the
	// counts cover from Since to now.
	Since time.Time `json:"since"`
}

// Limits of TopKeys.
const (
	DefaultTopKeys = 10
	MaxTopKeys     = 100
)

// TopKeys returns up to limit keys of keyed bucket with the most denied
// and with the most allowed acquires over window w: Hour reads the
// current and the previous clock hour (so the last hour at least), Day
// the current hour and the 24 before it. Most first, ties by key. limit
// is DefaultTopKeys when 0, at most MaxTopKeys. It reads sorted sets that
// clients keep trimmed to redisscript.TopKeysKept (see package
// client/usage), one per hour and outcome, so its cost does not grow with
// the number of keys. An invalid name, or a window other than Hour and
// Day, is an error matching errs.ErrInvalid; Redis failing, one matching
// errs.ErrUnavailable.
func (r *Reader) TopKeys(ctx context.Context, bucket string, w Window, limit int) (TopKeys, error) {
	v := &errs.Validation{}
	if !redisscript.ValidName(bucket) {
		v.Add("bucket", "is not a valid bucket name")
	}
	hours := 0
	switch w {
	case Hour:
		hours = 2
	case Day:
		hours = 25
	default:
		v.Add("window", "must be hour or day")
	}
	if err := v.Err(); err != nil {
		return TopKeys{}, err
	}
	if limit <= 0 {
		limit = DefaultTopKeys
	}
	limit = min(limit, MaxTopKeys)
	hour := floorDiv(r.now().Unix(), 3600)
	pipe := r.rdb.Pipeline()
	var denied, taken []*redis.ZSliceCmd
	for h := hour - int64(hours) + 1; h <= hour; h++ {
		// Whole sets (at most TopKeysKept each): a key can rank low in
		// each hour and high in all of them together.
		denied = append(denied, pipe.ZRangeWithScores(ctx, r.ks.DeniedKeys(bucket, h), 0, -1))
		taken = append(taken, pipe.ZRangeWithScores(ctx, r.ks.TakenKeys(bucket, h), 0, -1))
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return TopKeys{}, fmt.Errorf("usage: read top keys: %w: %w", errs.ErrUnavailable, err)
	}
	return TopKeys{Denied: sumTop(denied, limit), Taken: sumTop(taken, limit),
		Since: time.Unix((hour-int64(hours)+1)*3600, 0).UTC()}, nil
}

// sumTop adds up the scores of each key over the sets and returns the
// limit highest.
func sumTop(cmds []*redis.ZSliceCmd, limit int) []KeyCount {
	sums := map[string]int64{}
	for _, c := range cmds {
		for _, z := range c.Val() {
			if key, ok := z.Member.(string); ok {
				sums[key] += int64(z.Score)
			}
		}
	}
	out := make([]KeyCount, 0, len(sums))
	for k, n := range sums {
		out = append(out, KeyCount{Key: k, Count: n})
	}
	slices.SortFunc(out, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out[:min(len(out), limit)]
}
