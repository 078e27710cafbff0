package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/slots"
)

// Concurrency limits: at most N calls in progress at once. TakeSlot takes
// a slot when work starts; the Slot it returns is released when the work
// ends, and renewed by long work. A slot that is neither released nor
// renewed expires after the limit's slot lease time, so a process that
// dies holding slots gives them back by itself. Each call is one run of
// the slot script (docs/protocol.md, "Concurrency limits"), through the
// Limiter's breaker and failure policy.

var (
	// ErrWrongKind: the limit exists and the app may use it, but it is not
	// of the kind the call needs (TakeSlot on a token bucket, say).
	ErrWrongKind = errors.New("sluice: limit is of another kind")
	// ErrInvalidSlotID: a slot id of ReleaseSlot or RenewSlot is not 1 to
	// 64 ASCII letters, digits, '-', '_', '.' or ':'.
	ErrInvalidSlotID = errors.New("sluice: slot id must be 1 to 64 letters, digits, '-', '_', '.' or ':'")
)

// SlotResult is the answer to TakeSlot, Slot.Release and Slot.Renew.
type SlotResult struct {
	// Allowed reports, for TakeSlot, that the slot was taken (in shadow
	// mode also where the limit would have refused: see WouldDeny); for
	// Release, that the slot was held and is free now; for Renew, that the
	// slot was held and now expires Lease from now. A Release or Renew of
	// a slot that was not held (released before, expired) is not Allowed
	// and changes nothing.
	Allowed bool
	// WouldDeny is true when the limit is in shadow mode and was full:
	// the slot was taken anyway (so InUse counts what runs).
	WouldDeny bool
	// InUse is the slots held after the call.
	InUse int64
	// Limit is the most slots held at once; 0 when unknown (fail open).
	Limit int64
	// RetryAfter is, when a take is denied (or would be: WouldDeny), how
	// long until the first held slot expires: when one is free at the
	// latest (a release may free one sooner).
	RetryAfter time.Duration
	// Lease is the limit's slot lease time: a slot taken or renewed
	// expires that long after the call unless renewed again.
	Lease time.Duration
	// Fallback is true when the failure policy answered instead of Redis.
	Fallback bool
}

// SlotTaker takes slots of concurrency limits. *Limiter (Redis)
// implements it, and so does package memlimit's in-memory Limiter.
type SlotTaker interface {
	// TakeSlot takes a slot of the shared concurrency limit limit.
	TakeSlot(ctx context.Context, limit string) (*Slot, error)
	// TakeSlotKey takes a slot of key of the keyed concurrency limit limit.
	TakeSlotKey(ctx context.Context, limit, key string) (*Slot, error)
}

var _ SlotTaker = (*Limiter)(nil)

// Slot is one slot taken by TakeSlot, with the take's answer. Release it
// when the work ends; Renew it before Lease passes when the work lasts
// longer. Its methods are safe for concurrent use.
type Slot struct {
	// SlotResult is the take's answer: the slot is held only when Allowed.
	SlotResult
	id      string
	release func(context.Context) (SlotResult, error)
	renew   func(context.Context) (SlotResult, error)
}

// NewSlot returns a slot held by another implementation of SlotTaker
// (package memlimit): res is the take's answer, id the slot's id, and
// release and renew do the slot's Release and Renew when it is held.
func NewSlot(res SlotResult, id string, release, renew func(context.Context) (SlotResult, error)) *Slot {
	return &Slot{SlotResult: res, id: id, release: release, renew: renew}
}

// ID is the slot's id: random, chosen by the taker, unique in practice.
func (s *Slot) ID() string { return s.id }

// Release gives the slot back. Releasing a slot twice, or after it
// expired, frees nothing (the second answer is not Allowed). A slot that
// was never held (a denied take, fail open) needs no release: Release
// answers at once. When Redis does not answer, the error is
// ErrUnavailable and the slot expires by itself within Lease; Release may
// be called again.
func (s *Slot) Release(ctx context.Context) (SlotResult, error) {
	if s == nil || !s.Allowed || s.release == nil {
		return SlotResult{}, nil
	}
	return s.release(ctx)
}

// Renew moves the slot's expiry to Lease from now, for work that lasts
// longer than the lease time. A slot that was not held any more (it
// expired: renew more often) answers not Allowed: take a new one. When
// Redis does not answer, the error is ErrUnavailable and the slot keeps
// its expiry.
func (s *Slot) Renew(ctx context.Context) (SlotResult, error) {
	if s == nil || !s.Allowed || s.renew == nil {
		return SlotResult{}, nil
	}
	return s.renew(ctx)
}

