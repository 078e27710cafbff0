// Package usage counts a service's acquires per bucket, app and minute in
// Redis, for the usage charts of the Sluice console.
//
// A Recorder is the observer of a client.Limiter:
//
//	rec, err := usage.NewRecorder(rdb, "checkout")
//	...
//	defer rec.Close()
//	lim, err := client.New(rdb, "checkout", client.WithObserver(rec.Observe))
//
// Observe adds to counters in memory (atomic adds, no lock once a bucket
// and minute have been seen), and a background goroutine writes them to
// Redis about once a second, one pipeline of HINCRBY and EXPIRE per flush.
// That costs far less than counting inside the acquire script, which
// would add writes to every call, including denials that otherwise write
// nothing.
//
// # What is counted
//
// Every decision Redis made about a bucket this app may use: an allowed
// acquire adds 1 to "<app>:a", a denied one (including n over the bucket's
// capacity) to "<app>:d", in the hash of the minute and in the hash of the
// hour (see redisscript.Keyspace.UsageMinute and UsageHour), and names the
// bucket in the set of the minute's active buckets (UsageActive). An
// acquire that a bucket in shadow mode allowed but would have denied
// (Result.WouldDeny) counts as allowed and also adds 1 to "<app>:w", so
// the console can show what the limit would have refused. A decision
// after which the bucket was near its limit (Result.Used() at least
// redisscript.NearLimitUsed, 80%, as package clientmetrics counts it), and
// every denial or would-deny, also adds 1 to "<app>:n", so the console can
// list the buckets that ran near their limit. Calls, not
// tokens, are counted; every attempt of a client.Limiter.Wait is a call.
// A slot take of a concurrency limit (client.Decision.Slot) counts the
// same way, near the limit when at least 80% of its slots are in use
// after it; releases and renewals decide nothing and are not counted. An
// acquire of a quota is near the limit when at least 80% of the quota is
// used this period after it.
//
// For keyed buckets (client.Limiter.AcquireKey, TakeSlotKey) the decisions are also
// counted per key, for the console's top keys: the keys denied most and
// the keys taking most. Each keyed bucket has, per hour, a Space-Saving
// summary of the denied and one of the allowed keys, TopKeyCounters
// counters each, whatever the number of keys; every TopKeysFlushInterval
// the flush adds each counter to the bucket's sorted set of the hour
// (redisscript.Keyspace.DeniedKeys and TakenKeys, trimmed to the
// redisscript.TopKeysKept highest) and starts empty summaries. So a
// process holds at most TopKeyCounters keys per bucket and outcome, and
// writes at most TopKeyCounters+2 commands per bucket, outcome and flush.
// A key's count is within n/TopKeyCounters of its true count, n being the
// outcome's count in the hour (see AddKey). The keys are stored as the
// service passes them: a service keying on secrets (API keys, tokens)
// should pass an id or a hash of them instead, or turn this off with
// WithHotKeys(false).
//
// Answers of the failure policy (Result.Fallback: Redis did not answer, or
// had lost the bucket) are no bucket's decision: they count apart, a grant
// in "<app>:f" and a refusal in "<app>:r" (see
// redisscript.UsageFallbackAllowedField), not in "<app>:a" or "<app>:d",
// so that the console shows them as such, even for a bucket in shadow mode,
// which never denies but whose fallback may refuse (FailClosed). They are
// counted only for buckets this Recorder has counted a decision of Redis
// for, which keeps names that do not exist out of Redis while it cannot
// tell.
//
// Not counted: unknown buckets, apps not allowed and invalid n, which are
// errors of the caller, not decisions of a bucket (counting them would also
// let any caller create keys for names that do not exist); calls whose
// context ended. The Prometheus metrics of package clientmetrics count all
// of them.
//
// # Time and loss
//
// The minute of a decision is read from this process's clock when it is
// observed. That is fine for analytics, a skew of a few seconds moves a
// few counts into the next minute; the token math itself never uses a
// client's clock. Counts of Redis's decisions are written at most once: a
// flush that fails (Redis unreachable) is dropped rather than retried,
// because a pipeline cut off halfway may already have been applied and a
// retry would count twice. An outage therefore shows as a gap, never as a
// spike. The failure policy's answers are the exception: they happen
// during outages, so a flush that could not reach Redis at all (no
// connection) keeps them for the next one, those of the last FallbackKept.
// One that timed out is not sent again: Redis may run it late, as a paused
// one does when it resumes.
package usage

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/internal/cowmap"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// DefaultFlushInterval is how often a Recorder writes its counts.
const DefaultFlushInterval = time.Second

