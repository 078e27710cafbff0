package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client/internal/cowmap"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// Errors of Acquire. Compare with errors.Is.
var (
	// ErrUnknownBucket: no bucket of that name exists in Redis.
	ErrUnknownBucket = errors.New("sluice: unknown bucket")
	// ErrAppNotAllowed: the Limiter's app is not an allowed app of the bucket.
	ErrAppNotAllowed = errors.New("sluice: app not allowed on bucket")
	// ErrExceedsCapacity: n is larger than the bucket's capacity and can never be granted.
	ErrExceedsCapacity = errors.New("sluice: n exceeds bucket capacity")
	// ErrInvalidN: n is not a whole number from 1 to 1e9.
	ErrInvalidN = fmt.Errorf("sluice: n must be between 1 and %d", redisscript.MaxN)
	// ErrUnavailable: Redis did not answer and the failure policy refused the
	// call (FailClosed, or FailLocal for a bucket whose config was never seen).
	ErrUnavailable = errors.New("sluice: redis unavailable")
	// ErrClosed: the Limiter was closed.
	ErrClosed = errors.New("sluice: limiter closed")
	// ErrInvalidKey: the key of a keyed acquire is empty or longer than
	// 256 bytes.
	ErrInvalidKey = errors.New("sluice: key must be 1 to 256 bytes")
)

// Result is the answer to one Acquire. The zero value is a denial with
// nothing known.
type Result struct {
	// Allowed reports whether the tokens were granted.
	Allowed bool
	// Remaining is the whole tokens left in the bucket after this call.
	Remaining int64
	// RetryAfter is, when denied, how long until the tokens asked for will
	// be there (if nobody else takes them first).
	RetryAfter time.Duration
	// Limit is the bucket's capacity; 0 when unknown (fail open).
	Limit int64
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
	// Fallback is true when the failure policy answered instead of Redis.
	Fallback bool
	// WouldDeny is true when the bucket is in shadow mode and would have
	// denied: Allowed is true, nothing was taken, and RetryAfter says when
	// the tokens would have been there.
	WouldDeny bool
}

// FailurePolicy says how a Limiter answers while Redis is unreachable or
// slow, or lost a bucket's state (see WithStateLossGrace).
//
// Each policy has an allowance: the most it can admit beyond what Redis
// alone would (capacity + rate x T over any span T), during and across
// any number of outages. With F the time a Limiter answered a bucket by
// its policy (Redis failing to answer, or the bucket's state lost):
//
//   - FailClosed: 0.
//   - FailLocal: rate/instances x F per Limiter, so at most rate x F when
//     the instances of WithInstances are all in fallback together, and
//     never more than rate x T. Nothing else: no share of the capacity.
//   - FailOpen: unbounded (every call during F is granted).
//
// F runs from when the first failed call of a streak was sent to Redis's
// next answer (Stats.Fallback), plus the time a bucket's state was lost
// (Stats.StateLost). A bucket's reserve: FailLocal keeps its share of it
// (the reserve scaled to the local capacity) for critical requests, so the
// others get at most the allowance less that share, and critical ones the
// whole allowance; FailOpen grants every request, critical or not;
// FailClosed none. A Redis that lost its data (restarted without
// persistence) starts every bucket full again once the sync worker
// restores it: that adds up to one capacity per loss, whatever the policy.
//
// For concurrency limits (TakeSlot) the allowance is counted in slots in
// progress beyond the limit: FailClosed 0; FailLocal at most instances x
// max(1, limit/instances), from an outage's start until the slots it took
// locally end (released locally, or expired after the lease time unless
// renewed locally; they never move to Redis); FailOpen unbounded.
type FailurePolicy int

// Failure policies. The zero value is FailLocal.
const (
	// FailLocal answers from an in-process token bucket per bucket name,
	// run with the last config Redis reported for it at capacity/instances
	// (at least 1) and rate/instances (see WithInstances). The local bucket
	// starts empty, fills only while the policy answers (from the first
	// failed call to Redis's next answer, or while Redis has lost the
	// bucket's state), and keeps its level from one outage to the next. It
	// never takes tokens Redis reported: those are Redis's to grant once it
	// answers again, and granting them here as well would admit them twice
	// at every outage. A bucket whose config this process never saw is
	// refused with ErrUnavailable.
	FailLocal FailurePolicy = iota
	// FailOpen grants every call.
	FailOpen
	// FailClosed refuses every call with ErrUnavailable.
	FailClosed
)

