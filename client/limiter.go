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
}

// FailurePolicy says how a Limiter answers while Redis is unreachable or slow.
type FailurePolicy int

// Failure policies. The zero value is FailLocal.
const (
	// FailLocal answers from an in-process token bucket per bucket name,
	// built from the last config Redis reported for it, at capacity/instances
	// and rate/instances (see WithInstances). A bucket whose config this
	// process never saw is refused with ErrUnavailable.
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

// Decision is what an observer sees of one Acquire.
type Decision struct {
	// Bucket and N are the arguments of the call.
	Bucket string
	N      int64
	// Result and Err are what Acquire returned.
	Result Result
	Err    error
	// Latency is how long the call took.
	Latency time.Duration
}

// Defaults of the options.
const (
	// DefaultTimeout is how long a call waits for Redis.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultProbeInterval is how often an open breaker checks Redis.
	DefaultProbeInterval = 100 * time.Millisecond
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

// WithKeyPrefix sets the key prefix of bucket hashes (default "sluice:");
// it must match the sync worker's.
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLogger sets where the Limiter reports Redis going away and coming
// back (default slog.Default(); nil discards). Single calls are never logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithObserver calls f after every Acquire (also from Allow, Wait and the
// middleware), on the calling goroutine: keep it fast. It is the hook for
// metrics. Without an observer no clock is read for it.
func WithObserver(f func(Decision)) Option { return func(o *options) { o.observe = f } }

// Limiter takes tokens for one app. It is safe for concurrent use; create
// one per app and process and share it. The zero value is not usable: use New.
type Limiter struct {
	rdb     redis.UniversalClient
	app     string
	appArg  any
	shaArg  any
	srcArg  any
	ks      redisscript.Keyspace
	opt     options
	start   time.Time
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  atomic.Bool
	open    atomic.Bool   // breaker: true while calls go straight to the policy
	outages atomic.Uint64 // counts breaker openings; local buckets restart per outage
	probeCh chan struct{}

	mu      sync.Mutex // guards writes of buckets
	buckets atomic.Pointer[map[string]*bucket]

	q queue
}

// maxCachedBuckets bounds the per-name state kept by a Limiter; names past
// it still work but learn no config for FailLocal.
const maxCachedBuckets = 10_000

// New returns a Limiter that takes tokens as app through rdb, which may be
// a single-node, Sentinel (failover) or Cluster client. The Limiter does
// not close rdb. Commands the Limiter sends are never retried by go-redis,
// whatever rdb's MaxRetries, except to reload the script after NOSCRIPT.
//
// Over a *redis.Client (single node or Sentinel), a caller that finds no
// other call in flight sends its call itself, through a copy of rdb made
// by rdb.WithTimeout(timeout) that shares its connection pool, and keeps
// one connection of the pool while such calls keep coming. That copy has
// the hooks rdb had when New was called: add hooks before.
func New(rdb redis.UniversalClient, app string, opts ...Option) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("sluice: nil redis client")
	}
	if !redisscript.ValidName(app) {
		return nil, fmt.Errorf("sluice: invalid app name %q", app)
	}
	o := options{instances: 1, timeout: DefaultTimeout, probe: DefaultProbeInterval, log: slog.Default()}
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
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Limiter{
		rdb: rdb, app: app, appArg: app,
		shaArg: redisscript.AcquireSHA(), srcArg: redisscript.AcquireSource(),
		ks: redisscript.Keyspace{Prefix: o.prefix}, opt: o, start: time.Now(),
		ctx: ctx, cancel: cancel, probeCh: make(chan struct{}, 1),
	}
	empty := map[string]*bucket{}
	l.buckets.Store(&empty)
	l.q.init(l)
	l.wg.Add(1)
	go l.prober()
	return l, nil
}

// Close stops the Limiter's goroutines; it does not wait for a call stuck
// on an unresponsive server, nor close the Redis client. Calls after Close
// return ErrClosed.
func (l *Limiter) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.cancel()
	l.q.close()
	l.wg.Wait()
	return nil
}

// Acquire takes n tokens from bucket. It returns ErrUnknownBucket,
// ErrAppNotAllowed, ErrExceedsCapacity or ErrInvalidN when the call can
// never succeed, ErrUnavailable when Redis did not answer and the failure
// policy refuses (the Result then has Fallback set), and ctx's error when
// ctx ended first. Otherwise the error is nil and Result.Allowed says
// whether the tokens were granted.
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
// Errors count as not granted; use Acquire to tell them apart.
func (l *Limiter) Allow(ctx context.Context, bucket string) bool {
	res, err := l.Acquire(ctx, bucket, 1)
	return err == nil && res.Allowed
}