// DefaultRetention is the TTL of the usage hashes a Recorder writes:
// eight days, so a week is always complete.
const DefaultRetention = redisscript.UsageTTLSeconds * time.Second

// maxBuckets bounds the bucket names a Recorder keeps counters for;
// decisions on names past it are not counted.
const maxBuckets = 10_000

// flushTimeout bounds one flush's pipeline.
const flushTimeout = 5 * time.Second

// Option configures a Recorder.
type Option func(*options)

type options struct {
	prefix    string
	interval  time.Duration
	retention time.Duration
	log       *slog.Logger
	noHotKeys bool
}

// WithKeyPrefix sets the key prefix (default "sluice:"); it must match
// the Limiter's (client.WithKeyPrefix) and the console's.
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithFlushInterval sets how often counts are written (default DefaultFlushInterval).
func WithFlushInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithRetention sets the TTL of the usage hashes (default DefaultRetention).
// The console shows up to a week: a shorter retention leaves gaps.
func WithRetention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// WithHotKeys turns the counting of the top keys of keyed buckets (denied
// and allowed acquires per key) on (the default) or off.
func WithHotKeys(on bool) Option { return func(o *options) { o.noHotKeys = !on } }

// WithLogger sets where failed flushes are reported (default
// slog.Default(); nil discards). An outage is logged when it starts and
// when it ends, not once per flush.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Recorder counts the decisions of one app's Limiter and writes them to
// Redis. It is safe for concurrent use. The zero value is not usable: use
// NewRecorder.
type Recorder struct {
	rdb     redis.UniversalClient
	ks      redisscript.Keyspace
	allowed string // hash field of the app's allowed count
	denied  string // hash field of the app's denied count
	would   string // hash field of the app's would-deny count
	near    string // hash field of the app's near-limit count
	fbA     string // hash field of the failure policy's grants
	fbR     string // hash field of the failure policy's refusals
	opt     options
	ttl     time.Duration

	buckets cowmap.Map[*entry]

	topMu sync.Mutex // guards top
	top   map[topID]*summary

	flushMu    sync.Mutex // one flush at a time
	failing    bool       // the last flush failed; guarded by flushMu
	topFlushed time.Time  // when the top keys were last written; guarded by flushMu
	dropped    atomic.Int64

	closed atomic.Bool
	stop   chan struct{}
	done   chan struct{}
}