// String names the policy.
func (p FailurePolicy) String() string {
	switch p {
	case FailLocal:
		return "local"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// Decision is what an observer sees of one Acquire or TakeSlot.
type Decision struct {
	// Bucket and N are the arguments of the call; Key is the key of a
	// keyed acquire ("" for a plain one).
	Bucket string
	Key    string
	N      int64
	// Result and Err are what Acquire returned.
	Result Result
	Err    error
	// Latency is how long the call took.
	Latency time.Duration
	// Slot is true for a TakeSlot or TakeSlotKey of a concurrency limit
	// (N is 1): Result is then the take's SlotResult in a token's terms
	// (see SlotResult.Result), so that Result.Used() is the share of the
	// slots in use after the take. Releases and renewals are not observed:
	// they decide nothing.
	Slot bool
}

// Defaults of the options.
const (
	// DefaultTimeout is how long a call waits for Redis.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultProbeInterval is how often an open breaker checks Redis.
	DefaultProbeInterval = 100 * time.Millisecond
	// DefaultStateLossGrace is how long a bucket that Redis lost is
	// answered by the failure policy (see WithStateLossGrace): two reconcile
	// periods of the sync worker at its default.
	DefaultStateLossGrace = time.Minute
)

// Option configures a Limiter.
type Option func(*options)

type options struct {
	policy    FailurePolicy
	instances int
	timeout   time.Duration
	probe     time.Duration
	prefix    string
	log       *slog.Logger
	observe   func(Decision)
	failures  int
	span      time.Duration
	grace     time.Duration
	denials   time.Duration
}

// WithFailurePolicy sets what happens while Redis is unreachable (default FailLocal).
func WithFailurePolicy(p FailurePolicy) Option { return func(o *options) { o.policy = p } }

// WithInstances tells the Limiter how many processes of the service share
// the buckets, so that FailLocal grants each one its share: capacity/n (at
// least 1) and rate/n. Default 1.
func WithInstances(n int) Option { return func(o *options) { o.instances = n } }

// WithTimeout bounds how long an Acquire waits for Redis before the
// failure policy answers (default DefaultTimeout). A call that timed out
// is never sent again: Redis may have run it.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithProbeInterval sets how often a Limiter whose breaker is open checks
// whether Redis answers again (default DefaultProbeInterval).
func WithProbeInterval(d time.Duration) Option { return func(o *options) { o.probe = d } }

// WithBreaker sets when the circuit breaker opens: after failures calls
// in a row failed (no answer from Redis between them) over at least span,
// and a confirming probe found Redis silent too (default
// DefaultBreakerFailures over DefaultBreakerSpan). A stalled client
// process, which sees all its calls in flight fail at one instant, does
// not open it.
func WithBreaker(failures int, span time.Duration) Option {
	return func(o *options) { o.failures, o.span = failures, span }
}

// WithStateLossGrace sets how long a bucket this Limiter saw in Redis
// within that time, and that Redis now calls unknown (it restarted empty
// or was flushed) but without a tombstone (it was not deleted), is
// answered by the failure policy while the sync worker restores it
// (default DefaultStateLossGrace). After that, or for a bucket deleted in
// the console, calls fail with ErrUnknownBucket. Zero turns this off.
func WithStateLossGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// WithDenialCache sets how long at most a denial is answered in-process
// (default DefaultDenialCache; 0 turns the cache off). After Redis denied
// a bucket or key, a call of the same Limiter that the tokens the bucket
// can hold by now (what the denial left, plus the refill since, less what
// this Limiter's calls took or are taking since) cannot cover is denied
// without a round trip, with the Result Redis would give if no other
// process took tokens meanwhile. Every other call goes to Redis, so the
// cache never admits anything. An entry lives d from the denial that made
// it: a refund from another process, a raised limit, a reset or deleted
// bucket, or shadow mode turned on is seen at most d late. Shadow buckets,
// buckets in lease mode and AcquireAll are never answered from it.
func WithDenialCache(d time.Duration) Option { return func(o *options) { o.denials = d } }

// WithKeyPrefix sets the key prefix of bucket hashes (default "sluice:");
// it must match the sync worker's.
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLogger sets where the Limiter reports Redis going away and coming
// back (default slog.Default(); nil discards). Single calls are never logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithObserver calls f after every Acquire (also from Allow, Wait and the
// middleware) and every TakeSlot and TakeSlotKey, on the calling goroutine: keep it fast. It is the hook for
// metrics. Without an observer no clock is read for it.
func WithObserver(f func(Decision)) Option { return func(o *options) { o.observe = f } }

// Limiter takes tokens for one app. It is safe for concurrent use; create
// one per app and process and share it. The zero value is not usable: use New.
type Limiter struct {
	rdb     redis.UniversalClient
	app     string
	appArg  any
	ks      redisscript.Keyspace
	opt     options
	start   time.Time
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  atomic.Bool
	brk     breaker
	open    atomic.Bool   // mirrors brk: true while calls go straight to the policy
	outages atomic.Uint64 // counts breaker openings
	probeCh chan struct{}
	// invalidLogged is when a call with an invalid bucket name was last
	// logged, in ns since start: such names have no bucket state.
	invalidLogged atomic.Int64
	// misconfiguredLog lets one misconfiguration line a minute per kind
	// through (loggate.go).
	misconfiguredLog logGate

	buckets cowmap.Map[*bucket]

	keyed keyedBuckets // state of keyed buckets (keyed.go)

	local localSlots // FailLocal's concurrency limits (concurrency.go)

	denied denials // denials answered in-process (denial.go)
	// cachedDenials counts calls the denial cache answered.
	cachedDenials atomic.Uint64

	snd   *sender
	batch *batcher

	fn functions // the token scripts as Redis functions (function.go)
}

// maxCachedBuckets bounds the per-name state kept by a Limiter; names past
// it still work but learn no config for FailLocal.
const maxCachedBuckets = 10_000

// New returns a Limiter that takes tokens as app through rdb, which may be
// a single-node, Sentinel (failover) or Cluster client. The Limiter does
// not close rdb. Commands the Limiter sends are never retried by go-redis,
// whatever rdb's MaxRetries, except to reload the script after NOSCRIPT
// (or the function after "Function not found").
//
// Over a *redis.Client (single node or Sentinel), callers send their calls
// themselves, through a copy of rdb made by rdb.WithTimeout(timeout) that
// shares its connection pool. That copy has the hooks rdb had when New was
// called: add hooks before.
func New(rdb redis.UniversalClient, app string, opts ...Option) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("sluice: nil redis client")
	}
	if !redisscript.ValidName(app) {
		return nil, fmt.Errorf("sluice: invalid app name %q", app)
	}
	o := options{instances: 1, timeout: DefaultTimeout, probe: DefaultProbeInterval, log: slog.Default(),
		failures: DefaultBreakerFailures, span: DefaultBreakerSpan, grace: DefaultStateLossGrace,
		denials: DefaultDenialCache}
	for _, f := range opts {
		f(&o)
	}
	switch {
	case o.policy < FailLocal || o.policy > FailClosed:
		return nil, fmt.Errorf("sluice: unknown failure policy %d", int(o.policy))
	case o.instances < 1:
		return nil, fmt.Errorf("sluice: instances must be at least 1, not %d", o.instances)
	case o.timeout <= 0:
		return nil, errors.New("sluice: timeout must be positive")
	case o.probe <= 0:
		return nil, errors.New("sluice: probe interval must be positive")
	case o.failures < 1:
		return nil, fmt.Errorf("sluice: breaker failures must be at least 1, not %d", o.failures)
	case o.span < 0:
		return nil, errors.New("sluice: breaker span must not be negative")
	case o.grace < 0:
		return nil, errors.New("sluice: state loss grace must not be negative")
	case o.denials < 0:
		return nil, errors.New("sluice: denial cache time must not be negative")
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Limiter{
		rdb: rdb, app: app, appArg: app,
		ks: redisscript.Keyspace{Prefix: o.prefix}, opt: o, start: time.Now(),
		ctx: ctx, cancel: cancel, probeCh: make(chan struct{}, 1),
		brk: breaker{minFailures: o.failures, span: o.span},
	}
	l.denied.maxAge = int64(o.denials)
	l.snd, l.batch = newSender(l)
	l.wg.Add(1)
	go l.prober()
	l.startFunctions()
	return l, nil
}

// Close stops the Limiter's goroutines; it does not wait for a call stuck
// on an unresponsive server, nor close the Redis client. It does wait for
// a load of the function library still in flight, which ends within the
// timeout (WithTimeout). Calls after Close return ErrClosed.
func (l *Limiter) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.endLeases()
	l.cancel()
	l.batch.close()
	l.wg.Wait()
	l.fn.close()
	return nil
}

