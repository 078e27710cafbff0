package client

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

// learned is a bucket config as the acquire script reported it, with its
// shadow mode and reserve: a bucket in shadow mode is never refused by
// FailLocal either, and its local bucket keeps its share of the reserve for
// critical requests. A quota reports no rate (permitsMicro 0), its quota
// as the capacity and the length of its current period as the period.
type learned struct {
	capacity, permitsMicro, period int64
	shadow                         bool
	reserve                        int64
}

// quota reports whether c is a calendar quota's.
func (c *learned) quota() bool { return c.permitsMicro == 0 }

// learnedOf is the config of answer a. Shadow mode is in a protocol 2
// answer of the acquire script; other answers tell it only by their code
// (would deny: in shadow mode; denied: not), else prev's holds. The
// reserve is in a protocol 3 answer, else prev's holds.
func learnedOf(a redisscript.Answer, prev *learned) *learned {
	c := learned{capacity: a.Capacity, permitsMicro: a.PermitsMicro, period: a.PeriodSeconds}
	switch {
	case a.HasShadow:
		c.shadow = a.Shadow
	case a.Code == redisscript.WouldDeny:
		c.shadow = true
	case a.Code == redisscript.Denied:
	case prev != nil:
		c.shadow = prev.shadow
	}
	switch {
	case a.HasReserve:
		c.reserve = a.Reserve
	case prev != nil:
		c.reserve = prev.reserve
	}
	if prev != nil && *prev == c {
		return prev // no allocation on the hot path: the config rarely changes
	}
	p := new(learned)
	*p = c
	return p
}

// bucket is what a Limiter keeps per bucket name: the key, the last config
// Redis reported, the local bucket of FailLocal, and the queue of Wait.
type bucket struct {
	keyArg any // the hash key, boxed once for the command arguments

	lease atomic.Pointer[lease] // lease mode; nil when off

	cfg  atomic.Pointer[learned]
	seen atomic.Int64 // when Redis last reported the config, ns since the Limiter started
	// lostAt is 1 + when Redis was found to have lost the bucket (ns since
	// the Limiter started), 0 while it has not.
	lostAt    atomic.Int64
	lostTotal atomic.Int64 // ns of losses that ended
	logged    atomic.Int64 // when a misconfiguration was last logged, 1 + ns since start

	// qend is, for a quota, the end of the period Redis last reported, in
	// µs since the Limiter started; 0 when unknown (see noteEnd).
	qend atomic.Int64

	mu     sync.Mutex
	tokens float64 // local tokens; for a quota, the local count of the local period
	last   int64   // µs since the Limiter started up to which tokens are filled; for a quota, the local period's end

	// waiters and criticalWaiters queue the callers of Wait, those marked
	// critical apart: they never wait behind calls that leave the reserve.
	waiters, criticalWaiters waitQueue
}

// learn records the config of a Redis answer; an answer with tokens ends
// a loss of the bucket's state.
func (b *bucket) learn(l *Limiter, name string, a redisscript.Answer) {
	if c := b.cfg.Load(); c == nil || learnedOf(a, c) != c {
		b.cfg.Store(learnedOf(a, c))
	}
	now := int64(l.now())
	// One store per millisecond at most: the field is shared by every caller.
	if now-b.seen.Load() > int64(time.Millisecond) {
		b.seen.Store(now)
	}
	if a.PermitsMicro == 0 && a.ResetAfterMicros > 0 {
		noteEnd(&b.qend, now/int64(time.Microsecond)+a.ResetAfterMicros)
	}
	b.restored(l, name)
}

// noteEnd records end, the end of a quota's period as an answer received
// at some instant tells it (that instant plus the answer's reset), in p.
// The script ran before the answer came, so such an end is never before
// the true one: the smallest of one period is the closest, and an end
// more than a second later is the next period's.
func noteEnd(p *atomic.Int64, end int64) {
	for {
		cur := p.Load()
		if cur != 0 && end >= cur && end <= cur+1_000_000 {
			return
		}
		if p.CompareAndSwap(cur, end) {
			return
		}
	}
}

// restored ends a loss of the bucket's state: Redis knows it again.
func (b *bucket) restored(l *Limiter, name string) {
	if at := b.lostAt.Load(); at != 0 && b.lostAt.CompareAndSwap(at, 0) {
		b.lostTotal.Add(int64(l.now()) - (at - 1))
		l.opt.log.Info("sluice: bucket restored in redis", "bucket", name, "app", l.app)
	}
}

// forget drops the config of a bucket this app may no longer use.
func (b *bucket) forget() {
	if b.cfg.Load() != nil {
		b.cfg.Store(nil)
	}
}

// lostTime is how long the bucket's state was lost, up to now.
func (b *bucket) lostTime(now time.Duration) time.Duration {
	d := time.Duration(b.lostTotal.Load())
	if at := b.lostAt.Load(); at != 0 {
		d += now - time.Duration(at-1)
	}
	return d
}