// TakeSlot takes a slot of the shared concurrency limit limit, as the
// Limiter's app. The Slot is never nil; it holds the slot when its
// Allowed is true (at the limit it is false, with RetryAfter). Errors:
// ErrUnknownBucket (no such limit), ErrAppNotAllowed, ErrWrongKind (not a
// concurrency limit), ErrUnavailable (Redis did not answer and the
// failure policy refuses), ErrClosed and ctx's error. A take whose answer
// was lost (a timeout) may hold a slot in Redis until it expires, which
// makes the limit stricter meanwhile, never looser.
//
// While Redis does not answer, the failure policy answers: FailClosed
// refuses, FailOpen allows (the slot is not counted anywhere), and
// FailLocal takes the slot from an in-process limit of limit/instances
// slots (at least 1; see WithInstances) with the limit and lease time
// Redis last reported. See FailurePolicy for what each allows.
func (l *Limiter) TakeSlot(ctx context.Context, limit string) (*Slot, error) {
	return l.takeSlotObserved(ctx, limit, "", false)
}

// TakeSlotKey takes a slot of key of the keyed concurrency limit limit:
// each key has its own slots, with the limit's capacity or its most
// specific override's. key is any 1 to 256 bytes (ErrInvalidKey
// otherwise). Results and errors are those of TakeSlot.
func (l *Limiter) TakeSlotKey(ctx context.Context, limit, key string) (*Slot, error) {
	return l.takeSlotObserved(ctx, limit, key, true)
}

// ReleaseSlot releases slot id of concurrency limit limit (of key of a
// keyed limit when key is not empty), as Slot.Release does: for a service
// that handed the slot's id to another process and is asked to release it
// (the decision service). A slot this Limiter took by its local failure
// policy is released locally; any other id goes to Redis. Errors are
// TakeSlot's and ErrInvalidSlotID.
func (l *Limiter) ReleaseSlot(ctx context.Context, limit, key, id string) (SlotResult, error) {
	return l.slotByID(ctx, limit, key, id, redisscript.SlotRelease)
}

// RenewSlot renews slot id of concurrency limit limit (of key of a keyed
// limit when key is not empty), as Slot.Renew does, for a service that
// handed the slot's id to another process (see ReleaseSlot).
func (l *Limiter) RenewSlot(ctx context.Context, limit, key, id string) (SlotResult, error) {
	return l.slotByID(ctx, limit, key, id, redisscript.SlotRenew)
}

func (l *Limiter) slotByID(ctx context.Context, name, key, id string, op redisscript.SlotOp) (SlotResult, error) {
	switch {
	case !redisscript.ValidSlotID(id):
		return SlotResult{}, ErrInvalidSlotID
	case key != "" && !redisscript.ValidKey(key):
		return SlotResult{}, ErrInvalidKey
	case !redisscript.ValidName(name):
		return SlotResult{}, ErrUnknownBucket
	}
	ref := &slotRef{l: l, name: name, key: key, id: id}
	ref.local = l.local.holds(ref, int64(l.now()/time.Microsecond))
	if op == redisscript.SlotRelease {
		return ref.release(ctx)
	}
	return ref.renew(ctx)
}

// slotRef is where a slot taken by a Limiter is held.
type slotRef struct {
	l         *Limiter
	name, key string
	id        string
	local     bool // taken by FailLocal: released and renewed locally
}

// Result is the take's answer in an Acquire's terms, as the observer
// sees it (Decision.Slot): Remaining is the free slots (Limit - InUse, at
// least 0), so Used is the share of the slots in use; RetryAfter,
// Limit, Fallback and WouldDeny are the take's.
func (r SlotResult) Result() Result {
	return Result{Allowed: r.Allowed, Remaining: max(r.Limit-r.InUse, 0), RetryAfter: r.RetryAfter,
		Limit: r.Limit, Fallback: r.Fallback, WouldDeny: r.WouldDeny}
}

// takeSlotObserved is takeSlot told to the observer.
func (l *Limiter) takeSlotObserved(ctx context.Context, name, key string, keyed bool) (*Slot, error) {
	if l.opt.observe == nil {
		return l.takeSlot(ctx, name, key, keyed)
	}
	start := time.Now()
	s, err := l.takeSlot(ctx, name, key, keyed)
	l.opt.observe(Decision{Bucket: name, Key: key, N: 1, Result: s.SlotResult.Result(), Err: err,
		Latency: time.Since(start), Slot: true})
	return s, err
}

