package main

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// limiter is one implementation under test. acquire takes one token from
// bucket i and reports whether it was granted.
type limiter interface {
	name() string
	acquire(ctx context.Context, i int) (bool, error)
	close() error
}

// workload is the bucket every implementation is given: large enough that
// the calls measure the round trip and the script, not the denials.
type workload struct {
	buckets  int
	capacity int64
	rate     int64 // tokens per second
	prefix   string
}

func (w workload) bucketName(i int) string { return "b" + strconv.Itoa(i%w.buckets) }

// redisRate is github.com/go-redis/redis_rate (GCRA, Redis clock).
type redisRate struct {
	rdb   *redis.Client
	lim   *redis_rate.Limiter
	limit redis_rate.Limit
	keys  []string
}

func newRedisRate(opts *redis.Options, w workload) *redisRate {
	rdb := redis.NewClient(opts)
	r := &redisRate{rdb: rdb, lim: redis_rate.NewLimiter(rdb),
		limit: redis_rate.Limit{Rate: int(w.rate), Burst: int(w.capacity), Period: time.Second}}
	for i := range w.buckets {
		r.keys = append(r.keys, w.prefix+"rr:"+w.bucketName(i))
	}
	return r
}

func (r *redisRate) name() string { return "redis_rate" }

func (r *redisRate) acquire(ctx context.Context, i int) (bool, error) {
	res, err := r.lim.Allow(ctx, r.keys[i%len(r.keys)], r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (r *redisRate) close() error { return r.rdb.Close() }

//go:embed classic.lua
var classicSource string

var classicScript = redis.NewScript(classicSource)

// classic is a hand-written token bucket that trusts the client's clock.
type classic struct {
	rdb      *redis.Client
	keys     [][]string
	capacity int64
	rate     int64
}

func newClassic(opts *redis.Options, w workload) *classic {
	c := &classic{rdb: redis.NewClient(opts), capacity: w.capacity, rate: w.rate}
	for i := range w.buckets {
		c.keys = append(c.keys, []string{w.prefix + "cl:{" + w.bucketName(i) + "}"})
	}
	return c
}

func (c *classic) name() string { return "classic script" }

func (c *classic) acquire(ctx context.Context, i int) (bool, error) {
	now := time.Now().UnixMicro()
	v, err := classicScript.EvalSha(ctx, c.rdb, c.keys[i%len(c.keys)], c.capacity, c.rate, now, 1).Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		v, err = classicScript.Eval(ctx, c.rdb, c.keys[i%len(c.keys)], c.capacity, c.rate, now, 1).Slice()
	}
	if err != nil {
		return false, err
	}
	if len(v) != 2 {
		return false, fmt.Errorf("classic script: unexpected answer %v", v)
	}
	allowed, _ := v[0].(int64)
	return allowed == 1, nil
}

func (c *classic) close() error { return c.rdb.Close() }