// NewRecorder returns a Recorder of the decisions of app (the app name the
// Limiter was created with) and starts its flushing goroutine. Close it
// when done: Close writes what is left. It does not close rdb.
func NewRecorder(rdb redis.UniversalClient, app string, opts ...Option) (*Recorder, error) {
	if rdb == nil {
		return nil, errors.New("usage: nil redis client")
	}
	if !redisscript.ValidName(app) {
		return nil, errors.New("usage: invalid app name " + quote(app))
	}
	o := options{interval: DefaultFlushInterval, retention: DefaultRetention, log: slog.Default()}
	for _, f := range opts {
		f(&o)
	}
	switch {
	case o.interval <= 0:
		return nil, errors.New("usage: flush interval must be positive")
	case o.retention < time.Second:
		return nil, errors.New("usage: retention must be at least a second")
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{
		rdb: rdb, ks: redisscript.Keyspace{Prefix: o.prefix}, opt: o,
		allowed: redisscript.UsageAllowedField(app), denied: redisscript.UsageDeniedField(app),
		would: redisscript.UsageWouldDenyField(app), near: redisscript.UsageNearLimitField(app),
		fbA: redisscript.UsageFallbackAllowedField(app), fbR: redisscript.UsageFallbackRefusedField(app),
		ttl:  o.retention.Truncate(time.Second),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go r.loop()
	return r, nil
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return "\"" + s + "\""
}

// Observe counts one decision. Pass it to client.WithObserver. It never
// blocks on Redis.
func (r *Recorder) Observe(d client.Decision) {
	if granted, ok := CountedFallback(d); ok {
		r.AddFallback(d.Bucket, time.Now(), granted, 1)
		return
	}
	allowed, ok := Counted(d)
	if !ok {
		return
	}
	now := time.Now()
	r.Add(d.Bucket, now, allowed, 1)
	if allowed && d.Result.WouldDeny {
		r.add(d.Bucket, now, kindWouldDeny, 1)
	}
	if NearLimit(d) {
		r.add(d.Bucket, now, kindNearLimit, 1)
	}
	if d.Key != "" && !r.opt.noHotKeys {
		r.AddKey(d.Bucket, d.Key, now, allowed, 1)
	}
}

// TopKeyCounters is the number of counters of each top-keys summary (see
// AddKey): the k of its error bound n/k.
const TopKeyCounters = 256

// TopKeysFlushInterval is how often the flushing goroutine writes the
// top-keys summaries (Flush always writes them).
const TopKeysFlushInterval = 10 * time.Second

// maxSummaries bounds the top-keys summaries a Recorder holds between two
// flushes: two per keyed bucket and hour (denied and taken), for up to
// 100 keyed buckets in one hour, each at most TopKeyCounters keys.
const maxSummaries = 400

// topID names a top-keys summary: a keyed bucket's denied or taken
// (allowed) acquires in one hour.
type topID struct {
	bucket string
	taken  bool
	hour   int64
}

// AddKey counts n decisions for key of keyed bucket at time at, allowed
// (taken) or denied, in the bucket's top keys, as Observe does for one
// keyed acquire. Each bucket, outcome and hour has a Space-Saving summary
// of TopKeyCounters counters, so memory does not grow with the number of
// keys; each flush writes every counter and starts empty summaries, so a
// key's count in Redis is within n/TopKeyCounters of its true count,
// where n is the outcome's count in the hour (docs/observability.md).
// Invalid names and keys and n < 1 are ignored.
func (r *Recorder) AddKey(bucket, key string, at time.Time, allowed bool, n int64) {
	if n < 1 || !redisscript.ValidName(bucket) || !redisscript.ValidKey(key) {
		return
	}
	id := topID{bucket: bucket, taken: allowed, hour: floorDiv(at.Unix(), 3600)}
	r.topMu.Lock()
	defer r.topMu.Unlock()
	s := r.top[id]
	if s == nil {
		if r.top == nil {
			r.top = map[topID]*summary{}
		}
		if len(r.top) >= maxSummaries {
			return
		}
		s = newSummary(TopKeyCounters)
		r.top[id] = s
	}
	s.add(key, n)
}

// Counted reports whether a decision is counted in usage, and whether it
// counts as allowed (true) or denied (false): Redis answered, and the
// answer was allowed, denied, or n over the bucket's capacity.
func Counted(d client.Decision) (allowed, ok bool) {
	if d.Result.Fallback {
		return false, false
	}
	switch {
	case d.Err == nil:
		return d.Result.Allowed, true
	case errors.Is(d.Err, client.ErrExceedsCapacity):
		return false, true
	}
	return false, false
}

// CountedFallback reports whether a call is counted as an answer of the
// failure policy, and whether the policy granted it: the policy answered
// (Result.Fallback), with a grant, a refusal (ErrUnavailable included) or
// n over the bucket's capacity as it last knew it.
func CountedFallback(d client.Decision) (granted, ok bool) {
	if !d.Result.Fallback {
		return false, false
	}
	switch {
	case d.Err == nil:
		return d.Result.Allowed, true
	case errors.Is(d.Err, client.ErrUnavailable), errors.Is(d.Err, client.ErrExceedsCapacity):
		return false, true
	}
	return false, false
}

// FallbackKept is how far back the counts of the failure policy's answers
// are kept while flushes fail: two hours, as long as the console's roll-up
// still reads a minute's usage.
const FallbackKept = redisscript.UsageActiveTTLSeconds * time.Second

// AddFallback counts n calls of bucket at time at that the failure policy
// answered, granted or refused, as Observe does for one. Buckets this
// Recorder has counted no decision of Redis for are ignored (see the
// package documentation), as are n < 1.
func (r *Recorder) AddFallback(bucket string, at time.Time, granted bool, n int64) {
	if n < 1 {
		return
	}
	if _, known := r.buckets.Load(bucket); !known {
		return
	}
	k := kindFallbackRefused
	if granted {
		k = kindFallbackAllowed
	}
	r.add(bucket, at, k, n)
}

// NearLimit reports whether a decision counts as near the bucket's limit:
// Redis answered, and the answer was a denial, a would-deny (shadow mode),
// or left the bucket at least redisscript.NearLimitUsed used. Answers
// about n over the bucket's capacity are not: no amount of traffic made
// them.
func NearLimit(d client.Decision) bool {
	if d.Err != nil || d.Result.Fallback {
		return false
	}
	return !d.Result.Allowed || d.Result.WouldDeny || d.Result.Used() >= redisscript.NearLimitUsed
}

// AddNearLimit counts n decisions of bucket at time at that were near its
// limit (see NearLimit), as Observe does for one, beside Add's counts.
func (r *Recorder) AddNearLimit(bucket string, at time.Time, n int64) {
	r.add(bucket, at, kindNearLimit, n)
}

// AddWouldDeny counts n decisions of bucket at time at that a bucket in
// shadow mode allowed but would have denied, as Observe does for one,
// beside Add's allowed count (which they are a part of).
func (r *Recorder) AddWouldDeny(bucket string, at time.Time, n int64) {
	r.add(bucket, at, kindWouldDeny, n)
}

// Add counts n decisions of bucket at time at, allowed or denied, as
// Observe does for one. It is for decisions made without a Limiter (a
// client in another process reporting in bulk, a replay); names that are
// not valid bucket names and n < 1 are ignored.
func (r *Recorder) Add(bucket string, at time.Time, allowed bool, n int64) {
	k := kindDenied
	if allowed {
		k = kindAllowed
	}
	r.add(bucket, at, k, n)
}

// kind picks a counter of a cell.
type kind uint8

const (
	kindAllowed kind = iota
	kindDenied
	kindWouldDeny // a part of allowed, counted apart as well
	kindNearLimit // a part of allowed and denied, counted apart as well
	kindFallbackAllowed
	kindFallbackRefused
)

func (r *Recorder) add(bucket string, at time.Time, k kind, n int64) {
	if n < 1 {
		return
	}
	e := r.entry(bucket)
	if e == nil {
		return
	}
	m := floorDiv(at.Unix(), 60)
	c := e.cur.Load()
	if c == nil || c.minute != m {
		c = e.cell(m)
	}
	ctr := c.counter(k)
	ctr.Add(n)
	if c.retired.Load() {
		// The flusher took this cell's counts between our lookup and our
		// add: whatever it did not take moves to a live cell. Both sides
		// Swap, so every count is written exactly once.
		if v := ctr.Swap(0); v != 0 {
			e.late(m, k, v)
		}
	}
}

// Dropped returns how many decisions were lost to failed flushes.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Close stops the flushing goroutine and writes the counts left (waiting
// up to 5 s for Redis). Decisions observed after Close are not written.
func (r *Recorder) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	close(r.stop)
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	return r.Flush(ctx)
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.opt.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			_ = r.flush(ctx, false) // reported by flush
			cancel()
		}
	}
}

