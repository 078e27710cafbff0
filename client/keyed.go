package client

import (
	"container/list"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/client/internal/cowmap"
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

// keyedBuckets is what a Limiter keeps about keyed buckets.
type keyedBuckets struct {
	m      cowmap.Map[*keyedBucket]
	recent [recentShards]recentKeys
}

// keyedBucket holds the Redis keys of one keyed bucket's groups, boxed
// once for the command arguments, and the bucket's own limit as Redis last
// reported it (for keys FailLocal has not seen).
type keyedBucket struct {
	groups [redisscript.KeyGroups]keyedGroup
	// nameHash is mixed into every state id of the bucket.
	nameHash uint64
	def      atomic.Pointer[learned]
	// gone is set while Redis says the bucket does not exist or does not
	// serve this app: FailLocal must then refuse every key of it.
	gone atomic.Bool
	// qend is, for a keyed quota, the end of the period Redis last
	// reported for any key (noteEnd).
	qend atomic.Int64
}

// keyedArgs holds a keyed call's state key and key. The command takes
// them by pointer: a string put in an any costs an allocation per call, a
// pointer none. Recycled once the call is answered.
type keyedArgs struct{ state, key string }

var keyedArgsPool = sync.Pool{New: func() any { return new(keyedArgs) }}

type keyedGroup struct {
	config    string
	configArg any
	// statePrefix starts every state key of the group.
	statePrefix string
}

// keyedBucket returns the cached keys of keyed bucket name.
func (l *Limiter) keyedBucket(name string) *keyedBucket {
	if kb, ok := l.keyed.m.Load(name); ok {
		return kb
	}
	return l.keyed.m.LoadOrAdd(name, func(n int) (*keyedBucket, bool) {
		kb := &keyedBucket{nameHash: redisscript.NameHash(name)}
		for g := range kb.groups {
			cfg := l.ks.KeyGroup(name, g)
			kb.groups[g] = keyedGroup{config: cfg, configArg: cfg, statePrefix: l.ks.StatePrefix(name, g)}
		}
		return kb, n < maxCachedBuckets
	})
}

// AcquireKey takes n tokens for key from keyed bucket bucket: each key has
// its own tokens, with the bucket's limit or the most specific override's.
// key is any 1 to 256 bytes (ErrInvalidKey otherwise); it reaches Redis
// only hashed. Results and errors are those of Acquire (a ctx marked
// Critical may take the key's reserve); a bucket that is not keyed answers
// ErrUnknownBucket, as a plain Acquire of a keyed bucket does.
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
	digits, g := redisscript.StateID(kb.nameHash, key)
	grp := &kb.groups[g]
	// The state key is the group's state prefix and the id: one allocation.
	var sb strings.Builder
	sb.Grow(len(grp.statePrefix) + len(digits))
	sb.WriteString(grp.statePrefix)
	sb.Write(digits[:])
	stateKey := sb.String()
	state := stateKey[len(grp.statePrefix):]
	critical := IsCritical(ctx)
	if l.open.Load() {
		return l.keyFallback(kb, name, key, state, n, critical)
	}
	sent := int64(l.now())
	var cl claim
	if !critical {
		var res Result
		var denied bool
		if res, denied, cl = l.denied.answer(stateKey, n, sent); denied {
			l.cachedDenials.Add(1)
			return res, nil
		}
	}
	ka := keyedArgsPool.Get().(*keyedArgs)
	ka.state, ka.key = stateKey, key
	c := getCall()
	c.args[0], c.args[1] = l.head(keyedScript)
	c.args[2], c.args[3], c.args[4] = "2", grp.configArg, &ka.state
	// Protocol 3: the answer carries the key's shadow mode and reserve,
	// which FailLocal keeps with the limit it learns.
	c.args[5], c.args[6], c.args[7], c.args[8] = l.appArg, n, &ka.key, redisscript.ProtocolReserve
	c.nargs, c.src = 9, keyedScript.src
	if critical {
		c.args[9], c.nargs = "1", 10
	}
	reply, err := l.batch.do(ctx, c, l.opt.timeout)
	if err != nil {
		l.denied.release(stateKey, cl)
	}
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
	default:
		if l.settle(err) {
			l.opt.log.Debug("sluice: keyed acquire failed", "bucket", name, "err", err)
		}
		return l.keyFallback(kb, name, key, state, n, critical)
	}
	a, err := redisscript.KeyedAnswerOf(reply)
	if err != nil {
		l.denied.release(stateKey, cl)
		l.failed()
		return l.keyFallback(kb, name, key, state, n, critical)
	}
	l.answered()
	if !critical {
		l.denied.learn(stateKey, n, sent, cl, a.Answer)
	}
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied, redisscript.WouldDeny, redisscript.ExceedsCapacity:
		if kb.gone.Load() {
			kb.gone.Store(false)
		}
		if a.PermitsMicro == 0 && a.ResetAfterMicros > 0 && l.opt.policy == FailLocal {
			noteEnd(&kb.qend, int64(l.now()/time.Microsecond)+a.ResetAfterMicros)
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
	return resultOf(a.Answer)
}

