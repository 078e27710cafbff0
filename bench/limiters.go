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

// settler is a limiter that leaves work behind in Redis after a case,
// which settle does before the next case starts.
type settler interface {
	settle(ctx context.Context) error
}

// workload is the bucket every implementation is given: large enough that
// the calls measure the round trip and the script, not the denials.
type workload struct {
	buckets  int
	capacity int64
	rate     int64 // tokens per second
	prefix   string
	lease    int64 // lease time in ms of Sluice's buckets; 0: lease mode off
}

func (w workload) bucketName(i int) string { return "b" + strconv.Itoa(i%w.buckets) }

// redisRate is github.com/go-redis/redis_rate (GCRA, Redis clock).
type redisRate struct {
	rdb   *redis.Client
	label string
	lim   *redis_rate.Limiter
	limit redis_rate.Limit
	keys  []string
}

func newRedisRate(opts *redis.Options, w workload, label string) *redisRate {
	rdb := redis.NewClient(opts)
	r := &redisRate{rdb: rdb, label: label, lim: redis_rate.NewLimiter(rdb),
		limit: redis_rate.Limit{Rate: int(w.rate), Burst: int(w.capacity), Period: time.Second}}
	for i := range w.buckets {
		r.keys = append(r.keys, w.prefix+"rr:"+w.bucketName(i))
	}
	return r
}

func (r *redisRate) name() string { return r.label }

func (r *redisRate) acquire(ctx context.Context, i int) (bool, error) {
	res, err := r.lim.Allow(ctx, r.keys[i%len(r.keys)], r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (r *redisRate) close() error { return r.rdb.Close() }

//go:embed plain.lua
var plainSource string

var plainScript = redis.NewScript(plainSource)

// plain is one EVALSHA of a minimal Redis-clock token bucket per call: the
// least a script-based limiter can do per call.
type plain struct {
	rdb      *redis.Client
	label    string
	keys     [][]string
	capacity int64
	rate     int64
}

func newPlain(opts *redis.Options, w workload, label string) *plain {
	c := &plain{rdb: redis.NewClient(opts), label: label, capacity: w.capacity, rate: w.rate}
	for i := range w.buckets {
		c.keys = append(c.keys, []string{w.prefix + "pl:{" + w.bucketName(i) + "}"})
	}
	return c
}

func (c *plain) name() string { return c.label }

func (c *plain) acquire(ctx context.Context, i int) (bool, error) {
	keys := c.keys[i%len(c.keys)]
	v, err := plainScript.Run(ctx, c.rdb, keys, c.capacity, c.rate, 1).Slice()
	if err != nil {
		return false, err
	}
	if len(v) != 2 {
		return false, fmt.Errorf("plain script: unexpected answer %v", v)
	}
	allowed, _ := v[0].(int64)
	return allowed == 1, nil
}

func (c *plain) close() error { return c.rdb.Close() }
