// Package memlimit is an in-memory Sluice limiter for unit tests: the same
// Acquire, Allow, Wait, AcquireKey, AcquireAll, Refund and Charge as
// client.Limiter (and TakeSlot and TakeSlotKey for concurrency limits,
// Bucket.SlotLease), with the same token math (the Go core the scripts'
// arithmetic is mirrored in, internal/redisscript/tokens), results and
// errors, keyed buckets and their overrides included, but buckets defined
// in the test and a clock the test can move. docs/conformance.json runs
// through it as through Redis. It implements client.Acquirer,
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
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/slots"
	"github.com/sluicehq/sluice/internal/redisscript/tokens"
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
	// time.Second is 5 per second. Permits is kept in millionths, as
	// Redis keeps it (at least 0.000001).
	Permits float64
	Per     time.Duration
	// Apps are the apps allowed to take tokens; empty allows every app.
	Apps []string
	// Shadow puts the bucket in shadow mode: where it would deny, it
	// allows with Result.WouldDeny set and takes nothing.
	Shadow bool
	// Reserve is the tokens kept for requests marked critical
	// (client.Critical): any other request is refused when taking its
	// tokens would leave fewer. 0 (none) to Capacity - 1. Each override of
	// a keyed bucket keeps the bucket's share of its capacity.
	Reserve int64
	// Keyed makes it a keyed bucket: every key has its own tokens under
	// the bucket's limit, or an override's (Override); take them with
	// AcquireKey or a Request with a Key. As in Redis, a plain call on a
	// keyed bucket, or a keyed call on a plain one, answers
	// client.ErrUnknownBucket.
	Keyed bool
	// SlotLease, when not 0, makes it a concurrency limit: Capacity is the
	// most slots held at once (of each key, when Keyed), taken with
	// TakeSlot or TakeSlotKey, and a slot neither released nor renewed
	// expires SlotLease after it was taken or last renewed. Permits and
	// Per are not used. As in Redis, an acquire of a concurrency limit, or
	// a slot of a token bucket, answers client.ErrWrongKind.
	SlotLease time.Duration
	// Period makes the bucket a calendar quota: at most Capacity requests
	// per period, "hour", "day", "week" (from Monday) or "month", in the
	// IANA time zone Zone ("UTC" when empty), counted from 0 at each
	// period's start; Permits and Per are not used. Results report the
	// requests left this period as Remaining and the time until the period
	// ends as ResetAfter (and, when denied, RetryAfter), as Redis does.
	Period string
	Zone   string
	// Boundaries, instead of Period and Zone, are the instants at which
	// the quota's periods start, ascending: a test can place a reset where
	// it needs one. Outside them the quota answers client.ErrUnknownBucket,
	// as a quota whose table ran out does in Redis.
	Boundaries []time.Time
}