func (l *Limiter) takeSlot(ctx context.Context, name, key string, keyed bool) (*Slot, error) {
	if keyed && !redisscript.ValidKey(key) {
		return &Slot{}, ErrInvalidKey
	}
	if !redisscript.ValidName(name) {
		return &Slot{}, ErrUnknownBucket // no such name can exist
	}
	ref := &slotRef{l: l, name: name, key: key, id: slots.NewID()}
	s := &Slot{id: ref.id, release: ref.release, renew: ref.renew}
	a, err := l.slotCall(ctx, name, key, redisscript.SlotTake, ref.id)
	switch {
	case errors.Is(err, ErrUnavailable):
		return l.slotFallback(s, ref)
	case err != nil:
		return s, err
	}
	s.SlotResult = slotResultOf(a)
	return s, slotErr(a.Code)
}

func (r *slotRef) release(ctx context.Context) (SlotResult, error) {
	return r.do(ctx, redisscript.SlotRelease, slots.Release)
}

func (r *slotRef) renew(ctx context.Context) (SlotResult, error) {
	return r.do(ctx, redisscript.SlotRenew, slots.Renew)
}

// do releases or renews the slot: in Redis (op), or locally (local) when
// FailLocal took it.
func (r *slotRef) do(ctx context.Context, op redisscript.SlotOp, local slots.Op) (SlotResult, error) {
	if r.local {
		return r.l.local.do(r, local, r.l.opt.instances, int64(r.l.now()/time.Microsecond)), nil
	}
	a, err := r.l.slotCall(ctx, r.name, r.key, op, r.id)
	if err != nil {
		return SlotResult{}, err
	}
	return slotResultOf(a), slotErr(a.Code)
}

// slotCall runs the slot script once. An error reply about the call (a
// key of another type) and a malformed answer are ErrUnavailable, as
// Redis not answering is: the failure policy answers them.
func (l *Limiter) slotCall(ctx context.Context, name, key string, op redisscript.SlotOp, id string) (redisscript.SlotAnswer, error) {
	script := slotScript
	if key != "" {
		script = keyedSlotScript
	}
	reply, err := l.runScript(ctx, script, l.ks.SlotKeys(name, key),
		redisscript.SlotArgs(l.app, op, id, key))
	var rep errReply
	switch {
	case errors.As(err, &rep):
		return redisscript.SlotAnswer{}, ErrUnavailable
	case err != nil:
		return redisscript.SlotAnswer{}, err
	}
	a, err := redisscript.SlotAnswerOf(reply)
	if err != nil {
		l.failed()
		return redisscript.SlotAnswer{}, ErrUnavailable
	}
	l.local.learn(name, key, a, int64(l.now()/time.Microsecond))
	return a, nil
}

// slotResultOf is the SlotResult of a script's answer.
func slotResultOf(a redisscript.SlotAnswer) SlotResult {
	r := SlotResult{InUse: a.InUse, Limit: a.Limit, Lease: time.Duration(a.SlotMillis) * time.Millisecond}
	switch a.Code {
	case redisscript.Allowed:
		r.Allowed = true
	case redisscript.WouldDeny:
		r.Allowed, r.WouldDeny = true, true
		r.RetryAfter = time.Duration(a.RetryAfterMicros) * time.Microsecond
	case redisscript.Denied:
		r.RetryAfter = time.Duration(a.RetryAfterMicros) * time.Microsecond
	}
	return r
}

// slotErr is the error of a slot answer's code; nil for a decision.
func slotErr(c redisscript.Code) error {
	switch c {
	case redisscript.Allowed, redisscript.Denied, redisscript.WouldDeny:
		return nil
	case redisscript.WrongKind:
		return ErrWrongKind
	}
	return codeErr(c)
}

// slotFallback answers a take by the failure policy.
func (l *Limiter) slotFallback(s *Slot, ref *slotRef) (*Slot, error) {
	switch l.opt.policy {
	case FailOpen:
		// Not counted anywhere: nothing to release.
		s.SlotResult = SlotResult{Allowed: true, Fallback: true}
		s.release, s.renew = nil, nil
		return s, nil
	case FailClosed:
		s.SlotResult = SlotResult{RetryAfter: l.opt.probe, Fallback: true}
		return s, ErrUnavailable
	}
	res, ok := l.local.take(ref, l.opt.instances, int64(l.now()/time.Microsecond))
	if !ok {
		s.SlotResult = SlotResult{RetryAfter: l.opt.probe, Fallback: true}
		return s, ErrUnavailable
	}
	ref.local = true
	s.SlotResult = res
	return s, nil
}

// localSlots is FailLocal's state of concurrency limits: per limit (and
// per key of a keyed limit) the limit and lease time Redis last reported,
// and the slots taken locally. A keyed limit's own limit (not an
// override's) is kept under the empty key, for keys not seen yet.
type localSlots struct {
	mu sync.Mutex
	m  map[localSlotKey]*localLimit
}

