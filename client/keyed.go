package client

import (
	"container/list"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// Keyed buckets: one definition whose tokens exist per key (a user, an API
// key, a client address). A keyed acquire is one run of the keyed acquire
// script (docs/protocol.md) on the two keys of the key's group, sent
// through the same queue, breaker and failure policy as a plain acquire.

// maxRecentKeys bounds the per-key state FailLocal keeps, over all keyed
// buckets of a Limiter; the least recently used key goes first.
const maxRecentKeys = 10_000

// recentShards splits the table of recent keys, so that concurrent
// callers rarely wait for the same lock.
const recentShards = 16

var (
	keyedSHAArg any = redisscript.KeyedAcquireSHA()
	keyedSrcArg any = redisscript.KeyedAcquireSource()
)

// keyedBuckets is what a Limiter keeps about keyed buckets.
type keyedBuckets struct {
	mu     sync.Mutex // guards writes of m
	m      atomic.Pointer[map[string]*keyedBucket]
	recent [recentShards]recentKeys
}

// keyedBucket holds the Redis keys of one keyed bucket's groups, boxed
// once for the command arguments, and the bucket's own limit as Redis last
// reported it (for keys FailLocal has not seen).
type keyedBucket struct {
	groups [redisscript.KeyGroups]keyedGroup
	def    atomic.Pointer[learned]
	// gone is set while Redis says the bucket does not exist or does not
	// serve this app: FailLocal must then refuse every key of it.
	gone atomic.Bool
}

// keyedArgs holds a keyed call's state key and key. The command takes
// them by pointer: a string put in an any costs an allocation per call, a
// pointer none. Recycled once the call is answered.
type keyedArgs struct{ state, key string }

var keyedArgsPool = sync.Pool{New: func() any { return new(keyedArgs) }}

type keyedGroup struct {
	config    string
	configArg any
}

// keyedBucket returns the cached keys of keyed bucket name.
func (l *Limiter) keyedBucket(name string) *keyedBucket {
	if m := l.keyed.m.Load(); m != nil {
		if kb := (*m)[name]; kb != nil {
			return kb
		}
	}
	l.keyed.mu.Lock()
	defer l.keyed.mu.Unlock()
	var m map[string]*keyedBucket
	if p := l.keyed.m.Load(); p != nil {
		m = *p
	}
	if kb := m[name]; kb != nil {
		return kb
	}
	kb := &keyedBucket{}
	for g := range kb.groups {
		cfg := l.ks.KeyGroup(name, g)
		kb.groups[g] = keyedGroup{config: cfg, configArg: cfg}
	}
	if len(m) >= maxCachedBuckets {
		return kb
	}
	next := make(map[string]*keyedBucket, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[name] = kb
	l.keyed.m.Store(&next)
	return kb
}

// AcquireKey takes n tokens for key from keyed bucket bucket: each key has
// its own tokens, with the bucket's limit or the most specific override's.
// key is any 1 to 256 bytes (ErrInvalidKey otherwise); it reaches Redis
// only hashed. Results and errors are those of Acquire; a bucket that is
// not keyed answers ErrUnknownBucket, as a plain Acquire of a keyed bucket
// does.
func (l *Limiter) AcquireKey(ctx context.Context, bucket, key string, n int64) (Result, error) {
	if l.opt.observe == nil {
		return l.acquireKey(ctx, bucket, key, n)
	}
	start := time.Now()
	res, err := l.acquireKey(ctx, bucket, key, n)
	l.opt.observe(Decision{Bucket: bucket, Key: key, N: n, Result: res, Err: err, Latency: time.Since(start)})
	return res, err
}

// AllowKey takes one token for key from keyed bucket bucket and reports
// whether it was granted. Errors count as not granted.
func (l *Limiter) AllowKey(ctx context.Context, bucket, key string) bool {
	res, err := l.AcquireKey(ctx, bucket, key, 1)
	return err == nil && res.Allowed
}

// WaitKey blocks until n tokens for key of keyed bucket bucket are granted
// or ctx ends, as Wait does for a plain bucket.
func (l *Limiter) WaitKey(ctx context.Context, bucket, key string, n int64) error {
	return waitLoop(ctx, bucket, l.opt.probe, func(ctx context.Context) (Result, error) { return l.AcquireKey(ctx, bucket, key, n) })
}

func (l *Limiter) acquireKey(ctx context.Context, name, key string, n int64) (Result, error) {
	if n < 1 || n > redisscript.MaxN {
		return Result{}, ErrInvalidN
	}
	if !redisscript.ValidKey(key) {
		return Result{}, ErrInvalidKey
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
	kb := l.keyedBucket(name)
	digits, g := redisscript.KeyDigits(key)
	grp := &kb.groups[g]
	// The state key is the group's key and the digits: one allocation.
	var sb strings.Builder
	sb.Grow(len(grp.config) + len(digits))
	sb.WriteString(grp.config)
	sb.Write(digits[:])
	stateKey := sb.String()
	state := stateKey[len(grp.config):]
	if l.open.Load() {
		return l.keyFallback(kb, name, key, state, n)
	}
	ka := keyedArgsPool.Get().(*keyedArgs)
	ka.state, ka.key = stateKey, key
	c := getCall()
	c.args[0], c.args[1], c.args[2], c.args[3], c.args[4] = "evalsha", keyedSHAArg, "2", grp.configArg, &ka.state
	c.args[5], c.args[6], c.args[7] = l.appArg, n, &ka.key
	c.nargs, c.src = 8, keyedSrcArg
	reply, err := l.batch.do(ctx, c, l.opt.timeout)
	switch {
	case err == nil:
		// Answered: the round trip is over, nothing refers to ka any more.
		// (A call that timed out may still be sent: its ka is left alone.)
		*ka = keyedArgs{}
		keyedArgsPool.Put(ka)
	case errors.Is(err, errAbandoned):
		return Result{}, ctx.Err()
	case errors.Is(err, ErrClosed):
		return Result{}, ErrClosed
	case !unavailable(err):
		l.opt.log.Debug("sluice: keyed acquire failed", "bucket", name, "err", err)
		return l.keyFallback(kb, name, key, state, n)
	default:
		l.failed()
		return l.keyFallback(kb, name, key, state, n)
	}
	a, err := redisscript.KeyedAnswerOf(reply)
	if err != nil {
		l.failed()
		return l.keyFallback(kb, name, key, state, n)
	}
	l.answered()
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied, redisscript.WouldDeny, redisscript.ExceedsCapacity:
		if kb.gone.Load() {
			kb.gone.Store(false)
		}
		if a.Source == redisscript.FromBucket {
			kb.learn(a.Answer)
		}
		if l.opt.policy == FailLocal {
			var def *learned
			if a.Source == redisscript.FromBucket {
				def = kb.def.Load()
			}
			l.keyed.shard(state).learn(l, name, key, a.Answer, def)
		}
	case redisscript.UnknownBucket, redisscript.AppNotAllowed:
		kb.def.Store(nil)
		kb.gone.Store(true) // FailLocal must refuse it, even for keys it knows
	}
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

// learn records the bucket's own limit from an answer that applied it.
func (kb *keyedBucket) learn(a redisscript.Answer) {
	if c := kb.def.Load(); c == nil || c.capacity != a.Capacity || c.permitsMicro != a.PermitsMicro ||
		c.period != a.PeriodSeconds {
		kb.def.Store(&learned{capacity: a.Capacity, permitsMicro: a.PermitsMicro, period: a.PeriodSeconds})
	}
}

// keyFallback answers a keyed acquire by the failure policy. FailLocal
// runs a local bucket per recent key, with the limit Redis last reported
// for that key; a key it has not seen gets the bucket's own limit. Like
// every local bucket it starts empty and fills only while the policy
// answers, so each key keeps the FailLocal allowance. A bucket whose limit
// this process never saw is refused.
func (l *Limiter) keyFallback(kb *keyedBucket, name, key, state string, n int64) (Result, error) {
	if l.opt.policy != FailLocal {
		return l.fallback(nil, n)
	}
	if kb.gone.Load() {
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	def := kb.def.Load()
	b := l.keyed.shard(state).get(l, name, key, def)
	if b == nil {
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	return l.fallback(b, n)
}

func (k *keyedBuckets) shard(state string) *recentKeys {
	// state is hex: its last digit picks the shard.
	c := state[len(state)-1]
	i := int(c - '0')
	if c >= 'a' {
		i = int(c-'a') + 10
	}
	return &k.recent[i%recentShards]
}

// recentKeys is one shard of the bounded table of recent keys: a map and a
// list in least-recently-used order.
type recentKeys struct {
	mu    sync.Mutex
	m     map[recentKey]*list.Element
	order list.List // of *recentEntry, most recent first
}

type recentKey struct{ bucket, key string }

// recentEntry holds its bucket, so that a new key costs one allocation
// (and the list's element).
type recentEntry struct {
	k recentKey
	b bucket
}

// learn records what Redis answered for key. def, when not nil, is the
// bucket's own limit, which the answer applied: the key shares it rather
// than holding a copy of its own.
func (r *recentKeys) learn(l *Limiter, name, key string, a redisscript.Answer, def *learned) {
	r.mu.Lock()
	b := r.lookup(recentKey{name, key})
	if b == nil {
		b = r.insert(recentKey{name, key})
	}
	r.mu.Unlock()
	if def != nil && def.capacity == a.Capacity && def.permitsMicro == a.PermitsMicro && def.period == a.PeriodSeconds &&
		b.cfg.Load() != def {
		b.cfg.Store(def)
	}
	b.learn(l, name, a)
}

// get returns the local state of key, creating it from def (the bucket's
// own limit) when the key is not in the table; nil when def is nil too.
func (r *recentKeys) get(l *Limiter, name, key string, def *learned) *bucket {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := recentKey{name, key}
	if b := r.lookup(k); b != nil && b.cfg.Load() != nil {
		return b
	}
	if def == nil {
		return nil
	}
	b := r.lookup(k)
	if b == nil {
		b = r.insert(k)
	}
	b.cfg.Store(def)
	b.seen.Store(int64(time.Since(l.start)))
	return b
}

func (r *recentKeys) lookup(k recentKey) *bucket {
	if e := r.m[k]; e != nil {
		r.order.MoveToFront(e)
		return &e.Value.(*recentEntry).b
	}
	return nil
}

func (r *recentKeys) insert(k recentKey) *bucket {
	if r.m == nil {
		r.m = map[recentKey]*list.Element{}
	}
	if r.order.Len() >= maxRecentKeys/recentShards {
		last := r.order.Back()
		r.order.Remove(last)
		delete(r.m, last.Value.(*recentEntry).k)
	}
	e := &recentEntry{k: k}
	r.m[k] = r.order.PushFront(e)
	return &e.b
}
