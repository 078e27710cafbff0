package client

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

// Lease mode (docs/protocol.md, "Leases"): for a bucket whose config has
// a lease time, the Limiter takes a batch of tokens in one round trip and
// answers acquires from it in-process until the batch is used up or the
// lease time has passed, whichever comes first; then it gives back what
// is left with its next request. Every leased token is taken from the
// bucket in Redis when it is leased, so leases never let more through than
// capacity + rate x T: they only move the decision into the process.
//
// The batch is sized to this process's demand (the tokens its callers
// asked for, granted or not, per second) over one lease time. When the
// bucket runs dry, a process asks again no sooner than after its callers
// asked for leaseChunk more tokens: processes then ask in proportion to
// their demand, and as each request takes what refilled since the one
// before it, whoever made it, they share the rate in proportion to demand.

// leaseChunkParts: when the bucket runs dry, a process asks again once its
// callers asked for 1/leaseChunkParts of what the bucket refills in one
// lease time.
const leaseChunkParts = 8

// lease is the lease state of one bucket. The fast path (tokens left and
// the lease not ended) takes a few atomic operations; everything else holds
// mu.
type lease struct {
	l    *Limiter
	b    *bucket
	name string

	tokens  atomic.Int64 // left in the current lease
	expires atomic.Int64 // when it ends, in ns since the Limiter started
	asked   atomic.Int64 // tokens asked for since the last request

	mu        sync.Mutex
	fetching  chan struct{} // closed when the request in flight ends
	since     int64         // when asked started counting
	demand    float64       // tokens per second, smoothed
	notBefore int64         // no request before this (the bucket ran dry)
	dur       int64         // lease time, ns
	capacity  atomic.Int64
	rate      float64 // tokens per second
	remaining int64   // whole tokens left in the bucket at the last answer
	gen       uint64  // counts leases, so that a stale expiry timer does nothing
	timer     *time.Timer
}

func newLease(l *Limiter, b *bucket, name string, a redisscript.Answer) *lease {
	ls := &lease{l: l, b: b, name: name, since: int64(l.now())}
	ls.configure(a.LeaseMillis, a.Capacity, a.PermitsMicro, a.PeriodSeconds)
	return ls
}

func (ls *lease) configure(leaseMillis, capacity, permitsMicro, period int64) {
	ls.dur = leaseMillis * int64(time.Millisecond)
	ls.capacity.Store(capacity)
	ls.rate = tokens.Limit{Capacity: capacity, PermitsMicro: permitsMicro, Period: float64(max(period, 1))}.PerSecond()
}

// takeLeased answers an acquire of n tokens from the current lease, if it
// holds them: ok false when the call must go elsewhere.
func (ls *lease) takeLeased(n int64) (Result, bool) {
	if now := int64(ls.l.now()); now >= ls.expires.Load() {
		return Result{}, false
	}
	left, ok := ls.takeTokens(n)
	if !ok {
		return Result{}, false
	}
	ls.asked.Add(n)
	return Result{Allowed: true, Remaining: left, Limit: ls.capacity.Load()}, true
}

// take answers an acquire of n tokens in lease mode. A lease is never
// critical: it leaves the bucket's reserve (docs/protocol.md, "Leases").
func (ls *lease) take(ctx context.Context, n int64) (Result, error) {
	if res, ok := ls.takeLeased(n); ok {
		return res, nil
	}
	ls.asked.Add(n)
	return ls.slow(ctx, n)
}

// takeTokens takes n tokens of the current lease if it holds them. A
// compare-and-swap, not an add undone on failure: an undo landing after a
// renewal stored the new count would create tokens.
func (ls *lease) takeTokens(n int64) (left int64, ok bool) {
	for {
		cur := ls.tokens.Load()
		if cur < n {
			return cur, false
		}
		if ls.tokens.CompareAndSwap(cur, cur-n) {
			return cur - n, true
		}
	}
}

