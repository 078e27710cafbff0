package client

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// The denial cache. A token bucket's denial says exactly when the tokens
// will be there: Redis answered n tokens short by retry-after at the rate
// of the bucket. Until then, with no other callers, a request that the
// refilled level still cannot cover is certainly denied, and other callers
// only take tokens. So the Limiter answers such a request in-process, with
// the remaining, retry-after and reset-after Redis would have given (from
// the refill since the denied call was sent). It only ever denies: a
// request the bound might cover goes to Redis, so it never admits more
// than Redis would.
//
// What can give tokens back (a refund, a raised limit, a bucket reset or
// deleted, shadow mode turned on) is seen at most maxAge late: an entry
// lives until its own retry-after or maxAge, whichever is first, and a
// refund or any other answer of Redis for the same bucket or key drops or
// replaces it.

// DefaultDenialCache is how long at most a denial is answered from the
// Limiter's cache (see WithDenialCache).
const DefaultDenialCache = time.Second

// maxDenials bounds the entries of a Limiter's denial cache (buckets and
// keys); past it, new denials are not cached until entries expire.
const maxDenials = 10_000

const denialShards = 16

// denials is a Limiter's cache of denied buckets and keys, by Redis key.
type denials struct {
	maxAge int64        // ns; 0 turns the cache off
	n      atomic.Int64 // entries; a lookup with none takes no lock
	shards [denialShards]denialShard
}

type denialShard struct {
	mu sync.Mutex
	m  map[string]denial
}

// denial is what one denied call said of its bucket.
type denial struct {
	at    int64   // when the denied call was sent (ns since the Limiter started), before Redis ran it
	level float64 // tokens the bucket held at most at `at`
	// perMicro is the refill in tokens per microsecond.
	perMicro float64
	until    int64 // the entry ends (ns since the Limiter started)
	capacity int64
	pm, per  int64 // permits (millionths) and period, as Redis reported them
}

// shard returns the shard of key (FNV-1a of the key).
func (d *denials) shard(key string) *denialShard {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return &d.shards[h%denialShards]
}

// learn records Redis's answer a to a call of n tokens on key sent at
// `sent` (ns since the Limiter started, read before the call was queued):
// a denial (not a shadow one, not of a bucket in lease mode) is cached;
// any other answer drops what was cached of key. The entry's life counts
// from `sent` too, so it ends no later than the denial's retry-after.
func (d *denials) learn(key string, n int64, sent int64, a redisscript.Answer) {
	if d.maxAge == 0 {
		return
	}
	if a.Code != redisscript.Denied || a.LeaseMillis > 0 || a.PermitsMicro <= 0 || a.PeriodSeconds <= 0 ||
		a.RetryAfterMicros <= 1 {
		d.drop(key)
		return
	}
	perMicro := float64(a.PermitsMicro) / (float64(a.PeriodSeconds) * 1e12)
	// Redis rounds the retry-after up to a whole microsecond: the level was
	// below n - rate x (retry - 1 µs), and below remaining + 1.
	level := min(float64(n)-perMicro*float64(a.RetryAfterMicros-1), float64(a.Remaining+1))
	life := min(a.RetryAfterMicros*int64(time.Microsecond), d.maxAge)
	e := denial{at: sent, level: level, perMicro: perMicro, until: sent + life, capacity: a.Capacity,
		pm: a.PermitsMicro, per: a.PeriodSeconds}
	s := d.shard(key)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string]denial)
	}
	if _, ok := s.m[key]; !ok {
		if d.n.Load() >= maxDenials && s.sweep(d, sent) == 0 {
			s.mu.Unlock()
			return // full of live entries
		}
		d.n.Add(1)
	}
	s.m[key] = e
	s.mu.Unlock()
}

// sweep drops the shard's expired entries and reports how many it dropped.
// The caller holds s.mu.
func (s *denialShard) sweep(d *denials, now int64) int {
	dropped := 0
	for k, e := range s.m {
		if now >= e.until {
			delete(s.m, k)
			dropped++
		}
	}
	d.n.Add(-int64(dropped))
	return dropped
}

// drop forgets key: Redis answered it otherwise, or tokens were given back.
func (d *denials) drop(key string) {
	if d.n.Load() == 0 {
		return
	}
	s := d.shard(key)
	s.mu.Lock()
	if _, ok := s.m[key]; ok {
		delete(s.m, key)
		d.n.Add(-1)
	}
	s.mu.Unlock()
}

// answer returns the denial of n tokens on key at now (ns since the
// Limiter started) when the cache is certain of it, and false when the
// call must go to Redis.
func (d *denials) answer(key string, n, now int64) (Result, bool) {
	if d.n.Load() == 0 {
		return Result{}, false
	}
	s := d.shard(key)
	s.mu.Lock()
	e, ok := s.m[key]
	if ok && now >= e.until {
		delete(s.m, key)
		d.n.Add(-1)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return Result{}, false
	}
	return e.deny(n, now)
}

// deny returns what Redis would answer a call of n tokens at now if it
// is certainly a denial: the level refilled since the denied call was
// sent is below n. Remaining, retry-after and reset-after are rounded as
// the acquire script rounds them.
func (e denial) deny(n, now int64) (Result, bool) {
	if n > e.capacity {
		return Result{}, false // ErrExceedsCapacity is Redis's to say
	}
	level := min(e.level+e.perMicro*float64(now-e.at)/1e3, float64(e.capacity))
	if level >= float64(n) {
		return Result{}, false
	}
	return Result{
		Remaining:  int64(math.Floor(max(level, 0))),
		RetryAfter: e.untilMicros(float64(n) - level),
		Limit:      e.capacity,
		ResetAfter: e.untilMicros(float64(e.capacity) - level),
	}, true
}

// maxMicros caps durations as the acquire script does (about 31 years).
const maxMicros = 1_000_000_000_000_000

// untilMicros is the time until want more tokens are there, rounded up
// to a whole microsecond, computed in the acquire script's order.
func (e denial) untilMicros(want float64) time.Duration {
	if want <= 0 {
		return 0
	}
	us := math.Ceil(want * float64(e.per) * 1e12 / float64(e.pm))
	if us > maxMicros {
		us = maxMicros
	}
	return time.Duration(us) * time.Microsecond
}
