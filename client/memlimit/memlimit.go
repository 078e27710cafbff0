// Package memlimit is an in-memory Sluice limiter for unit tests: the same
// Acquire, Allow, Wait, AcquireAll, Refund and Charge as client.Limiter,
// with the same token math, results and errors, but buckets defined in
// the test and a clock the test can move. It implements client.Acquirer,
// so a handler wrapped in client.Middleware can be tested without Redis:
//
//	clock := memlimit.NewManualClock(time.Unix(0, 0))
//	lim := memlimit.New("checkout", memlimit.WithClock(clock))
//	lim.Define("orders", memlimit.Bucket{Capacity: 2, Permits: 1, Per: time.Second})
//	h := client.Middleware(lim, func(*http.Request) string { return "orders" })(handler)
//	// two requests pass, the third gets 429; clock.Advance(time.Second) lets one more through
//
// It is not a production limiter: state lives in one process.
package memlimit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/client"
)

// Clock tells the time. The zero Limiter uses the system clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to. It is safe for
// concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a clock stopped at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (backwards for a negative d, which
// the limiter treats like Redis does a clock that went back: no refill).
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Bucket is the definition of an in-memory bucket.
type Bucket struct {
	// Capacity is the most tokens the bucket holds, 1 to 1e9. A new bucket
	// starts full.
	Capacity int64
	// Permits tokens are added every Per, continuously: Permits 5 and Per
	// time.Second is 5 per second.
	Permits float64
	Per     time.Duration
	// Apps are the apps allowed to take tokens; empty allows every app.
	Apps []string
	// Shadow puts the bucket in shadow mode: where it would deny, it
	// allows with Result.WouldDeny set and takes nothing.
	Shadow bool
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock sets the clock (default: the system clock).
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithObserver calls f after every Acquire, Allow and AcquireAll request,
// like client.WithObserver.
func WithObserver(f func(client.Decision)) Option { return func(l *Limiter) { l.observe = f } }

// Limiter is an in-memory limiter for one app. It is safe for concurrent
// use. Create it with New.
type Limiter struct {
	app     string
	clock   Clock
	observe func(client.Decision)

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	def    Bucket
	rate   float64 // tokens per nanosecond
	tokens float64
	last   time.Time
}

var _ client.Acquirer = (*Limiter)(nil)

// maxN is the largest n and capacity, as in Redis.
const maxN = 1_000_000_000

// New returns an empty Limiter that takes tokens as app.
func New(app string, opts ...Option) *Limiter {
	l := &Limiter{app: app, clock: systemClock{}, buckets: map[string]*bucket{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Define creates bucket name, full, or replaces its definition keeping its
// tokens (clamped to the new capacity), as the sync worker does in Redis.
func (l *Limiter) Define(name string, def Bucket) error {
	switch {
	case def.Capacity < 1 || def.Capacity > maxN:
		return fmt.Errorf("memlimit: bucket %q: capacity %d must be between 1 and 1000000000", name, def.Capacity)
	case !(def.Permits > 0) || math.IsInf(def.Permits, 0) || def.Per <= 0:
		return fmt.Errorf("memlimit: bucket %q: permits and per must be positive", name)
	}
	def.Apps = slices.Clone(def.Apps)
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	if b == nil {
		b = &bucket{tokens: float64(def.Capacity), last: now}
		l.buckets[name] = b
	} else {
		b.refill(now)
	}
	b.def, b.rate = def, def.Permits/float64(def.Per)
	b.tokens = math.Min(b.tokens, float64(def.Capacity))
	return nil
}

// Delete removes bucket name: later calls get client.ErrUnknownBucket.
func (l *Limiter) Delete(name string) {
	l.mu.Lock()
	delete(l.buckets, name)
	l.mu.Unlock()
}

// Tokens returns the tokens bucket name holds now (negative in debt), and
// false for an unknown bucket.
func (l *Limiter) Tokens(name string) (float64, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	if b == nil {
		return 0, false
	}
	b.refill(now)
	return b.tokens, true
}

// refill brings the tokens up to now; a clock that went back adds nothing.
func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.tokens+float64(d)*b.rate, float64(b.def.Capacity))
		b.last = now
	}
}

// until is how long until want more tokens are there, rounded up to a
// microsecond like the script.
func (b *bucket) until(want float64) time.Duration {
	if want <= 0 {
		return 0
	}
	ns := math.Ceil(want/b.rate/1e3) * 1e3
	if ns > 1e18 {
		return time.Duration(1e18)
	}
	return time.Duration(ns)
}

func (b *bucket) result(allowed bool, n int64) client.Result {
	r := client.Result{Allowed: allowed, Remaining: int64(math.Floor(math.Max(b.tokens, 0))), Limit: b.def.Capacity,
		ResetAfter: b.until(float64(b.def.Capacity) - b.tokens)}
	if !allowed {
		r.RetryAfter = b.until(float64(n) - b.tokens)
	}
	return r
}

// lookup returns the refilled bucket name for the Limiter's app, or the
// error of a call that can never succeed. l.mu must be held.
func (l *Limiter) lookup(name string, n int64, now time.Time) (*bucket, error) {
	if n < 1 || n > maxN {
		return nil, client.ErrInvalidN
	}
	b := l.buckets[name]
	if b == nil {
		return nil, client.ErrUnknownBucket
	}
	if len(b.def.Apps) > 0 && !slices.Contains(b.def.Apps, l.app) {
		return nil, client.ErrAppNotAllowed
	}
	b.refill(now)
	return b, nil
}

// Acquire takes n tokens from bucket, with client.Limiter's results and
// errors.
func (l *Limiter) Acquire(ctx context.Context, bucket string, n int64) (client.Result, error) {
	res, err := l.acquire(ctx, bucket, n)
	if l.observe != nil {
		l.observe(client.Decision{Bucket: bucket, N: n, Result: res, Err: err})
	}
	return res, err
}

func (l *Limiter) acquire(ctx context.Context, name string, n int64) (client.Result, error) {
	if err := ctx.Err(); err != nil {
		return client.Result{}, err
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := l.lookup(name, n, now)
	if err != nil {
		var res client.Result
		if b != nil {
			res.Limit = b.def.Capacity
		}
		return res, err
	}
	if n > b.def.Capacity {
		return client.Result{Limit: b.def.Capacity}, client.ErrExceedsCapacity
	}
	if b.tokens >= float64(n) {
		b.tokens -= float64(n)
		return b.result(true, n), nil
	}
	res := b.result(false, n)
	res.Allowed, res.WouldDeny = b.def.Shadow, b.def.Shadow
	return res, nil
}

// Allow takes one token from bucket and reports whether it was granted.
func (l *Limiter) Allow(ctx context.Context, bucket string) bool {
	res, err := l.Acquire(ctx, bucket, 1)
	return err == nil && res.Allowed
}

// Wait blocks until n tokens of bucket are granted or ctx ends, like
// client.Wait; it sleeps in real time for the RetryAfter the clock gives.
// With a ManualClock, another goroutine must advance the clock.
func (l *Limiter) Wait(ctx context.Context, bucket string, n int64) error {
	return client.Wait(ctx, l, bucket, n)
}

// AcquireAll takes the tokens of every request, or none, like
// client.Limiter.AcquireAll.
func (l *Limiter) AcquireAll(ctx context.Context, reqs []client.Request) (client.Results, error) {
	res, err := l.acquireAll(ctx, reqs)
	if l.observe != nil {
		for i, r := range reqs {
			d := client.Decision{Bucket: r.Bucket, N: r.N, Err: err}
			if i < len(res.Each) {
				d.Result = res.Each[i]
			}
			l.observe(d)
		}
	}
	return res, err
}

func (l *Limiter) acquireAll(ctx context.Context, reqs []client.Request) (client.Results, error) {
	if len(reqs) == 0 || len(reqs) > client.MaxRequests {
		return client.Results{}, fmt.Errorf("memlimit: %d requests: %w", len(reqs), client.ErrInvalidN)
	}
	if err := ctx.Err(); err != nil {
		return client.Results{}, err
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Answer every request as if the earlier ones were taken, as the
	// script does, then take all or nothing.
	want := map[*bucket]float64{}
	left := map[*bucket]float64{}
	res := client.Results{Allowed: true, Each: make([]client.Result, len(reqs))}
	for i, r := range reqs {
		b, err := l.lookup(r.Bucket, r.N, now)
		if err == nil && want[b]+float64(r.N) > float64(b.def.Capacity) {
			err = client.ErrExceedsCapacity
		}
		if err != nil {
			return client.Results{}, fmt.Errorf("memlimit: request %d (bucket %q): %w", i, r.Bucket, err)
		}
		want[b] += float64(r.N)
		tokens, seen := left[b]
		if !seen {
			tokens = b.tokens
		}
		n := float64(r.N)
		e := client.Result{Limit: b.def.Capacity}
		if math.Max(tokens, 0) >= n {
			tokens -= n
		} else {
			e.RetryAfter = b.until(n - tokens)
			e.WouldDeny = b.def.Shadow
			res.Allowed = res.Allowed && b.def.Shadow
		}
		left[b] = tokens
		e.Remaining = int64(math.Floor(math.Max(tokens, 0)))
		e.ResetAfter = b.until(float64(b.def.Capacity) - tokens)
		res.Each[i] = e
	}
	for _, e := range res.Each {
		if !res.Allowed {
			res.RetryAfter = max(res.RetryAfter, e.RetryAfter)
		}
	}
	for i := range res.Each {
		res.Each[i].Allowed = res.Allowed
		if res.Allowed && !res.Each[i].WouldDeny {
			res.Each[i].RetryAfter = 0
		}
	}
	if res.Allowed {
		for b, tokens := range left {
			b.tokens = tokens
		}
	}
	return res, nil
}

// Refund gives n tokens back to bucket, never above capacity.
func (l *Limiter) Refund(ctx context.Context, bucket string, n int64) (client.Adjustment, error) {
	return l.adjust(ctx, bucket, n)
}

// Charge takes n tokens from bucket after the fact; the bucket may go into
// debt, never deeper than its capacity.
func (l *Limiter) Charge(ctx context.Context, bucket string, n int64) (client.Adjustment, error) {
	return l.adjust(ctx, bucket, -n)
}

func (l *Limiter) adjust(ctx context.Context, name string, delta int64) (client.Adjustment, error) {
	if err := ctx.Err(); err != nil {
		return client.Adjustment{}, err
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := l.lookup(name, max(delta, -delta), now)
	if err != nil {
		return client.Adjustment{}, err
	}
	capacity := float64(b.def.Capacity)
	before := b.tokens
	b.tokens = math.Max(-capacity, math.Min(capacity, b.tokens+float64(delta)))
	return client.Adjustment{
		Applied: int64(math.Floor(math.Abs(b.tokens-before) + 0.5)), Remaining: int64(math.Floor(b.tokens)),
		Limit: b.def.Capacity, ResetAfter: b.until(capacity - b.tokens),
	}, nil
}