// Acquire takes n tokens from bucket. It returns ErrUnknownBucket,
// ErrAppNotAllowed, ErrExceedsCapacity or ErrInvalidN when the call can
// never succeed, ErrUnavailable when Redis did not answer and the failure
// policy refuses (the Result then has Fallback set), and ctx's error when
// ctx ended first. Otherwise the error is nil and Result.Allowed says
// whether the tokens were granted. A ctx marked Critical may take the
// bucket's reserve; any other call is refused when it would leave less than
// the reserve, and gets ErrExceedsCapacity for n above capacity - reserve.
func (l *Limiter) Acquire(ctx context.Context, bucket string, n int64) (Result, error) {
	if l.opt.observe == nil {
		return l.acquire(ctx, bucket, n)
	}
	start := time.Now()
	res, err := l.acquire(ctx, bucket, n)
	l.opt.observe(Decision{Bucket: bucket, N: n, Result: res, Err: err, Latency: time.Since(start)})
	return res, err
}

// Allow takes one token from bucket and reports whether it was granted.
// Errors count as not granted; use Acquire to tell them apart. A bucket
// that cannot serve the app (ErrUnknownBucket, ErrAppNotAllowed), a
// deployment mistake that denies every call, is logged at error level
// once a minute per bucket, and counted by the observer (clientmetrics).
func (l *Limiter) Allow(ctx context.Context, bucket string) bool {
	res, err := l.Acquire(ctx, bucket, 1)
	return err == nil && res.Allowed
}