func (l *Limiter) acquire(ctx context.Context, name string, n int64) (Result, error) {
	if n < 1 || n > redisscript.MaxN {
		return Result{}, ErrInvalidN
	}
	if !redisscript.ValidName(name) {
		return Result{}, ErrUnknownBucket // no such name can exist
	}
	if l.closed.Load() {
		return Result{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	b := l.bucket(name)
	if l.open.Load() {
		return l.fallback(b, n)
	}
	c := getCall()
	c.args[3], c.args[4], c.args[5] = b.keyArg, l.appArg, n
	reply, err := l.q.do(ctx, c, l.opt.timeout)
	switch {
	case err == nil:
	case errors.Is(err, errAbandoned):
		return Result{}, ctx.Err()
	case errors.Is(err, ErrClosed):
		return Result{}, ErrClosed
	case !unavailable(err):
		// Redis answered, with an error of this call alone (a key of the
		// wrong type, say): the policy answers it, the breaker stays closed.
		l.opt.log.Debug("sluice: acquire failed", "bucket", name, "err", err)
		return l.fallback(b, n)
	default:
		l.trip(err)
		return l.fallback(b, n)
	}
	a, err := redisscript.AnswerOf(reply)
	if err != nil {
		l.trip(err)
		return l.fallback(b, n)
	}
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied, redisscript.ExceedsCapacity:
		b.learn(l, a) // the app may use the bucket: remember it for FailLocal
	default:
		b.forget() // the bucket is gone or not ours: FailLocal must refuse it
	}
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied:
		return Result{
			Allowed:    a.Code == redisscript.Allowed,
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
	default:
		return Result{}, ErrInvalidN
	}
}

// bucket returns the cached state of name, creating it if needed.
func (l *Limiter) bucket(name string) *bucket {
	if b := (*l.buckets.Load())[name]; b != nil {
		return b
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := *l.buckets.Load()
	if b := m[name]; b != nil {
		return b
	}
	b := &bucket{keyArg: l.ks.Bucket(name)}
	if len(m) >= maxCachedBuckets {
		return b
	}
	// Copy on write: lookups stay lock-free, and new names are rare.
	next := make(map[string]*bucket, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[name] = b
	l.buckets.Store(&next)
	return b
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
		"OOM", "NOSCRIPT", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// trip opens the breaker: calls go to the policy until a probe succeeds.
func (l *Limiter) trip(cause error) {
	if l.closed.Load() || !l.open.CompareAndSwap(false, true) {
		return
	}
	l.outages.Add(1)
	l.opt.log.Warn("sluice: redis unavailable, answering by failure policy",
		"app", l.app, "policy", l.opt.policy.String(), "err", cause)
	select {
	case l.probeCh <- struct{}{}:
	default:
	}
}

// prober waits for the breaker to open, then checks Redis every probe
// interval (loading the script, which a restarted Redis lost) and closes
// the breaker at the first success. At most one probe is in flight, so a
// paused Redis sees one pending command, answered as soon as it resumes.
func (l *Limiter) prober() {
	defer l.wg.Done()
	done := make(chan error, 1)
	inflight := false
	tick := time.NewTicker(l.opt.probe)
	defer tick.Stop()
	for {
		if !l.open.Load() && !inflight {
			select {
			case <-l.ctx.Done():
				return
			case <-l.probeCh:
			}
		}
		if !inflight && l.open.Load() {
			inflight = true
			go func() { done <- l.probe() }()
		}
		select {
		case <-l.ctx.Done():
			return
		case err := <-done:
			inflight = false
			if err == nil && l.open.CompareAndSwap(true, false) {
				l.opt.log.Info("sluice: redis answers again", "app", l.app)
				continue
			}
			// Failed: try again at the next tick.
			select {
			case <-l.ctx.Done():
				return
			case <-tick.C:
			}
		case <-tick.C:
		case <-l.probeCh:
		}
	}
}

func (l *Limiter) probe() error {
	sha, err := l.rdb.ScriptLoad(l.ctx, redisscript.AcquireSource()).Result()
	if err != nil {
		return err
	}
	if sha != redisscript.AcquireSHA() {
		return fmt.Errorf("sluice: script load returned sha %s", sha)
	}
	return nil
}
