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
// of the bucket, which bounds the tokens the bucket held when the call was
// sent. From then on the bucket holds at most that level plus the refill,
// less what this process's later calls took: other callers only take
// tokens. So a call the bound cannot cover is certainly denied, and the
// Limiter answers it in-process, with the remaining, retry-after and
// reset-after Redis would give. A call the bound may cover goes to Redis
// and claims its tokens until Redis answers (taken if it was granted,
// given back otherwise), so that when the refill brings one token, one
// caller of the process asks Redis for it, not all of them. The cache only
// ever denies: it never admits more than Redis would.
//
// A bucket's reserve is left to critical calls, which never meet the
// cache: the denials of other calls count what the bucket holds above its
// reserve, and the cache answers in those terms, as the script does.
//
// Every other call goes to Redis as before. What gives tokens back (a
// refund, a raised limit, a bucket reset or deleted, shadow mode turned
// on) is seen at most maxAge late: an entry lives maxAge from the denial
// that made it, a refund of the same Limiter drops it, and an answer of
// Redis with another config, or other than a grant or a denial, drops it.

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
	m  map[string]*denial
}

// denial is what a denied call said of its bucket, and what calls sent
// since took or claim. Its fields change under its shard's lock.
type denial struct {
	at int64 // when the denied call was sent (ns since the Limiter started), before Redis ran it
	// level is the most tokens the bucket held at `at`, less the tokens
	// granted since to calls that claimed them here.
	level float64
	// claimed is the tokens of calls sent to Redis on this entry and not
	// answered yet.
	claimed  int64
	perMicro float64 // refill in tokens per microsecond
	until    int64   // the entry ends (ns since the Limiter started)
	capacity int64
	reserve  int64 // the tokens kept for critical calls: level counts those above it
	pm, per  int64 // permits (millionths) and period, as Redis reported them
}

// claim is a call sent to Redis on a cache entry: its tokens are counted
// as taken until Redis answers. The zero claim is none.
type claim struct {
	e *denial
	n int64
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

// answer returns the denial of n tokens on key at now (ns since the
// Limiter started) when it is certain. Otherwise the call must go to
// Redis, with the returned claim, which learn or release settles.
func (d *denials) answer(key string, n, now int64) (Result, bool, claim) {
	if d.n.Load() == 0 {
		return Result{}, false, claim{}
	}
	s := d.shard(key)
	s.mu.Lock()
	e := s.m[key]
	if e == nil {
		s.mu.Unlock()
		return Result{}, false, claim{}
	}
	if now >= e.until {
		delete(s.m, key)
		d.n.Add(-1)
		s.mu.Unlock()
		return Result{}, false, claim{}
	}
	if res, ok := e.deny(n, now); ok {
		s.mu.Unlock()
		return res, true, claim{}
	}
	e.claimed += n
	s.mu.Unlock()
	return Result{}, false, claim{e: e, n: n}
}

// deny returns what Redis would answer a call of n tokens at now if it
// is certainly a denial: the level refilled since the denied call was
// sent, less the tokens claimed, is below n. Remaining, retry-after and
// reset-after are rounded as the acquire script rounds them. The caller
// holds the shard's lock.
func (e *denial) deny(n, now int64) (Result, bool) {
	top := float64(e.capacity - e.reserve) // the most level can be
	if float64(n) > top {
		return Result{}, false // ErrExceedsCapacity is Redis's to say
	}
	level := min(e.level+e.perMicro*float64(now-e.at)/1e3, top) - float64(e.claimed)
	if level >= float64(n) {
		return Result{}, false
	}
	return Result{
		Remaining:  int64(math.Floor(max(level, 0))),
		RetryAfter: e.untilMicros(float64(n) - level),
		Limit:      e.capacity,
		ResetAfter: e.untilMicros(top - level),
	}, true
}

// learn records Redis's answer a to a call of n tokens on key sent at
// `sent` (ns since the Limiter started, read before the call was queued)
// with claim c. A denial (not a shadow one, not of a bucket in lease mode)
// makes a new entry, which lives maxAge from `sent`. A grant of a claimed
// call takes its tokens from the entry it claimed on. An answer with
// another config than the entry's, or other than a grant or denial, drops
// the entry.
func (d *denials) learn(key string, n int64, sent int64, c claim, a redisscript.Answer) {
	if d.maxAge == 0 {
		return
	}
	switch {
	case a.Code == redisscript.Denied && a.LeaseMillis == 0 && a.PermitsMicro > 0 && a.PeriodSeconds > 0 &&
		a.RetryAfterMicros > 1:
		d.store(key, sent, n, a)
	case a.Code == redisscript.Allowed && a.LeaseMillis == 0:
		if d.n.Load() == 0 {
			return
		}
		s := d.shard(key)
		s.mu.Lock()
		if e := s.m[key]; e != nil {
			switch {
			case e.capacity != a.Capacity || e.pm != a.PermitsMicro || e.per != a.PeriodSeconds || e.reserve != a.Reserve:
				delete(s.m, key)
				d.n.Add(-1)
			case e == c.e:
				// Sent after the denial was answered, so run after it by
				// Redis: its tokens came out of the entry's level.
				e.claimed -= c.n
				e.level -= float64(c.n)
			}
		}
		s.mu.Unlock()
	default:
		d.drop(key)
	}
}

// store makes the entry of a denial of n tokens sent at `sent`.
func (d *denials) store(key string, sent, n int64, a redisscript.Answer) {
	perMicro := float64(a.PermitsMicro) / (float64(a.PeriodSeconds) * 1e12)
	// Redis rounds the retry-after up to a whole microsecond: the level
	// above the reserve was below n - rate x (retry - 1 µs), and below
	// remaining + 1.
	level := min(float64(n)-perMicro*float64(a.RetryAfterMicros-1), float64(a.Remaining+1))
	e := &denial{at: sent, level: level, perMicro: perMicro, until: sent + d.maxAge, capacity: a.Capacity,
		reserve: a.Reserve, pm: a.PermitsMicro, per: a.PeriodSeconds}
	s := d.shard(key)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string]*denial)
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

// release settles a claim whose call got no answer from Redis (it may or
// may not have run): its tokens count as not taken, which leaves the
// entry's level an upper bound.
func (d *denials) release(key string, c claim) {
	if c.e == nil {
		return
	}
	s := d.shard(key)
	s.mu.Lock()
	c.e.claimed -= c.n
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

// maxMicros caps durations as the acquire script does (about 31 years).
const maxMicros = 1_000_000_000_000_000

// untilMicros is the time until want more tokens are there, rounded up
// to a whole microsecond, computed in the acquire script's order.
func (e *denial) untilMicros(want float64) time.Duration {
	if want <= 0 {
		return 0
	}
	us := math.Ceil(want * float64(e.per) * 1e12 / float64(e.pm))
	if us > maxMicros {
		us = maxMicros
	}
	return time.Duration(us) * time.Microsecond
}