// slow takes n tokens from a new lease, asking Redis for one unless a
// request is in flight (then it waits for that) or the bucket ran dry
// moments ago (then it denies).
func (ls *lease) slow(ctx context.Context, n int64) (Result, error) {
	if ls.l.open.Load() {
		return ls.l.fallback(ls.b, n, false)
	}
	if c := ls.capacity.Load(); n > c-ls.reserve() {
		return Result{Limit: c}, ErrExceedsCapacity
	}
	deadline := time.Now().Add(ls.l.opt.timeout)
	for {
		ls.mu.Lock()
		now := int64(ls.l.now())
		if now < ls.expires.Load() {
			if left, ok := ls.takeTokens(n); ok {
				ls.mu.Unlock()
				return Result{Allowed: true, Remaining: left, Limit: ls.capacity.Load()}, nil
			}
		}
		if now < ls.notBefore {
			res := Result{Limit: ls.capacity.Load(), Remaining: max(ls.tokens.Load(), 0),
				RetryAfter: time.Duration(max(ls.notBefore-now, int64(time.Millisecond)))}
			ls.mu.Unlock()
			return res, nil
		}
		if ch := ls.fetching; ch != nil {
			// Another caller is renewing the lease: its new tokens may
			// serve this call too.
			ls.mu.Unlock()
			if err := ls.wait(ctx, ch, deadline); err != nil {
				return Result{}, err
			}
			if time.Now().After(deadline) {
				return ls.l.fallback(ls.b, n, false)
			}
			continue
		}
		return ls.renew(ctx, now, n)
	}
}