// Override is the limit of some keys of a keyed bucket: the key Key
// exactly, or with Prefix every key starting with Key. The most specific
// wins: the exact override, else the longest matching prefix, else the
// bucket's own limit. Shadow puts the keys it applies to in shadow mode.
type Override struct {
	Key      string
	Prefix   bool
	Capacity int64
	Permits  float64
	Per      time.Duration
	Shadow   bool
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock sets the clock (default: the system clock).
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithObserver calls f after every Acquire, Allow, AcquireKey and
// AcquireAll request and every TakeSlot and TakeSlotKey, like
// client.WithObserver.
func WithObserver(f func(client.Decision)) Option { return func(l *Limiter) { l.observe = f } }

// Limiter is an in-memory limiter for one app. It is safe for concurrent
// use. Create it with New.
type Limiter struct {
	app     string
	clock   Clock
	observe func(client.Decision)

	*store // shared with the Limiters of other apps made by As
}

// store is the buckets, shared by the Limiters of one New and its As.
type store struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type limit struct {
	tokens.Limit
	shadow bool
}

type bucket struct {
	def Bucket
	lim limit
	// A concurrency limit: the slots of the limit, or of each key.
	slots    slots.Set
	keySlots map[string]*slots.Set
	q        *periods // a calendar quota; nil for the other kinds
	// A plain quota: its count and the start of the period it counts (µs).
	used, pstart int64
	// A keyed quota: each key's count and period start.
	qkeys  map[string][2]int64
	tokens float64 // plain bucket: tokens (negative in debt) at ts
	ts     int64   // µs
	// A keyed bucket: each key's full_at (µs), and the overrides.
	keys   map[string]float64
	exact  map[string]limit
	prefix map[string]limit
}

var _ client.Acquirer = (*Limiter)(nil)

// maxN is the largest n and capacity, as in Redis; maxKey the longest key.
const (
	maxN   = 1_000_000_000
	maxKey = 256
)

// New returns an empty Limiter that takes tokens as app.
func New(app string, opts ...Option) *Limiter {
	l := &Limiter{app: app, clock: systemClock{}, store: &store{buckets: map[string]*bucket{}}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// As returns a Limiter that takes tokens as app from the same buckets,
// with the same clock and observer: two services sharing a bucket, as
// apps share one in Redis.
func (l *Limiter) As(app string) *Limiter {
	c := *l
	c.app = app
	return &c
}

func limitOf(what string, capacity int64, permits float64, per time.Duration, shadow bool, reserve int64) (limit, error) {
	pm := math.Round(permits * 1e6)
	switch {
	case capacity < 1 || capacity > maxN:
		return limit{}, fmt.Errorf("memlimit: %s: capacity %d must be between 1 and 1000000000", what, capacity)
	case !(pm >= 1) || pm > 1e15 || per <= 0:
		return limit{}, fmt.Errorf("memlimit: %s: permits (at least 0.000001) and per must be positive", what)
	case reserve < 0 || reserve >= capacity:
		return limit{}, fmt.Errorf("memlimit: %s: reserve %d must be between 0 and the capacity less one", what, reserve)
	}
	return limit{tokens.Limit{Capacity: capacity, PermitsMicro: int64(pm), Period: per.Seconds(), Reserve: reserve}, shadow}, nil
}

func (l *Limiter) now() int64 { return l.clock.Now().UnixMicro() }

// Define creates bucket name, full, or replaces its definition keeping its
// tokens (clamped to the new capacity; a debt is forgiven), as the sync
// worker does in Redis. A keyed bucket keeps its keys and overrides;
// changing Keyed, or between a token bucket and a quota, makes a new
// bucket. A quota keeps its counts.
func (l *Limiter) Define(name string, def Bucket) error {
	quotaDef := def.Period != "" || def.Boundaries != nil
	if def.Reserve != 0 && (quotaDef || def.SlotLease != 0) {
		return fmt.Errorf("memlimit: bucket %s: only a token bucket has a reserve", name)
	}
	if def.SlotLease != 0 {
		if quotaDef {
			return fmt.Errorf("memlimit: bucket %s: a concurrency limit (SlotLease) has no Period, Zone or Boundaries", name)
		}
		// A concurrency limit has no rate: any valid one stands in for it.
		if def.SlotLease < time.Millisecond || def.SlotLease > maxSlotLease {
			return fmt.Errorf("memlimit: bucket %s: slot lease time %v must be between 1ms and %v", name, def.SlotLease,
				maxSlotLease)
		}
		def.Permits, def.Per = 1, time.Second
	}
	var lim limit
	var q *periods
	var err error
	if quotaDef {
		q, err = periodsOf(def)
		if err == nil {
			lim, err = quotaLimitOf("quota "+name, def.Capacity, def.Shadow)
		}
	} else {
		lim, err = limitOf("bucket "+name, def.Capacity, def.Permits, def.Per, def.Shadow, def.Reserve)
	}
	if err != nil {
		return err
	}
	def.Apps = slices.Clone(def.Apps)
	def.Boundaries = slices.Clone(def.Boundaries)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	if b == nil || b.def.Keyed != def.Keyed || (b.def.SlotLease == 0) != (def.SlotLease == 0) || (b.q == nil) != (q == nil) {
		b = &bucket{tokens: float64(def.Capacity), ts: now}
		if def.Keyed {
			b.keys, b.exact, b.prefix = map[string]float64{}, map[string]limit{}, map[string]limit{}
			b.keySlots = map[string]*slots.Set{}
			b.qkeys = map[string][2]int64{}
		}
		l.buckets[name] = b
	} else if q == nil {
		b.tokens, b.ts = b.lim.Refill(b.tokens, b.ts, now)
	}
	b.def, b.lim, b.q = def, lim, q
	b.tokens = math.Max(0, math.Min(b.tokens, float64(def.Capacity)))
	return nil
}

// quotaLimitOf is the limit of a quota: its capacity, no rate.
func quotaLimitOf(what string, capacity int64, shadow bool) (limit, error) {
	if capacity < 1 || capacity > maxN {
		return limit{}, fmt.Errorf("memlimit: %s: quota %d must be between 1 and 1000000000", what, capacity)
	}
	return limit{tokens.Limit{Capacity: capacity}, shadow}, nil
}

// periods are a quota's periods: a period of a time zone, or a table.
type periods struct {
	period quota.Period
	loc    *time.Location
	table  []int64 // Unix seconds; when not nil, instead of period and loc
}

func periodsOf(def Bucket) (*periods, error) {
	if def.Boundaries != nil {
		if def.Period != "" || def.Zone != "" {
			return nil, errors.New("memlimit: a quota has Period and Zone, or Boundaries, not both")
		}
		t := make([]int64, len(def.Boundaries))
		for i, b := range def.Boundaries {
			if b.Nanosecond() != 0 || (i > 0 && !b.After(def.Boundaries[i-1])) {
				return nil, errors.New("memlimit: quota boundaries must be whole seconds, ascending")
			}
			t[i] = b.Unix()
		}
		if len(t) < 2 {
			return nil, errors.New("memlimit: a quota needs at least two boundaries")
		}
		return &periods{table: t}, nil
	}
	p, err := quota.ParsePeriod(def.Period)
	if err != nil {
		return nil, fmt.Errorf("memlimit: %w", err)
	}
	zone := def.Zone
	if zone == "" {
		zone = "UTC"
	}
	loc, err := quota.LoadZone(zone)
	if err != nil {
		return nil, fmt.Errorf("memlimit: %w", err)
	}
	return &periods{period: p, loc: loc}, nil
}

// at returns the period containing now (µs): its start and end in µs, or
// false outside a table.
func (p *periods) at(now int64) (int64, int64, bool) {
	if p.table != nil {
		s, e, ok := quota.Find(p.table, now)
		return s * 1_000_000, e * 1_000_000, ok
	}
	s := p.period.Start(time.UnixMicro(now), p.loc)
	return s.UnixMicro(), p.period.Next(s, p.loc).UnixMicro(), true
}

// Override sets an override of keyed bucket name (replacing one of the
// same key and kind). The override of a concurrency limit needs only
// Capacity (the key's most slots at once).
//
// The override of a quota is another quota for its keys (Capacity); its
// Permits and Per are not used.
func (l *Limiter) Override(name string, o Override) error {
	if len(o.Key) < 1 || len(o.Key) > maxKey {
		return fmt.Errorf("memlimit: override of %s: %w", name, client.ErrInvalidKey)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	if b == nil || !b.def.Keyed {
		return fmt.Errorf("memlimit: override of %s: not a keyed bucket: %w", name, client.ErrUnknownBucket)
	}
	var lim limit
	var err error
	switch {
	case b.q != nil:
		lim, err = quotaLimitOf("override of "+name, o.Capacity, o.Shadow)
	case b.def.SlotLease != 0:
		// A concurrency limit has no rate: any valid one stands in for it,
		// as in Define.
		lim, err = limitOf("override of "+name, o.Capacity, 1, time.Second, o.Shadow, 0)
	default:
		lim, err = limitOf("override of "+name, o.Capacity, o.Permits, o.Per, o.Shadow, 0)
	}
	if err != nil {
		return err
	}
	if o.Prefix {
		b.prefix[o.Key] = lim
	} else {
		b.exact[o.Key] = lim
	}
	return nil
}

// DeleteOverride removes an override of keyed bucket name.
func (l *Limiter) DeleteOverride(name, key string, prefix bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	switch {
	case b == nil || !b.def.Keyed:
	case prefix:
		delete(b.prefix, key)
	default:
		delete(b.exact, key)
	}
}

// Delete removes bucket name: later calls get client.ErrUnknownBucket.
func (l *Limiter) Delete(name string) {
	l.mu.Lock()
	delete(l.buckets, name)
	l.mu.Unlock()
}

// Tokens returns the tokens plain bucket name holds now (negative in
// debt), and false for an unknown or keyed bucket.
func (l *Limiter) Tokens(name string) (float64, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	if b == nil || b.def.Keyed || b.q != nil {
		return 0, false
	}
	b.tokens, b.ts = b.lim.Refill(b.tokens, b.ts, now)
	return b.tokens, true
}

// Used returns what plain quota name counted in the period containing
// now, and false for an unknown or keyed bucket, a token bucket, or a
// time its boundaries do not cover.
func (l *Limiter) Used(name string) (int64, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	if b == nil || b.def.Keyed || b.q == nil {
		return 0, false
	}
	s, _, ok := b.q.at(now)
	if !ok {
		return 0, false
	}
	if b.pstart != s {
		return 0, true
	}
	return b.used, true
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

func resultOf(a tokens.Answer, capacity int64) client.Result {
	return client.Result{Allowed: a.Code != tokens.Denied, WouldDeny: a.Code == tokens.WouldDeny,
		Remaining: a.Remaining, RetryAfter: micros(a.RetryMicros), Limit: capacity, ResetAfter: micros(a.ResetMicros)}
}

// lookup returns bucket name for the Limiter's app, or the error of a call
// that can never succeed, with the capacity the client reports with it. l.mu
// must be held.
func (l *Limiter) lookup(name string, keyed bool, n int64) (*bucket, int64, error) {
	if n < 1 || n > maxN {
		return nil, 0, client.ErrInvalidN
	}
	b := l.buckets[name]
	if b == nil || b.def.Keyed != keyed {
		return nil, 0, client.ErrUnknownBucket
	}
	if len(b.def.Apps) > 0 && !slices.Contains(b.def.Apps, l.app) {
		return nil, b.def.Capacity, client.ErrAppNotAllowed
	}
	return b, 0, nil
}

// keyLimit is the limit of key: the exact override, else the longest
// matching prefix override, else the bucket's. Shadow mode: the bucket's
// covers every key, an override's its keys. An override keeps the
// bucket's share of its capacity as its reserve.
func (b *bucket) keyLimit(key string) limit {
	lim, ok := b.exact[key]
	if !ok {
		best := -1
		for p, pl := range b.prefix {
			if len(p) > best && strings.HasPrefix(key, p) {
				lim, ok, best = pl, true, len(p)
			}
		}
	}
	if !ok {
		return b.lim
	}
	lim.shadow = lim.shadow || b.lim.shadow
	lim.Reserve = tokens.ScaleReserve(b.lim.Reserve, b.lim.Capacity, lim.Capacity)
	return lim
}

// Acquire takes n tokens from bucket, with client.Limiter's results and
// errors; a ctx marked client.Critical may take the bucket's reserve.
func (l *Limiter) Acquire(ctx context.Context, bucket string, n int64) (client.Result, error) {
	res, err := l.one(ctx, bucket, "", false, n)
	if l.observe != nil {
		l.observe(client.Decision{Bucket: bucket, N: n, Result: res, Err: err})
	}
	return res, err
}

// AcquireKey takes n tokens for key from keyed bucket bucket, with
// client.Limiter.AcquireKey's results and errors.
func (l *Limiter) AcquireKey(ctx context.Context, bucket, key string, n int64) (client.Result, error) {
	res, err := l.one(ctx, bucket, key, true, n)
	if l.observe != nil {
		l.observe(client.Decision{Bucket: bucket, Key: key, N: n, Result: res, Err: err})
	}
	return res, err
}

// one answers a single request: a set of one, without the set's wrapping
// of errors.
func (l *Limiter) one(ctx context.Context, name, key string, keyed bool, n int64) (client.Result, error) {
	res, _, err := l.acquireAll(ctx, []request{{Bucket: name, Key: key, N: n, keyed: keyed}})
	return res.Each[0], err
}

// request is a client.Request that says whether it is keyed: AcquireKey
// with key "" is an invalid key, not a plain request.
type request struct {
	Bucket, Key string
	N           int64
	keyed       bool
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
// client.Limiter.AcquireAll: a request with a Key takes from that key of
// a keyed bucket.
func (l *Limiter) AcquireAll(ctx context.Context, reqs []client.Request) (client.Results, error) {
	rs := make([]request, len(reqs))
	for i, r := range reqs {
		rs[i] = request{Bucket: r.Bucket, Key: r.Key, N: r.N, keyed: r.Key != ""}
	}
	res, failed, err := l.acquireAll(ctx, rs)
	if err != nil && failed >= 0 {
		err = fmt.Errorf("memlimit: request %d (bucket %q): %w", failed, reqs[failed].Bucket, err)
	}
	if l.observe != nil {
		for i, r := range reqs {
			d := client.Decision{Bucket: r.Bucket, Key: r.Key, N: r.N, Err: err}
			if i < len(res.Each) {
				d.Result = res.Each[i]
			}
			l.observe(d)
		}
	}
	return res, err
}

// state is one bucket, or one key of a keyed bucket, during a set.
type state struct {
	lim    limit
	tokens float64 // plain
	ts     int64   // plain
	fullAt float64 // keyed
	want   int64   // what the set asks of it so far
	took   bool
	// A quota: the period containing now (µs) and its count.
	quota          bool
	ps, pe, qcount int64
}

// acquireAll answers a set as the acquire-all script does: every request
// as if the earlier ones were taken, an error beating a denial, then all
// or nothing. failed is the index of the request whose error is returned,
// or -1.
func (l *Limiter) acquireAll(ctx context.Context, reqs []request) (client.Results, int, error) {
	if len(reqs) == 0 || len(reqs) > client.MaxRequests {
		return client.Results{Each: make([]client.Result, 1)}, -1,
			fmt.Errorf("memlimit: %d requests: %w", len(reqs), client.ErrInvalidN)
	}
	res := client.Results{Allowed: true, Each: make([]client.Result, len(reqs))}
	if err := ctx.Err(); err != nil {
		return res, -1, err
	}
	now := l.now()
	critical := client.IsCritical(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	type id struct {
		name, key string
		keyed     bool
	}
	states := map[id]*state{}
	var order []id
	for i, r := range reqs {
		key, plain := r.Key, !r.keyed
		if r.N >= 1 && r.N <= maxN && r.keyed && (len(key) < 1 || len(key) > maxKey) {
			return res, i, client.ErrInvalidKey
		}
		b, capacity, err := l.lookup(r.Bucket, r.keyed, r.N)
		if err == nil && b.def.SlotLease != 0 {
			capacity, err = b.def.Capacity, client.ErrWrongKind
		}
		if err != nil {
			res.Each[i].Limit = capacity
			return res, i, err
		}
		at := id{r.Bucket, key, r.keyed}
		s := states[at]
		if s == nil {
			s = &state{}
			switch {
			case b.q != nil:
				var c [2]int64
				if plain {
					s.lim, c = b.lim, [2]int64{b.used, b.pstart}
				} else {
					s.lim, c = b.keyLimit(key), b.qkeys[key]
				}
				// As the script: a request above the quota first, then the
				// table.
				ps, pe, ok := b.q.at(now)
				if !ok && r.N <= s.lim.Capacity {
					return res, i, client.ErrUnknownBucket
				}
				s.quota, s.ps, s.pe = true, ps, pe
				if c[1] == ps {
					s.qcount = c[0]
				}
			case plain:
				s.lim = b.lim
				s.tokens, s.ts = b.lim.Refill(b.tokens, b.ts, now)
			default:
				s.lim = b.keyLimit(key)
				fa, ok := b.keys[key]
				s.fullAt = s.lim.KeyFullAt(fa, ok, now)
			}
			states[at] = s
			order = append(order, at)
		}
		// Alone or with the earlier requests of this bucket or key, more
		// than it ever holds.
		if s.lim.Exceeds(s.want+r.N, critical) {
			res.Each[i].Limit = s.lim.Capacity
			return res, i, client.ErrExceedsCapacity
		}
		s.want += r.N
		var a tokens.Answer
		var ok bool
		switch {
		case s.quota:
			s.qcount, ok, a = quota.Take(s.lim.Capacity, s.qcount, r.N, s.pe, now, s.lim.shadow)
		case plain:
			s.tokens, ok, a = s.lim.Take(s.tokens, r.N, s.lim.shadow, critical)
		default:
			s.fullAt, ok, a = s.lim.KeyTake(s.fullAt, r.N, now, s.lim.shadow, critical)
		}
		s.took = s.took || ok
		res.Each[i] = resultOf(a, s.lim.Capacity)
		if a.Code == tokens.Denied {
			res.Allowed = false
		}
	}
	for i := range res.Each {
		e := &res.Each[i]
		e.Allowed = res.Allowed
		if res.Allowed && !e.WouldDeny {
			e.RetryAfter = 0
		}
		if !res.Allowed {
			res.RetryAfter = max(res.RetryAfter, e.RetryAfter)
		}
	}
	if !res.Allowed {
		return res, -1, nil
	}
	for _, at := range order {
		s, b := states[at], l.buckets[at.name]
		switch {
		case s.quota && !at.keyed:
			b.used, b.pstart = s.qcount, s.ps
		case s.quota && s.took:
			b.qkeys[at.key] = [2]int64{s.qcount, s.ps}
		case !at.keyed:
			b.tokens, b.ts = s.tokens, s.ts
		case s.took:
			b.keys[at.key] = s.fullAt
		}
	}
	return res, -1, nil
}

// Refund gives n tokens back to bucket, never above capacity.
func (l *Limiter) Refund(ctx context.Context, bucket string, n int64) (client.Adjustment, error) {
	return l.adjust(ctx, bucket, n, n)
}

// Charge takes n tokens from bucket after the fact; the bucket may go into
// debt, never deeper than its capacity.
func (l *Limiter) Charge(ctx context.Context, bucket string, n int64) (client.Adjustment, error) {
	return l.adjust(ctx, bucket, n, -n)
}

func (l *Limiter) adjust(ctx context.Context, name string, n, delta int64) (client.Adjustment, error) {
	if err := ctx.Err(); err != nil {
		return client.Adjustment{}, err
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, capacity, err := l.lookup(name, false, n)
	if err != nil {
		return client.Adjustment{Limit: capacity}, err
	}
	if b.def.SlotLease != 0 {
		return client.Adjustment{Limit: capacity}, client.ErrWrongKind
	}
	if b.q != nil {
		// As in Redis: refunds and charges are a token bucket's.
		return client.Adjustment{}, client.ErrUnknownBucket
	}
	b.tokens, b.ts = b.lim.Refill(b.tokens, b.ts, now)
	var applied int64
	b.tokens, applied = b.lim.Adjust(b.tokens, delta)
	return client.Adjustment{Applied: applied, Remaining: int64(math.Floor(b.tokens)), Limit: b.def.Capacity,
		ResetAfter: micros(b.lim.Until(float64(b.def.Capacity) - b.tokens))}, nil
}