// entry returns the counters of bucket, creating them if needed, or nil
// when the name is invalid or too many names are known.
func (r *Recorder) entry(bucket string) *entry {
	if e, ok := r.buckets.Load(bucket); ok {
		return e
	}
	if !redisscript.ValidName(bucket) {
		return nil
	}
	return r.buckets.LoadOrAdd(bucket, func(n int) (*entry, bool) {
		if n >= maxBuckets {
			return nil, false
		}
		return &entry{name: bucket}, true
	})
}

// entry holds the counters of one bucket: the cell of the minute being
// counted now, and cells of past minutes waiting for the next flush.
type entry struct {
	name string
	cur  atomic.Pointer[cell]

	mu  sync.Mutex // guards old, and moving cur to old
	old []*cell
}

// cell counts one minute of one bucket. Once retired by the flusher, it
// takes no new counts (see Recorder.Add).
type cell struct {
	minute                           int64
	allowed, denied, wouldDeny, near atomic.Int64
	fbAllowed, fbRefused             atomic.Int64
	retired                          atomic.Bool
}

func (c *cell) counter(k kind) *atomic.Int64 {
	switch k {
	case kindAllowed:
		return &c.allowed
	case kindWouldDeny:
		return &c.wouldDeny
	case kindNearLimit:
		return &c.near
	case kindFallbackAllowed:
		return &c.fbAllowed
	case kindFallbackRefused:
		return &c.fbRefused
	}
	return &c.denied
}

