package client

import (
	"sync"
	"sync/atomic"
	"time"
)

// The circuit breaker decides when calls stop going to Redis. Its rule is
// built so that a slow client cannot trip it, only a server that stopped
// answering:
//
//  1. Closed: calls go to Redis. A failed call (a timeout, a network
//     error, a server that says it cannot serve) adds to a streak; any
//     answer from Redis ends it.
//  2. When the streak holds at least minFailures failures and its first
//     failure is at least span old, the breaker is suspect. A stalled
//     process sees all its calls in flight fail at the same instant when
//     it runs again, a streak with no length in time, which does not
//     count; a server that stopped answering keeps failing calls.
//  3. Suspect: calls still go to Redis while one confirming probe, with a
//     timeout of its own (confirmTimeout, several call timeouts, counted
//     in timer steps so that it stretches with the process's starvation),
//     asks Redis directly. An answer to it, or to any call, closes the breaker
//     again; its failure opens it.
//  4. Open: calls are answered by the failure policy without touching the
//     network. A probe every probe interval (half-open: one trial at a
//     time) closes it at the first success.
//
// The time from the first failed call of a streak (from when it was sent,
// at most the call timeout before it failed) to the next answer of Redis
// is time in fallback: every call then may be answered by the policy, and
// FailLocal's local buckets fill only during it.
type breaker struct {
	minFailures int
	span        time.Duration

	streak atomic.Int32 // failures since the last answer; read without mu on the fast path
	// since is 1 + the start of the time in fallback while it lasts, else
	// 0: the local buckets read it on every call.
	since atomic.Int64

	mu        sync.Mutex
	state     breakerState
	firstFail time.Duration // when the streak's first failure came
	lastEnd   time.Duration // when the last time in fallback ended
	total     time.Duration // time in fallback that ended
	openings  uint64
}

type breakerState int

const (
	breakerClosed breakerState = iota
	breakerSuspect
	breakerOpen
)

// Defaults of the breaker's rule.
const (
	// DefaultBreakerFailures is how many calls in a row must fail.
	DefaultBreakerFailures = 3
	// DefaultBreakerSpan is how long they must keep failing.
	DefaultBreakerSpan = 100 * time.Millisecond
)

// confirmTimeout is how long the confirming probe waits for Redis: several
// call timeouts, and at least 200 ms, so that a process that was stalled
// for a moment still sees the answer of a healthy server.
func confirmTimeout(callTimeout time.Duration) time.Duration {
	return max(4*callTimeout, 200*time.Millisecond)
}

// success records an answer from Redis at now (read only when a streak
// runs: the fast path is one atomic load).
func (b *breaker) success(now func() time.Duration) {
	if b.streak.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == breakerOpen {
		return // a late answer; the probe decides
	}
	b.state = breakerClosed
	b.end(now())
}

// end closes the time in fallback at now; b.mu is held.
func (b *breaker) end(now time.Duration) {
	b.streak.Store(0)
	if s := b.since.Swap(0); s != 0 {
		b.total += max(0, now-time.Duration(s-1))
		b.lastEnd = now
	}
}

// failure records a call, sent at sent, that failed at now. It reports
// whether the breaker just became suspect (the caller then starts the
// confirming probe).
func (b *breaker) failure(sent, now time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != breakerClosed {
		return false
	}
	n := b.streak.Add(1)
	if n == 1 {
		b.firstFail = now
		// Never before the last time in fallback ended: the sum of these
		// times is at most the time that passed.
		b.since.Store(int64(max(sent, b.lastEnd, 0)) + 1)
	}
	if int(n) >= b.minFailures && now-b.firstFail >= b.span {
		b.state = breakerSuspect
		return true
	}
	return false
}

// confirm records the outcome of the confirming probe at now and reports
// whether the breaker opened.
func (b *breaker) confirm(ok bool, now time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != breakerSuspect {
		return false
	}
	if ok {
		b.state = breakerClosed
		b.end(now)
		return false
	}
	b.state = breakerOpen
	b.openings++
	return true
}

// recover closes an open breaker (a probe succeeded) at now.
func (b *breaker) recover(now time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != breakerOpen {
		return
	}
	b.state = breakerClosed
	b.end(now)
}

// fallbackSince reports whether the Limiter is in fallback, and since when.
func (b *breaker) fallbackSince() (time.Duration, bool) {
	s := b.since.Load()
	return time.Duration(s - 1), s != 0
}

// suspect reports whether the breaker waits for a confirming probe.
func (b *breaker) suspect() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == breakerSuspect
}

// stats returns how often the breaker opened and the time in fallback up
// to now.
func (b *breaker) stats(now time.Duration) (uint64, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	total := b.total
	if s := b.since.Load(); s != 0 {
		total += max(0, now-time.Duration(s-1))
	}
	return b.openings, total
}