// learn records the bucket's own limit from an answer that applied it.
func (kb *keyedBucket) learn(a redisscript.Answer) {
	if c := kb.def.Load(); c == nil || learnedOf(a, c) != c {
		kb.def.Store(learnedOf(a, c))
	}
}

// keyFallback answers a keyed acquire by the failure policy. FailLocal
// runs a local bucket per recent key: with the override's limit Redis last
// reported for that key, else with the bucket's own limit. Like
// every local bucket it starts empty and fills only while the policy
// answers, so each key keeps the FailLocal allowance. A bucket whose limit
// this process never saw is refused.
func (l *Limiter) keyFallback(kb *keyedBucket, name, key, state string, n int64, critical bool) (Result, error) {
	if l.opt.policy != FailLocal {
		return l.fallback(nil, n, critical)
	}
	if kb.gone.Load() {
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	def := kb.def.Load()
	b := l.keyed.shard(state).get(l, name, key, def)
	if b == nil {
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	if end := kb.qend.Load(); end != 0 {
		// Every key of a quota has the same periods.
		noteEnd(&b.qend, end)
	}
	return l.fallback(b, n, critical)
}

func (k *keyedBuckets) shard(state string) *recentKeys {
	// state is a hash in base64url; its last character carries only 4
	// bits, the one before 6: that one picks the shard.
	return &k.recent[int(state[len(state)-2])%recentShards]
}

// recentKeys is one shard of the bounded table of recent keys: a map and a
// list in least-recently-used order.
//
// Only keys whose limit Redis reported from an override ("own" entries)
// must be recorded while Redis answers: a key on the bucket's own limit
// needs no entry until the policy answers it (get creates it then, from
// the bucket's limit). So an answer with the bucket's limit costs nothing
// while the shard holds no own entry, and otherwise one lookup to turn
// the key's own entry, if any, back to the bucket's limit. Entries that
// are not own follow the bucket's limit as Redis last reported it.
type recentKeys struct {
	mu    sync.Mutex
	m     map[recentKey]*list.Element
	order list.List    // of *recentEntry, most recent first
	own   atomic.Int32 // entries with own set
}

type recentKey struct{ bucket, key string }

// recentEntry holds its bucket, so that a new key costs one allocation
// (and the list's element).
type recentEntry struct {
	k   recentKey
	own bool // its limit is an override's (guarded by mu)
	b   bucket
}

// learn records what Redis answered for key. def, when not nil, is the
// bucket's own limit, which the answer applied.
func (r *recentKeys) learn(l *Limiter, name, key string, a redisscript.Answer, def *learned) {
	k := recentKey{name, key}
	if def != nil && def.capacity == a.Capacity && def.permitsMicro == a.PermitsMicro && def.period == a.PeriodSeconds &&
		(!a.HasReserve || def.reserve == a.Reserve) {
		if r.own.Load() == 0 {
			return
		}
		r.mu.Lock()
		if el := r.m[k]; el != nil {
			if e := el.Value.(*recentEntry); e.own {
				e.own = false
				r.own.Add(-1)
				e.b.cfg.Store(def)
			}
		}
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	e := r.lookup(k)
	if e == nil {
		e = r.insert(k)
	}
	if !e.own {
		e.own = true
		r.own.Add(1)
	}
	r.mu.Unlock()
	e.b.learn(l, name, a)
}

// get returns the local state of key: an own entry as it is, else one
// with def (the bucket's own limit), created when the key is not in the
// table; nil when def is nil.
func (r *recentKeys) get(l *Limiter, name, key string, def *learned) *bucket {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := recentKey{name, key}
	e := r.lookup(k)
	if e != nil && e.own && e.b.cfg.Load() != nil {
		return &e.b
	}
	if def == nil {
		return nil
	}
	if e == nil {
		e = r.insert(k)
	}
	if e.b.cfg.Load() != def {
		e.b.cfg.Store(def)
	}
	return &e.b
}

func (r *recentKeys) lookup(k recentKey) *recentEntry {
	if el := r.m[k]; el != nil {
		r.order.MoveToFront(el)
		return el.Value.(*recentEntry)
	}
	return nil
}

func (r *recentKeys) insert(k recentKey) *recentEntry {
	if r.m == nil {
		r.m = map[recentKey]*list.Element{}
	}
	if r.order.Len() >= maxRecentKeys/recentShards {
		last := r.order.Back()
		r.order.Remove(last)
		old := last.Value.(*recentEntry)
		if old.own {
			r.own.Add(-1)
		}
		delete(r.m, old.k)
	}
	e := &recentEntry{k: k}
	r.m[k] = r.order.PushFront(e)
	return e
}