// cell returns a cell to count minute m in: the current one, a new current
// one when m is later, or a cell of the past for a late caller.
func (e *entry) cell(m int64) *cell {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cur.Load()
	switch {
	case c != nil && c.minute == m:
		return c
	case c == nil || m > c.minute:
		if c != nil {
			e.old = append(e.old, c)
		}
		n := &cell{minute: m}
		e.cur.Store(n)
		return n
	}
	return e.pastLocked(m)
}

// pastLocked returns the unflushed cell of past minute m, adding one if needed.
func (e *entry) pastLocked(m int64) *cell {
	for _, c := range e.old {
		if c.minute == m {
			return c
		}
	}
	c := &cell{minute: m}
	e.old = append(e.old, c)
	return c
}

// late adds v counts that missed a retired cell of minute m.
func (e *entry) late(m int64, k kind, v int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.pastLocked(m) // under mu, so the flusher cannot retire it meanwhile
	c.counter(k).Add(v)
}

// counts is what one flush writes for one bucket and period.
type counts struct{ allowed, denied, wouldDeny, near, fbAllowed, fbRefused int64 }

func (c counts) plus(o counts) counts {
	return counts{c.allowed + o.allowed, c.denied + o.denied, c.wouldDeny + o.wouldDeny, c.near + o.near,
		c.fbAllowed + o.fbAllowed, c.fbRefused + o.fbRefused}
}

type periodKey struct {
	bucket string
	n      int64 // minute or hour number
}

// take empties e's counters into minutes.
func (e *entry) take(minutes map[periodKey]counts) {
	e.mu.Lock()
	old := e.old
	e.old = nil
	for _, c := range old {
		c.retired.Store(true)
	}
	e.mu.Unlock()
	add := func(c *cell) {
		got := counts{c.allowed.Swap(0), c.denied.Swap(0), c.wouldDeny.Swap(0), c.near.Swap(0),
			c.fbAllowed.Swap(0), c.fbRefused.Swap(0)}
		if got == (counts{}) {
			return
		}
		k := periodKey{e.name, c.minute}
		minutes[k] = minutes[k].plus(got)
	}
	for _, c := range old {
		add(c)
	}
	if c := e.cur.Load(); c != nil {
		add(c)
	}
}

// Flush writes the counts gathered since the last flush now, in one
// pipeline. The flushing goroutine calls it every interval; call it
// yourself before reading counts in a test or at shutdown. On error the
// counts of this flush are dropped (see the package documentation).
func (r *Recorder) Flush(ctx context.Context) error { return r.flush(ctx, true) }