func (l *Limiter) acquire(ctx context.Context, name string, n int64) (Result, error) {
	if n < 1 || n > redisscript.MaxN {
		return Result{}, ErrInvalidN
	}
	if !redisscript.ValidName(name) {
		// No such name can exist.
		l.misconfigured(&l.invalidLogged, name, ErrUnknownBucket)
		return Result{}, ErrUnknownBucket
	}
	if l.closed.Load() {
		return Result{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	b := l.bucket(name)
	critical := IsCritical(ctx)
	if ls := b.lease.Load(); ls != nil {
		if !critical {
			return ls.take(ctx, n)
		}
		// A lease never holds reserved tokens: a critical call takes
		// leased ones when there are, else asks Redis.
		if res, ok := ls.takeLeased(n); ok {
			return res, nil
		}
	}
	if l.open.Load() {
		return l.fallback(b, n, critical)
	}
	key, _ := b.keyArg.(string)
	sent := int64(l.now())
	var cl claim
	if !critical {
		// A critical call may take what the denials of others left: it
		// never meets the cache.
		var res Result
		var denied bool
		if res, denied, cl = l.denied.answer(key, n, sent); denied {
			l.cachedDenials.Add(1)
			return res, nil
		}
	}
	c := getCall()
	// FCALL of the acquire function where it is loaded, else EVALSHA
	// (function.go); either answers the same.
	fn := l.fn.state.Load()
	c.args[0], c.args[1] = acquireScript.head(fn)
	// Protocol 3: the answer carries the lease time, the shadow mode and
	// the reserve, which FailLocal keeps with the limit it learns.
	c.args[2], c.args[3], c.args[4], c.args[5], c.args[6] = "1", b.keyArg, l.appArg, n, redisscript.ProtocolReserve
	c.nargs, c.src = 7, acquireScript.src
	if critical {
		c.args[7], c.nargs = "1", 8
	}
	reply, err := l.batch.do(ctx, c, l.opt.timeout)
	if err != nil {
		l.denied.release(key, cl)
	}
	switch {
	case err == nil:
	case errors.Is(err, errAbandoned):
		return Result{}, ctx.Err()
	case errors.Is(err, ErrClosed):
		return Result{}, ErrClosed
	default:
		// An error reply of this call alone (a key of the wrong type, say)
		// is answered by the policy too.
		if l.settle(err) {
			l.opt.log.Debug("sluice: acquire failed", "bucket", name, "err", err)
		}
		return l.fallback(b, n, critical)
	}
	a, err := redisscript.AnswerOf(reply)
	if err != nil {
		l.denied.release(key, cl)
		l.failed()
		return l.fallback(b, n, critical)
	}
	l.answered()
	if fn == fnRetry {
		l.retryFunction()
	}
	if !critical {
		l.denied.learn(key, n, sent, cl, a)
	}
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied, redisscript.WouldDeny, redisscript.ExceedsCapacity:
		b.learn(l, name, a) // the app may use the bucket: remember it for FailLocal
		l.startLease(b, name, a)
	case redisscript.UnknownBucket:
		if l.stateLost(ctx, b, name) {
			return l.fallback(b, n, critical)
		}
		b.forget() // the bucket is gone: FailLocal must refuse it
		l.misconfigured(&b.logged, name, ErrUnknownBucket)
	case redisscript.AppNotAllowed:
		b.restored(l, name)
		b.forget() // not ours: FailLocal must refuse it
		l.misconfigured(&b.logged, name, ErrAppNotAllowed)
	}
	return resultOf(a)
}

// resultOf turns the script's answer into what Acquire returns: a Result
// for a decision, the error for a refusal.
func resultOf(a redisscript.Answer) (Result, error) {
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied, redisscript.WouldDeny:
		return Result{
			Allowed:    a.Code != redisscript.Denied,
			WouldDeny:  a.Code == redisscript.WouldDeny,
			Remaining:  a.Remaining,
			RetryAfter: time.Duration(a.RetryAfterMicros) * time.Microsecond,
			Limit:      a.Capacity,
			ResetAfter: time.Duration(a.ResetAfterMicros) * time.Microsecond,
		}, nil
	case redisscript.UnknownBucket:
		return Result{}, ErrUnknownBucket
	case redisscript.AppNotAllowed:
		return Result{Limit: a.Capacity}, ErrAppNotAllowed
	case redisscript.ExceedsCapacity:
		return Result{Limit: a.Capacity}, ErrExceedsCapacity
	case redisscript.InvalidKey:
		return Result{}, ErrInvalidKey
	default:
		return Result{}, ErrInvalidN
	}
}