// stateLost decides whether an "unknown bucket" answer for b means that
// Redis lost the bucket's state (it restarted empty, or was flushed),
// rather than a bucket that does not exist: the bucket answered within the
// grace before, and no tombstone says it was deleted. Such a bucket is
// answered by the failure policy for at most the grace, counted from the
// first such answer, while the sync worker restores it.
func (l *Limiter) stateLost(ctx context.Context, b *bucket, name string) bool {
	grace := int64(l.opt.grace)
	if grace == 0 || b.cfg.Load() == nil {
		return false
	}
	now := int64(l.now())
	if at := b.lostAt.Load(); at != 0 {
		if now-(at-1) <= grace {
			return true
		}
		// Not restored in time: a config problem after all.
		if b.lostAt.CompareAndSwap(at, 0) {
			b.lostTotal.Add(now - (at - 1))
			l.opt.log.Error("sluice: bucket still unknown to redis after the grace; is the sync worker running?",
				"bucket", name, "app", l.app, "grace", l.opt.grace)
		}
		return false
	}
	if now-b.seen.Load() > grace {
		return false
	}
	if !b.lostAt.CompareAndSwap(0, now+1) {
		return true // another caller found it first
	}
	// A deleted bucket leaves a tombstone; a lost one (FLUSHALL, a restart
	// without persistence) does not. If Redis cannot say, assume a loss.
	// go-redis bounds a read by its ReadTimeout, not by a context: the
	// caller waits for the answer at most the call timeout.
	tomb := make(chan bool, 1)
	go func() {
		n, err := l.rdb.Exists(context.WithoutCancel(ctx), l.ks.Tombstone(name)).Result()
		tomb <- err == nil && n > 0
	}()
	t := time.NewTimer(l.opt.timeout)
	deleted := false
	select {
	case deleted = <-tomb:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	if deleted {
		b.lostAt.Store(0)
		return false
	}
	l.opt.log.Warn("sluice: redis lost the bucket; answering by failure policy until it is restored",
		"bucket", name, "app", l.app, "policy", l.opt.policy.String(), "grace", l.opt.grace)
	return true
}

// misconfigured logs, at most once a minute per bucket (per *last) and per
// kind of error, that a bucket cannot serve this app: every call on it is
// refused, which deserves a loud log line but not one per call.
func (l *Limiter) misconfigured(last *atomic.Int64, name string, err error) {
	now := int64(l.now()) + 1
	prev := last.Load()
	if prev != 0 && now-prev < int64(time.Minute) {
		return
	}
	if !last.CompareAndSwap(prev, now) {
		return
	}
	// And once a minute per kind: many names may be unknown. Invalid
	// names share one *last already: they are a kind of their own.
	kind := err.Error()
	if last == &l.invalidLogged {
		kind = "invalid name"
	}
	ok, skipped := l.misconfiguredLog.allow(kind, l.now())
	if !ok {
		return
	}
	args := []any{"bucket", name, "app", l.app, "err", err}
	if skipped > 0 {
		args = append(args, "other_buckets_not_logged", skipped)
	}
	l.opt.log.Error("sluice: bucket cannot serve this app; its calls are refused (logged once a minute)", args...)
}

// fallback answers a request of n tokens, critical or not, by the failure
// policy.
func (l *Limiter) fallback(b *bucket, n int64, critical bool) (Result, error) {
	switch l.opt.policy {
	case FailOpen:
		return Result{Allowed: true, Fallback: true}, nil
	case FailClosed:
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	return b.local(l, n, critical)
}

// local takes n tokens from the in-process bucket, which holds
// capacity/instances (at least 1) and fills at rate/instances only while
// the policy is the one answering this bucket: while Redis fails to answer
// (from the first failed call to the next answer, see breaker) or has
// lost the bucket. It starts empty and keeps its level across
// outages. So over any span its grants are at most rate/instances times
// the time it answered, which is the policy's whole allowance: tokens it
// granted are never granted again by a later outage, and tokens Redis
// holds are left to Redis. (A bucket restarted from Redis's last reported
// count at each outage would grant that count once more at every outage.)
// A bucket whose config this process never saw is refused: there is no
// safe rate to guess. The arithmetic is the Go core's (package tokens),
// the scripts' own; a bucket in shadow mode is never refused: where it
// would be, the answer is a would-deny, as Redis gives. The local bucket
// keeps its share of the bucket's reserve (localShare) for critical
// requests, as Redis keeps the reserve.
func (b *bucket) local(l *Limiter, n int64, critical bool) (Result, error) {
	cfg := b.cfg.Load()
	if cfg == nil {
		return Result{RetryAfter: l.opt.probe, Fallback: true}, ErrUnavailable
	}
	now := int64(l.now() / time.Microsecond)
	// The start of the span the local bucket answers in, if it does now.
	from := int64(-1)
	if since, ok := l.brk.fallbackSince(); ok {
		from = int64(since / time.Microsecond)
	}
	if at := b.lostAt.Load(); at != 0 && (from < 0 || (at-1)/1000 < from) {
		from = (at - 1) / 1000
	}
	return b.localAt(cfg, l.opt.instances, n, now, from, l.opt.probe, critical)
}

// localAt is local's decision at now (µs since the Limiter started), the
// bucket filling from from (µs; -1 when the policy does not answer it
// now): what the conformance table checks of the fallback.
func (b *bucket) localAt(cfg *learned, instances int, n, now, from int64, probe time.Duration, critical bool) (Result, error) {
	full := tokens.Limit{Capacity: cfg.capacity, Reserve: cfg.reserve}
	if full.Exceeds(n, critical) {
		return Result{Limit: cfg.capacity, Fallback: true}, ErrExceedsCapacity
	}
	if cfg.quota() {
		return b.quotaAt(cfg, instances, n, now, b.qend.Load(), probe)
	}
	share := localShare(cfg, instances)
	b.mu.Lock()
	defer b.mu.Unlock()
	if from >= 0 {
		b.tokens, _ = share.Refill(b.tokens, max(from, b.last), now)
		b.last = max(b.last, now)
	}
	b.tokens = math.Min(b.tokens, float64(share.Capacity)) // the capacity may have shrunk
	if share.Exceeds(n, critical) {
		// Grantable in Redis but not by this instance's share.
		res := Result{Limit: share.Capacity, Fallback: true, RetryAfter: probe,
			Remaining: int64(math.Max(math.Floor(b.tokens-float64(share.Kept(critical))), 0))}
		if cfg.shadow {
			res.Allowed, res.WouldDeny = true, true
		}
		return res, nil
	}
	left, _, a := share.Take(b.tokens, n, cfg.shadow, critical)
	b.tokens = left
	return Result{Allowed: a.Code != tokens.Denied, WouldDeny: a.Code == tokens.WouldDeny, Remaining: a.Remaining,
		RetryAfter: time.Duration(a.RetryMicros) * time.Microsecond, Limit: share.Capacity,
		ResetAfter: time.Duration(a.ResetMicros) * time.Microsecond, Fallback: true}, nil
}

// localShare is one instance's share of a bucket's limit: capacity /
// instances (at least 1), rate / instances (the period times instances,
// exact) and the reserve's share of that capacity.
func localShare(cfg *learned, instances int) tokens.Limit {
	inst := int64(max(instances, 1))
	c := max(1, cfg.capacity/inst)
	return tokens.Limit{Capacity: c, PermitsMicro: cfg.permitsMicro, Period: float64(cfg.period) * float64(inst),
		Reserve: tokens.ScaleReserve(cfg.reserve, cfg.capacity, c)}
}

// quotaAt is the local decision of a calendar quota at now (µs since the
// Limiter started), whose period Redis last reported to end at end (0:
// never reported). The process counts its own grants per period against
// its share, quota/instances (at least 1), from 0 in each period: so it
// admits at most one share per period, however many outages the period
// has. The first local period ends where Redis said; the ones after it
// are taken to be as long as the period Redis last reported (a month or
// a day of a change of offset may be longer or shorter, so a period of
// Redis's may meet two local ones). The arithmetic is the Go core's
// (package quota), the script's own. A quota whose period this process
// never learned is refused.
func (b *bucket) quotaAt(cfg *learned, instances int, n, now, end int64, probe time.Duration) (Result, error) {
	share := max(1, cfg.capacity/int64(max(instances, 1)))
	b.mu.Lock()
	defer b.mu.Unlock()
	if now >= b.last {
		switch {
		case end > now:
			b.last = end
		case end > 0 && cfg.period > 0:
			per := cfg.period * 1_000_000
			b.last = end + ((now-end)/per+1)*per
		default:
			return Result{RetryAfter: probe, Fallback: true}, ErrUnavailable
		}
		b.tokens = 0
	}
	if n > share {
		res := Result{Limit: share, Fallback: true, RetryAfter: probe, Remaining: max(0, share-int64(b.tokens)),
			ResetAfter: time.Duration(b.last-now) * time.Microsecond}
		if cfg.shadow {
			res.Allowed, res.WouldDeny = true, true
		}
		return res, nil
	}
	used, _, a := quota.Take(share, int64(b.tokens), n, b.last, now, cfg.shadow)
	b.tokens = float64(used)
	return Result{Allowed: a.Code != tokens.Denied, WouldDeny: a.Code == tokens.WouldDeny, Remaining: a.Remaining,
		RetryAfter: time.Duration(a.RetryMicros) * time.Microsecond, Limit: share,
		ResetAfter: time.Duration(a.ResetMicros) * time.Microsecond, Fallback: true}, nil
}