// flush writes the counts, and the top keys when all is set or
// TopKeysFlushInterval has passed since they were last written.
func (r *Recorder) flush(ctx context.Context, all bool) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	minutes := map[periodKey]counts{}
	for _, e := range r.buckets.All() {
		e.take(minutes)
	}
	var top map[topID]*summary
	if now := time.Now(); all || now.Sub(r.topFlushed) >= TopKeysFlushInterval {
		r.topFlushed = now
		r.topMu.Lock()
		top = r.top
		r.top = nil
		r.topMu.Unlock()
	}
	if len(minutes) == 0 && len(top) == 0 {
		return nil
	}
	hours := make(map[periodKey]counts, len(minutes))
	var total int64
	for k, c := range minutes {
		h := periodKey{k.bucket, floorDiv(k.n, 60)}
		hours[h] = hours[h].plus(c)
		total += c.allowed + c.denied
	}
	pipe := r.rdb.Pipeline()
	for k, c := range minutes {
		r.write(ctx, pipe, r.ks.UsageMinute(k.bucket, k.n), c)
	}
	for k, c := range hours {
		r.write(ctx, pipe, r.ks.UsageHour(k.bucket, k.n), c)
	}
	// The buckets of each minute, so that the console's roll-up reads only
	// the minute hashes that exist (one SADD per minute in this flush).
	active := map[int64][]any{}
	for k := range minutes {
		active[k.n] = append(active[k.n], k.bucket)
	}
	for m, names := range active {
		key := r.ks.UsageActive(m)
		pipe.SAdd(ctx, key, names...)
		pipe.Expire(ctx, key, redisscript.UsageActiveTTLSeconds*time.Second)
	}
	for id, s := range top {
		key := r.ks.DeniedKeys(id.bucket, id.hour)
		if id.taken {
			key = r.ks.TakenKeys(id.bucket, id.hour)
		}
		// At most TopKeyCounters increments, whatever the number of keys.
		for _, c := range s.heap {
			pipe.ZIncrBy(ctx, key, float64(c.count), c.key)
		}
		// Keep the highest: rank 0 is the lowest score.
		pipe.ZRemRangeByRank(ctx, key, 0, -int64(redisscript.TopKeysKept)-1)
		pipe.Expire(ctx, key, redisscript.TopKeysTTLSeconds*time.Second)
	}
	_, err := pipe.Exec(ctx)
	if err != nil {
		r.dropped.Add(total)
		if neverSent(err) {
			r.keepFallbacks(minutes)
		}
		if !r.failing {
			r.opt.log.Warn("sluice: usage counts not written; dropping them until redis answers", "err", err)
		}
		r.failing = true
		return err
	}
	if r.failing {
		r.opt.log.Info("sluice: usage counts written again")
		r.failing = false
	}
	return nil
}

// neverSent reports whether a flush failed before any of it reached
// Redis: no connection could be opened. A flush that timed out may have
// been applied (a paused Redis runs it once it resumes), as may one whose
// connection broke halfway.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// keepFallbacks puts the failure policy's answers of a failed flush back,
// for the next flush to write: those of the last FallbackKept.
func (r *Recorder) keepFallbacks(minutes map[periodKey]counts) {
	oldest := floorDiv(time.Now().Add(-FallbackKept).Unix(), 60)
	for k, c := range minutes {
		if k.n < oldest || c.fbAllowed == 0 && c.fbRefused == 0 {
			continue
		}
		e, ok := r.buckets.Load(k.bucket)
		if !ok {
			continue
		}
		if c.fbAllowed != 0 {
			e.late(k.n, kindFallbackAllowed, c.fbAllowed)
		}
		if c.fbRefused != 0 {
			e.late(k.n, kindFallbackRefused, c.fbRefused)
		}
	}
}

func (r *Recorder) write(ctx context.Context, pipe redis.Pipeliner, key string, c counts) {
	if c.allowed != 0 {
		pipe.HIncrBy(ctx, key, r.allowed, c.allowed)
	}
	if c.denied != 0 {
		pipe.HIncrBy(ctx, key, r.denied, c.denied)
	}
	if c.wouldDeny != 0 {
		pipe.HIncrBy(ctx, key, r.would, c.wouldDeny)
	}
	if c.near != 0 {
		pipe.HIncrBy(ctx, key, r.near, c.near)
	}
	if c.fbAllowed != 0 {
		pipe.HIncrBy(ctx, key, r.fbA, c.fbAllowed)
	}
	if c.fbRefused != 0 {
		pipe.HIncrBy(ctx, key, r.fbR, c.fbRefused)
	}
	pipe.Expire(ctx, key, r.ttl)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
