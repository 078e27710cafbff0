// Package clientmetrics exports the decisions of a client.Limiter as
// Prometheus metrics:
//
//	m, err := clientmetrics.New(prometheus.DefaultRegisterer, "checkout")
//	...
//	lim, err := client.New(rdb, "checkout", client.WithObserver(m.Observe))
//
// The metrics, all labelled with the Limiter's app:
//
//   - sluice_client_decisions_total{app,bucket,result}: acquires and slot
//     takes of concurrency limits (client.Decision.Slot) by result (see
//     the Result constants);
//   - sluice_client_acquire_duration_seconds{app,source}: how long Acquire
//     (or TakeSlot) took, source "redis" for calls Redis answered (or that failed on the
//     way) and "policy" for answers of the failure policy;
//   - sluice_client_fallback{app}: 1 while the Limiter answers by its
//     failure policy (the last decision was a fallback), else 0;
//   - sluice_client_near_limit_total{app,bucket}: acquires Redis answered
//     (allowed or denied) after which at least the near-limit fraction of
//     the bucket's capacity was in use (client.Result.Used; 0.8 by
//     default, WithNearLimit): buckets running close to their limit. For
//     a slot take that is the share of the slots in use, for a quota the
//     share of its calls used this period.
//
// Watch adds the Limiter's own counters (client.Stats), read at scrape:
//
//   - sluice_client_breaker_openings_total{app}: how often the circuit
//     breaker opened (Redis stopped answering; a healthy Redis on a loaded
//     machine should leave it at 0);
//   - sluice_client_fallback_seconds_total{app}: time calls were answered
//     by the failure policy because Redis did not answer (the F of the
//     policy's allowance);
//   - sluice_client_state_lost_seconds_total{app}: time buckets were
//     answered by the policy because Redis had lost them, summed.
//
// To count usage for the console as well, call both observers:
//
//	client.WithObserver(func(d client.Decision) { m.Observe(d); rec.Observe(d) })
package clientmetrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/internal/cowmap"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// Values of the result label of sluice_client_decisions_total.
const (
	ResultAllowed         = "allowed"          // Redis granted the tokens
	ResultDenied          = "denied"           // Redis refused: not enough tokens
	ResultFallbackAllowed = "fallback_allowed" // the failure policy granted
	ResultFallbackDenied  = "fallback_denied"  // the local bucket refused
	ResultUnavailable     = "unavailable"      // the failure policy refused (ErrUnavailable)
	ResultUnknownBucket   = "unknown_bucket"
	ResultAppNotAllowed   = "app_not_allowed"
	ResultExceedsCapacity = "exceeds_capacity"
	ResultInvalidN        = "invalid_n"
	ResultCanceled        = "canceled" // the caller's context ended first
	ResultClosed          = "closed"   // the Limiter was closed
	ResultError           = "error"    // anything else
	// ResultWouldDeny: a bucket in shadow mode allowed a call it would
	// have denied (Result.WouldDeny).
	ResultWouldDeny = "would_deny"
	// ResultWrongKind: the limit is of another kind than the call needs
	// (client.ErrWrongKind: TakeSlot on a token bucket, say).
	ResultWrongKind = "wrong_kind"
)

// result indexes the result labels, in the order of results.
type result int

const (
	rAllowed result = iota
	rDenied
	rFallbackAllowed
	rFallbackDenied
	rUnavailable
	rUnknownBucket
	rAppNotAllowed
	rExceedsCapacity
	rInvalidN
	rCanceled
	rClosed
	rError
	rWouldDeny
	rWrongKind
	numResults
)

var results = [numResults]string{
	ResultAllowed, ResultDenied, ResultFallbackAllowed, ResultFallbackDenied, ResultUnavailable,
	ResultUnknownBucket, ResultAppNotAllowed, ResultExceedsCapacity, ResultInvalidN, ResultCanceled,
	ResultClosed, ResultError, ResultWouldDeny, ResultWrongKind,
}

// Bucket label values that are not bucket names (which never start with
// '_'): a name that is not valid, and names past the label limit.
const (
	BucketInvalid = "_invalid"
	BucketOther   = "_other"
)

// DefaultMaxBuckets is how many distinct bucket names get a label of their
// own; a caller passing unbounded names cannot grow the series past it.
const DefaultMaxBuckets = 1000

// Option configures Metrics.
type Option func(*options)

type options struct {
	maxBuckets int
	buckets    []float64
	nearLimit  float64
}

// DefaultNearLimit is the fraction of a bucket's capacity in use from
// which an acquire counts as near the limit: the same fraction the usage
// counts and the console use.
const DefaultNearLimit = redisscript.NearLimitUsed

// WithNearLimit sets the fraction of a bucket's capacity in use (0 to 1)
// from which an acquire counts in sluice_client_near_limit_total
// (default DefaultNearLimit).
func WithNearLimit(f float64) Option { return func(o *options) { o.nearLimit = f } }