// wait waits for the request in flight, until deadline at most.
func (ls *lease) wait(ctx context.Context, ch chan struct{}, deadline time.Time) error {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// renew ends the current lease, giving back what is left of it, and takes
// a new one sized to the demand; called with mu held, it releases it.
func (ls *lease) renew(ctx context.Context, now, n int64) (Result, error) {
	ls.expires.Store(0)
	back := max(ls.tokens.Swap(0), 0)
	want := ls.size(now, n)
	ch := make(chan struct{})
	ls.fetching = ch
	ls.mu.Unlock()

	a, err := ls.l.leaseCall(ls.b, want, back)

	ls.mu.Lock()
	defer func() {
		ls.fetching = nil
		close(ch)
		ls.mu.Unlock()
	}()
	ls.l.settle(err)
	if err != nil {
		return ls.l.fallback(ls.b, n, false)
	}
	switch a.Code {
	case redisscript.UnknownBucket, redisscript.AppNotAllowed, redisscript.InvalidN:
		ls.b.lease.Store(nil)
		ls.b.forget()
		if a.Code == redisscript.AppNotAllowed {
			return Result{Limit: a.Capacity}, ErrAppNotAllowed
		}
		return Result{}, ErrUnknownBucket
	}
	ls.b.learn(ls.l, ls.name, redisscript.Answer{Code: redisscript.Allowed, Remaining: a.Remaining, Capacity: a.Capacity,
		PermitsMicro: a.PermitsMicro, PeriodSeconds: a.PeriodSeconds})
	if a.LeaseMillis <= 0 {
		// Lease mode was turned off: acquire one call at a time again.
		ls.b.lease.Store(nil)
		ls.mu.Unlock()
		res, err := ls.l.acquire(ctx, ls.name, n)
		ls.mu.Lock()
		return res, err
	}
	ls.configure(a.LeaseMillis, a.Capacity, a.PermitsMicro, a.PeriodSeconds)
	ls.remaining = a.Remaining
	ls.gen++
	if a.Granted < want {
		// The bucket ran dry: ask again once the callers asked for a
		// chunk more, or when a token is there, whichever is later.
		chunk := math.Max(1, ls.rate*float64(ls.dur)/1e9/leaseChunkParts)
		pace := int64(chunk / math.Max(ls.demand, 1) * 1e9)
		ls.notBefore = now + max(pace, a.RetryAfterMicros*int64(time.Microsecond))
	}
	granted := a.Granted
	res := Result{Limit: a.Capacity}
	if granted >= n {
		granted -= n
		res.Allowed = true
	} else {
		res.RetryAfter = time.Duration(max(ls.notBefore-now, int64(time.Millisecond)))
	}
	res.Remaining = granted
	if granted > 0 {
		// The lease counts from before the request was sent: it ends no
		// later than its lease time after Redis granted it.
		ls.tokens.Store(granted)
		ls.expires.Store(now + ls.dur)
		ls.armExpiry(ls.dur)
	}
	return res, nil
}

// reserve is the bucket's reserve as Redis last reported it: a lease leaves
// it, so a call of more than capacity - reserve can never be leased.
func (ls *lease) reserve() int64 {
	if cfg := ls.b.cfg.Load(); cfg != nil {
		return tokens.Limit{Capacity: cfg.capacity, Reserve: cfg.reserve}.Kept(false)
	}
	return 0
}

// size returns how many tokens to ask for: the demand over one lease
// time, at least n, at most capacity.
func (ls *lease) size(now, n int64) int64 {
	asked := ls.asked.Swap(0)
	if elapsed := now - ls.since; elapsed > 0 {
		rate := float64(asked) / (float64(elapsed) / 1e9)
		if ls.demand == 0 {
			ls.demand = rate
		} else {
			ls.demand = (ls.demand + rate) / 2
		}
	}
	ls.since = now
	want := int64(math.Ceil(ls.demand * float64(ls.dur) / 1e9))
	return min(max(want, n), ls.capacity.Load())
}

// armExpiry gives back what is left of the current lease when it ends, if
// no request did so before.
func (ls *lease) armExpiry(d int64) {
	gen := ls.gen
	if ls.timer == nil {
		ls.timer = time.AfterFunc(time.Duration(d), func() { ls.expire(gen) })
		return
	}
	ls.timer.Stop()
	ls.timer = time.AfterFunc(time.Duration(d), func() { ls.expire(gen) })
}

func (ls *lease) expire(gen uint64) {
	ls.mu.Lock()
	if gen != ls.gen || ls.fetching != nil {
		ls.mu.Unlock()
		return
	}
	ls.expires.Store(0)
	back := max(ls.tokens.Swap(0), 0)
	ls.mu.Unlock()
	if back > 0 {
		ls.giveBack(back)
	}
}

// end stops the lease and gives back what is left of it (Close).
func (ls *lease) end() {
	ls.mu.Lock()
	ls.gen++
	if ls.timer != nil {
		ls.timer.Stop()
	}
	ls.expires.Store(0)
	back := max(ls.tokens.Swap(0), 0)
	ls.mu.Unlock()
	if back > 0 {
		ls.giveBack(back)
	}
}

func (ls *lease) giveBack(back int64) {
	if ls.l.open.Load() {
		return // Redis is away: the tokens are lost, which admits less, never more
	}
	_, err := ls.l.leaseCall(ls.b, 0, back)
	ls.l.settle(err)
}

// leaseCall runs the lease script: give back back tokens, take up to want.
// It is never resent after a failure (the tokens may have been taken), only
// after NOSCRIPT.
func (l *Limiter) leaseCall(b *bucket, want, back int64) (redisscript.LeaseAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.opt.timeout)
	defer cancel()
	cmd0, first := l.head(leaseScript)
	args := []any{cmd0, first, "1", b.keyArg, l.appArg, strconv.FormatInt(want, 10), strconv.FormatInt(back, 10)}
	cmd := redis.NewIntSliceCmd(ctx, args...)
	_ = l.snd.rdb.Process(ctx, acquireCmd{cmd})
	if err := cmd.Err(); err != nil && l.notRun(err) {
		args[0], args[1] = "eval", leaseScript.src
		cmd = redis.NewIntSliceCmd(ctx, args...)
		_ = l.snd.rdb.Process(ctx, acquireCmd{cmd})
	}
	if err := cmd.Err(); err != nil {
		return redisscript.LeaseAnswer{}, err
	}
	a, err := redisscript.LeaseAnswerOf(cmd.Val())
	if err != nil {
		return a, errors.Join(err, errBadLease)
	}
	return a, nil
}

var errBadLease = errors.New("sluice: malformed lease answer")

// startLease turns lease mode on for b after an acquire answer said so.
func (l *Limiter) startLease(b *bucket, name string, a redisscript.Answer) {
	if a.LeaseMillis > 0 && b.lease.Load() == nil {
		b.lease.CompareAndSwap(nil, newLease(l, b, name, a))
	}
}

// endLeases gives back what is left of every lease (Close).
func (l *Limiter) endLeases() {
	for _, b := range l.buckets.All() {
		if ls := b.lease.Load(); ls != nil {
			ls.end()
		}
	}
}