// bucket returns the cached state of name, creating it if needed.
func (l *Limiter) bucket(name string) *bucket {
	if b, ok := l.buckets.Load(name); ok {
		return b
	}
	return l.buckets.LoadOrAdd(name, func(n int) (*bucket, bool) {
		return &bucket{keyArg: l.ks.Bucket(name)}, n < maxCachedBuckets
	})
}

// unavailable reports whether err means Redis cannot serve any call now
// (a network error, a timeout, a server loading, read-only or down), as
// opposed to an error reply about this one call.
func unavailable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true
	}
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS",
		"OOM", "NOSCRIPT", errFunctionMissing, "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// now is the Limiter's monotonic clock.
func (l *Limiter) now() time.Duration { return time.Since(l.start) }

// answered records an answer from Redis.
func (l *Limiter) answered() {
	l.brk.success(l.now)
	l.batch.failing(false)
}

// settle records on the breaker what a call's error says about Redis, and
// reports whether Redis answered. It is the one home of the rule: no
// error, or an error reply about this call alone (a key of the wrong type,
// a script error), means Redis answered, which ends a streak of failures;
// a timeout, a network error or a server that says it cannot serve
// (unavailable) is a failure. Every call that runs a script goes through
// it.
func (l *Limiter) settle(err error) bool {
	if err == nil || !unavailable(err) {
		l.answered()
		return true
	}
	l.failed()
	return false
}

// failed records a call that Redis did not answer; a breaker that became
// suspect gets its confirming probe.
func (l *Limiter) failed() {
	l.batch.failing(true)
	now := l.now()
	// The call was sent at most the timeout ago.
	if l.closed.Load() || !l.brk.failure(now-l.opt.timeout, now) {
		return
	}
	select {
	case l.probeCh <- struct{}{}:
	default:
	}
}