// WithMaxBuckets sets how many bucket names get a label of their own
// (default DefaultMaxBuckets); later names are counted as BucketOther.
func WithMaxBuckets(n int) Option { return func(o *options) { o.maxBuckets = n } }

// WithLatencyBuckets sets the histogram buckets of the acquire duration,
// in seconds.
func WithLatencyBuckets(b []float64) Option { return func(o *options) { o.buckets = b } }

// DefaultLatencyBuckets spans a fallback answer (microseconds) to a
// Redis call at the Limiter's timeout.
var DefaultLatencyBuckets = []float64{
	.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25,
}

// Metrics turns one Limiter's decisions into Prometheus metrics. It is
// safe for concurrent use.
type Metrics struct {
	reg       prometheus.Registerer
	app       string
	decisions *prometheus.CounterVec
	nearVec   *prometheus.CounterVec
	nearLimit float64
	fromRedis prometheus.Observer
	fromPol   prometheus.Observer
	fallback  prometheus.Gauge
	inFall    atomic.Bool
	max       int

	mu      sync.Mutex // guards named, and the choice of a new name's label
	named   int        // bucket names with a label of their own
	buckets cowmap.Map[*bucketCounters]
}

// bucketCounters caches the counters of one bucket label, by result.
type bucketCounters struct {
	label string
	c     [numResults]atomic.Pointer[prometheus.Counter]
	near  atomic.Pointer[prometheus.Counter]
}

// New registers the client metrics on reg (or reuses those already
// registered by another Metrics, so several Limiters of one process
// share them) and returns the observer of app's Limiter.
func New(reg prometheus.Registerer, app string, opts ...Option) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("clientmetrics: nil registerer")
	}
	if !redisscript.ValidName(app) {
		return nil, fmt.Errorf("clientmetrics: invalid app name %q", app)
	}
	o := options{maxBuckets: DefaultMaxBuckets, buckets: DefaultLatencyBuckets, nearLimit: DefaultNearLimit}
	for _, f := range opts {
		f(&o)
	}
	if o.maxBuckets < 0 {
		return nil, errors.New("clientmetrics: max buckets must not be negative")
	}
	if !(o.nearLimit > 0 && o.nearLimit <= 1) {
		return nil, fmt.Errorf("clientmetrics: near limit %v must be above 0 and at most 1", o.nearLimit)
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "client", Name: "decisions_total",
		Help: "Acquires by app, bucket and result.",
	}, []string{"app", "bucket", "result"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sluice", Subsystem: "client", Name: "acquire_duration_seconds",
		Help:    "Time taken by Acquire, by app and by who answered (redis or policy).",
		Buckets: o.buckets,
	}, []string{"app", "source"})
	fallback := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "sluice", Subsystem: "client", Name: "fallback",
		Help: "1 while the app's Limiter answers by its failure policy (Redis unreachable), else 0.",
	}, []string{"app"})
	near := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "client", Name: "near_limit_total",
		Help: "Acquires after which at least the near-limit fraction of the bucket's capacity was in use, by app and bucket.",
	}, []string{"app", "bucket"})
	var err error
	if decisions, err = register(reg, decisions); err != nil {
		return nil, err
	}
	if near, err = register(reg, near); err != nil {
		return nil, err
	}
	if duration, err = register(reg, duration); err != nil {
		return nil, err
	}
	if fallback, err = register(reg, fallback); err != nil {
		return nil, err
	}
	m := &Metrics{
		reg: reg, app: app, decisions: decisions, max: o.maxBuckets, nearVec: near, nearLimit: o.nearLimit,
		fromRedis: duration.WithLabelValues(app, "redis"),
		fromPol:   duration.WithLabelValues(app, "policy"),
		fallback:  fallback.WithLabelValues(app),
	}
	m.fallback.Set(0)
	return m, nil
}

// Observe records one decision. Pass it to client.WithObserver.
func (m *Metrics) Observe(d client.Decision) {
	r := resultOf(d)
	m.counter(d.Bucket, r).Inc()
	if (r == rAllowed || r == rDenied || r == rWouldDeny) && d.Result.Used() >= m.nearLimit {
		m.nearCounter(d.Bucket).Inc()
	}
	if d.Result.Fallback {
		m.fromPol.Observe(d.Latency.Seconds())
	} else {
		m.fromRedis.Observe(d.Latency.Seconds())
	}
	// The policy answers only while the breaker is open; an error of the
	// caller (invalid n, canceled) says nothing about Redis.
	switch {
	case d.Result.Fallback:
		if !m.inFall.Load() && !m.inFall.Swap(true) {
			m.fallback.Set(1)
		}
	case answeredByRedis(r):
		if m.inFall.Load() && m.inFall.Swap(false) {
			m.fallback.Set(0)
		}
	}
}

