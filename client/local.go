package client

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// learned is a bucket config as the acquire script reported it.
type learned struct {
	capacity, permitsMicro, period int64
}

// bucket is what a Limiter keeps per bucket name: the key, the last config
// and remaining count Redis reported, and the local bucket of FailLocal.
type bucket struct {
	keyArg any // the hash key, boxed once for the command arguments

	lease atomic.Pointer[lease] // lease mode; nil when off

	cfg       atomic.Pointer[learned]
	remaining atomic.Int64 // whole tokens left at the last Redis answer
	seen      atomic.Int64 // when that was, in ns since the Limiter started

	mu     sync.Mutex
	epoch  uint64  // the outage the local bucket belongs to
	tokens float64 // local tokens
	last   int64   // ns since the Limiter started
}

// learn records the config and remaining count of a Redis answer.
func (b *bucket) learn(l *Limiter, a redisscript.Answer) {
	if c := b.cfg.Load(); c == nil || c.capacity != a.Capacity || c.permitsMicro != a.PermitsMicro ||
		c.period != a.PeriodSeconds {
		b.cfg.Store(&learned{capacity: a.Capacity, permitsMicro: a.PermitsMicro, period: a.PeriodSeconds})
	}
	if l.opt.policy == FailLocal && (a.Code == redisscript.Allowed || a.Code == redisscript.Denied) {
		b.remaining.Store(a.Remaining)
		b.seen.Store(int64(time.Since(l.start)))
	}
}

// forget drops the config of a bucket this app may no longer use.
func (b *bucket) forget() {
	if b.cfg.Load() != nil {
		b.cfg.Store(nil)
	}
}

// fallback answers by the failure policy.
func (l *Limiter) fallback(b *bucket, n int64) (Result, error) {
	switch l.opt.policy {
	case FailOpen:
		return Result{Allowed: true, Fallback: true}, nil
	case FailClosed:
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	return b.local(l, n)
}

// local takes n tokens from the in-process bucket, which holds
// capacity/instances (at least 1) and refills at rate/instances, so that
// all instances together stay near the global limit. At the start of an
// outage it holds this instance's share of what Redis last said was left,
// plus what refilled since: never a fresh full bucket, which would let a
// burst through at every outage. A bucket whose config this process never
// saw is refused: there is no safe rate to guess.
func (b *bucket) local(l *Limiter, n int64) (Result, error) {
	cfg := b.cfg.Load()
	if cfg == nil {
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	if n > cfg.capacity {
		return Result{Limit: cfg.capacity, Fallback: true}, ErrExceedsCapacity
	}
	inst := float64(l.opt.instances)
	capacity := math.Max(1, math.Floor(float64(cfg.capacity)/inst))
	// tokens per nanosecond
	rate := float64(cfg.permitsMicro) / (float64(cfg.period) * 1e15) / inst
	now := int64(time.Since(l.start))

	b.mu.Lock()
	defer b.mu.Unlock()
	if e := l.outages.Load(); b.epoch != e {
		b.epoch = e
		b.tokens = float64(b.remaining.Load()) / inst
		b.last = b.seen.Load()
		if b.remaining.Load() == 0 && b.seen.Load() == 0 {
			// Config known but never a count (only config answers): start empty.
			b.last = now
		}
	}
	if now > b.last {
		b.tokens += float64(now-b.last) * rate
		b.last = now
	}
	b.tokens = math.Min(b.tokens, capacity)
	res := Result{Limit: int64(capacity), Fallback: true}
	if float64(n) > capacity {
		// Grantable in Redis but not by this instance's share.
		res.RetryAfter = l.opt.probe
		res.Remaining = int64(b.tokens)
		return res, nil
	}
	if b.tokens >= float64(n) {
		b.tokens -= float64(n)
		res.Allowed = true
	} else {
		res.RetryAfter = ceilDuration((float64(n) - b.tokens) / rate)
	}
	res.Remaining = int64(b.tokens)
	res.ResetAfter = ceilDuration((capacity - b.tokens) / rate)
	return res, nil
}

// ceilDuration converts nanoseconds to a Duration, rounding up and capping
// at about 31 years like the script.
func ceilDuration(ns float64) time.Duration {
	const maxNS = 1e15 * 1e3
	if !(ns < maxNS) {
		return time.Duration(maxNS)
	}
	if ns <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(ns))
}