type localSlotKey struct{ name, key string }

type localLimit struct {
	limit, leaseMicros int64
	shadow             bool
	set                slots.Set
}

// learn records the limit of a Redis answer; a limit that cannot serve the
// app is forgotten, so that FailLocal refuses it.
func (ls *localSlots) learn(name, key string, a redisscript.SlotAnswer, now int64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied, redisscript.WouldDeny:
	case redisscript.UnknownBucket, redisscript.AppNotAllowed, redisscript.WrongKind:
		delete(ls.m, localSlotKey{name, key})
		delete(ls.m, localSlotKey{name, ""})
		return
	default:
		return
	}
	set := func(k localSlotKey) {
		e := ls.entry(k, now)
		if e != nil {
			e.limit, e.leaseMicros, e.shadow = a.Limit, a.SlotMillis*1000, a.Shadow
		}
	}
	set(localSlotKey{name, key})
	if key != "" && a.Source == redisscript.FromBucket {
		set(localSlotKey{name, ""})
	}
}

// entry returns the entry of k, adding it when there is room: at most
// maxCachedBuckets, of which keys without local slots at now are dropped
// first.
func (ls *localSlots) entry(k localSlotKey, now int64) *localLimit {
	if e, ok := ls.m[k]; ok {
		return e
	}
	if ls.m == nil {
		ls.m = map[localSlotKey]*localLimit{}
	}
	if len(ls.m) >= maxCachedBuckets {
		for k, e := range ls.m {
			if k.key != "" && e.set.Empty(now) {
				delete(ls.m, k)
			}
		}
		if len(ls.m) >= maxCachedBuckets {
			return nil
		}
	}
	e := &localLimit{}
	ls.m[k] = e
	return e
}

// take takes a local slot for ref at now (µs of the Limiter's clock):
// from limit/instances slots (at least 1) of the limit Redis last
// reported for ref's limit (or key, else the keyed limit's own). ok is
// false for a limit never seen: there is no safe limit to guess.
func (ls *localSlots) take(ref *slotRef, instances int, now int64) (SlotResult, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k := localSlotKey{ref.name, ref.key}
	e := ls.m[k]
	if e == nil || e.limit == 0 {
		def := ls.m[localSlotKey{ref.name, ""}]
		if ref.key == "" || def == nil || def.limit == 0 {
			return SlotResult{}, false
		}
		if e = ls.entry(k, now); e == nil {
			return SlotResult{}, false
		}
		e.limit, e.leaseMicros, e.shadow = def.limit, def.leaseMicros, def.shadow
	}
	share := max(1, e.limit/int64(max(instances, 1)))
	a := e.set.Do(slots.Take, ref.id, now, share, e.leaseMicros, e.shadow)
	return localResult(a, share, e.leaseMicros), true
}

// holds reports whether ref's slot is one of the local slots held at now.
func (ls *localSlots) holds(ref *slotRef, now int64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.m[localSlotKey{ref.name, ref.key}]
	return e != nil && e.set.Holds(ref.id, now)
}

// do releases or renews a local slot at now.
func (ls *localSlots) do(ref *slotRef, op slots.Op, instances int, now int64) SlotResult {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.m[localSlotKey{ref.name, ref.key}]
	if e == nil {
		return SlotResult{Fallback: true}
	}
	share := max(1, e.limit/int64(max(instances, 1)))
	return localResult(e.set.Do(op, ref.id, now, share, e.leaseMicros, e.shadow), share, e.leaseMicros)
}

func localResult(a slots.Answer, share, leaseMicros int64) SlotResult {
	return SlotResult{Allowed: a.Code != slots.Denied, WouldDeny: a.Code == slots.WouldDeny, InUse: a.InUse,
		Limit: share, RetryAfter: time.Duration(a.RetryMicros) * time.Microsecond,
		Lease: time.Duration(leaseMicros) * time.Microsecond, Fallback: true}
}

// KeepAlive renews the slot every half lease time until stop is called,
// for work of unknown length: stop := s.KeepAlive(); defer stop(). It
// stops by itself once a renewal answers that the slot is not held (it
// expired); after an error (Redis did not answer) it tries again half a
// lease later. A slot that is not held needs none: stop does nothing.
func (s *Slot) KeepAlive() (stop func()) {
	if s == nil || !s.Allowed || s.renew == nil || s.Lease <= 0 {
		return func() {}
	}
	every := s.Lease / 2
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	tick := func() {
		res, err := s.Renew(context.Background())
		mu.Lock()
		defer mu.Unlock()
		if stopped || (err == nil && !res.Allowed) {
			return
		}
		t.Reset(every)
	}
	mu.Lock()
	t = time.AfterFunc(every, tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