// answeredByRedis reports whether r is an answer Redis gave.
func answeredByRedis(r result) bool {
	switch r {
	case rAllowed, rDenied, rWouldDeny, rUnknownBucket, rAppNotAllowed, rExceedsCapacity, rWrongKind:
		return true
	}
	return false
}

// ResultOf returns the result label of a decision: one of the Result constants.
func ResultOf(d client.Decision) string { return results[resultOf(d)] }

func resultOf(d client.Decision) result {
	res, err := d.Result, d.Err
	switch {
	case res.Fallback && err == nil && res.Allowed:
		return rFallbackAllowed
	case res.Fallback && errors.Is(err, client.ErrUnavailable):
		return rUnavailable
	case res.Fallback:
		return rFallbackDenied
	case err == nil && res.Allowed && res.WouldDeny:
		return rWouldDeny
	case err == nil && res.Allowed:
		return rAllowed
	case err == nil:
		return rDenied
	case errors.Is(err, client.ErrUnknownBucket):
		return rUnknownBucket
	case errors.Is(err, client.ErrAppNotAllowed):
		return rAppNotAllowed
	case errors.Is(err, client.ErrExceedsCapacity):
		return rExceedsCapacity
	case errors.Is(err, client.ErrWrongKind):
		return rWrongKind
	case errors.Is(err, client.ErrInvalidN):
		return rInvalidN
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return rCanceled
	case errors.Is(err, client.ErrClosed):
		return rClosed
	case errors.Is(err, client.ErrUnavailable):
		return rUnavailable
	}
	return rError
}

// counter returns the counter of bucket and result r, caching it so that
// the common case costs a map lookup and an atomic load.
func (m *Metrics) counter(bucket string, r result) prometheus.Counter {
	bc := m.bucketCounters(bucket)
	if c := bc.c[r].Load(); c != nil {
		return *c
	}
	c := m.decisions.WithLabelValues(m.app, bc.label, results[r])
	bc.c[r].Store(&c)
	return c
}

// nearCounter returns the near-limit counter of bucket, cached like counter.
func (m *Metrics) nearCounter(bucket string) prometheus.Counter {
	bc := m.bucketCounters(bucket)
	if c := bc.near.Load(); c != nil {
		return *c
	}
	c := m.nearVec.WithLabelValues(m.app, bc.label)
	bc.near.Store(&c)
	return c
}

// bucketCounters returns the cache of bucket, or the shared one of
// BucketInvalid or BucketOther.
func (m *Metrics) bucketCounters(bucket string) *bucketCounters {
	if bc, ok := m.buckets.Load(bucket); ok {
		return bc
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if bc, ok := m.buckets.Load(bucket); ok {
		return bc
	}
	key := bucket
	switch {
	case !redisscript.ValidName(bucket):
		key = BucketInvalid
	case m.named >= m.max:
		key = BucketOther
	default:
		m.named++
	}
	return m.buckets.LoadOrAdd(key, func(int) (*bucketCounters, bool) { return &bucketCounters{label: key}, true })
}

// Watch registers the counters of l (see client.Stats) on the registerer
// of m, labelled with m's app; l should be the Limiter m observes. One
// Limiter per app and registerer: a second one of the same app is refused.
func (m *Metrics) Watch(l *client.Limiter) error {
	if l == nil {
		return errors.New("clientmetrics: nil limiter")
	}
	c := &statsCollector{l: l}
	labels := prometheus.Labels{"app": m.app}
	c.openings = prometheus.NewDesc("sluice_client_breaker_openings_total",
		"Times the circuit breaker opened because Redis stopped answering.", nil, labels)
	c.fallback = prometheus.NewDesc("sluice_client_fallback_seconds_total",
		"Time calls were answered by the failure policy because Redis did not answer.", nil, labels)
	c.lost = prometheus.NewDesc("sluice_client_state_lost_seconds_total",
		"Time buckets were answered by the failure policy because Redis had lost them, summed over buckets.", nil, labels)
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("clientmetrics: watch limiter of %s: %w", m.app, err)
	}
	return nil
}

// statsCollector reads a Limiter's counters at scrape.
type statsCollector struct {
	l                        *client.Limiter
	openings, fallback, lost *prometheus.Desc
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.openings
	ch <- c.fallback
	ch <- c.lost
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	ch <- prometheus.MustNewConstMetric(c.openings, prometheus.CounterValue, float64(s.BreakerOpenings))
	ch <- prometheus.MustNewConstMetric(c.fallback, prometheus.CounterValue, s.Fallback.Seconds())
	ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, s.StateLost.Seconds())
}

// register adds c to reg, or returns the collector already registered
// under the same name, so that several limiters in one process share their
// metrics instead of failing. Any other refusal is returned with c. (The
// servers' copy is startup.Register: this module cannot import theirs, and
// they should not link the client for it.)
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register metrics: %w", err)
}