// Stats are a Limiter's counters since New.
type Stats struct {
	// BreakerOpenings counts how often the circuit breaker opened: Redis
	// stopped answering, and calls went to the failure policy without
	// touching the network.
	BreakerOpenings uint64
	// Fallback is the time calls were answered by the failure policy
	// because Redis did not answer: from when the first failed call of a
	// streak was sent to the next answer of Redis (or the probe that
	// closed the breaker).
	Fallback time.Duration
	// StateLost is the time buckets were answered by the policy because
	// Redis had lost them, summed over buckets.
	StateLost time.Duration
	// CachedDenials counts calls denied by the denial cache, without a
	// round trip (WithDenialCache).
	CachedDenials uint64
}

// Stats returns the Limiter's counters.
func (l *Limiter) Stats() Stats {
	now := l.now()
	var s Stats
	s.BreakerOpenings, s.Fallback = l.brk.stats(now)
	s.CachedDenials = l.cachedDenials.Load()
	for _, b := range l.buckets.All() {
		s.StateLost += b.lostTime(now)
	}
	return s
}

// prober waits for the breaker to become suspect, confirms with a probe
// that Redis does not answer (or closes it again), and while the breaker
// is open, probes every probe interval (loading the script, which a
// restarted Redis lost) and closes it at the first success. One probe at a
// time: a paused Redis sees one pending command, answered as soon as it
// resumes.
func (l *Limiter) prober() {
	defer l.wg.Done()
	tick := time.NewTicker(l.opt.probe)
	defer tick.Stop()
	// pending is the probe in flight, if any. go-redis bounds a read by the
	// client's ReadTimeout, not by a context, so the confirming probe's
	// timeout is a timer here; a probe that outlived it stays the one in
	// flight, answered as soon as Redis is back.
	var pending chan error
	start := func() chan error {
		done := make(chan error, 1)
		go func() { done <- l.probe(l.ctx) }()
		return done
	}
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.probeCh:
		}
		if !l.brk.suspect() {
			continue
		}
		if pending == nil {
			pending = start()
		}
		err := l.confirm(pending)
		if err == ErrClosed {
			return
		}
		if err != errTimeout {
			pending = nil
		}
		if !l.brk.confirm(err == nil, l.now()) {
			continue
		}
		l.outages.Add(1)
		l.open.Store(true)
		l.opt.log.Warn("sluice: redis unavailable, answering by failure policy",
			"app", l.app, "policy", l.opt.policy.String(), "err", err)
		for {
			if pending == nil {
				select {
				case <-l.ctx.Done():
					return
				case <-tick.C:
				}
				pending = start()
			}
			select {
			case <-l.ctx.Done():
				return
			case err = <-pending:
				pending = nil
			}
			if err == nil {
				break
			}
		}
		l.brk.recover(l.now())
		l.open.Store(false)
		l.opt.log.Info("sluice: redis answers again", "app", l.app)
	}
}

// confirmSteps is how many timer steps the confirming probe waits. A
// process starved of CPU fires each step late, so its wait grows with the
// starvation, and the probe's goroutine gets as many chances to run as the
// timer's: a slow client does not mistake its own slowness for Redis's.
const confirmSteps = 8

// confirm waits for the confirming probe pending: its error, errTimeout
// when it did not answer within confirmTimeout (counted in timer steps),
// or ErrClosed when the Limiter was closed first.
func (l *Limiter) confirm(pending chan error) error {
	step := confirmTimeout(l.opt.timeout) / confirmSteps
	timer := time.NewTimer(step)
	defer timer.Stop()
	for i := 0; ; {
		select {
		case <-l.ctx.Done():
			return ErrClosed
		case err := <-pending:
			return err
		case <-timer.C:
			if i++; i == confirmSteps {
				return errTimeout
			}
			timer.Reset(step)
		}
	}
}

func (l *Limiter) probe(ctx context.Context) error {
	sha, err := l.rdb.ScriptLoad(ctx, redisscript.AcquireScript.Source()).Result()
	if err != nil {
		return err
	}
	if sha != redisscript.AcquireScript.SHA() {
		return fmt.Errorf("sluice: script load returned sha %s", sha)
	}
	return nil
}
