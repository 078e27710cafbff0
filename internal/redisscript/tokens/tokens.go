// Package tokens is the Go core of the token bucket: the same arithmetic as
// the Lua core of the scripts (internal/redisscript/lua/bucket.lua and
// keyed.lua, docs/protocol.md "The Lua core"), operation for operation, so
// that the client's failure policy, its leases and client/memlimit answer
// what Redis answers for the same state. Times are microseconds; the zero
// Limit is invalid (Valid reports false).
package tokens

import "math"

// MaxMicros caps every duration, as in the scripts: 10^15 µs, about 31 years.
const MaxMicros = 1_000_000_000_000_000

// Limit is a bucket's limit: at most Capacity tokens, refilled with
// PermitsMicro millionths of a token every Period seconds, of which Reserve
// are kept for critical requests. Redis's periods are whole seconds;
// memlimit's may be fractions.
type Limit struct {
	Capacity     int64
	PermitsMicro int64
	Period       float64
	// Reserve is the tokens only a request marked critical may take: any
	// other request is refused when taking its tokens would leave fewer
	// (docs/protocol.md, "Reserve"). 0 is none; a value outside 0 to
	// Capacity - 1 counts as none, as the scripts read it.
	Reserve int64
}

// Kept is what a request must leave in the bucket: the reserve, or
// nothing for a critical request. A request of more than Capacity - Kept
// can never be granted (Exceeds).
func (l Limit) Kept(critical bool) int64 {
	if critical || l.Reserve < 1 || l.Reserve >= l.Capacity {
		return 0
	}
	return l.Reserve
}

// Exceeds reports whether a request of n tokens can never be granted: more
// than the capacity less what it must leave.
func (l Limit) Exceeds(n int64, critical bool) bool { return n > l.Capacity-l.Kept(critical) }

// ScaleReserve is the reserve of a limit of capacity to that keeps the
// share reserve/capacity of a limit of capacity from: floor(reserve * to /
// from), exactly. It is an override's reserve (the bucket's share of the
// override's capacity) and a failure policy's local share of one.
func ScaleReserve(reserve, from, to int64) int64 {
	if reserve < 1 || from < 1 || to < 1 || reserve >= from {
		return 0
	}
	// Capacities are at most 1e9: the product fits an int64.
	return reserve * to / from
}

// Valid reports whether l can serve a request (the scripts' "unknown
// bucket" check: capacity >= 1, a positive rate).
func (l Limit) Valid() bool { return l.Capacity >= 1 && l.PermitsMicro > 0 && l.Period > 0 }

// Refill returns the tokens and ts of a bucket that held tokens at ts, at
// now: a clock that went backwards adds nothing and ts never moves back;
// never above capacity. A debt (negative tokens) is kept.
func (l Limit) Refill(tokens float64, ts, now int64) (float64, int64) {
	if now > ts {
		tokens += float64(now-ts) * float64(l.PermitsMicro) / (l.Period * 1e12)
		ts = now
	}
	return math.Min(tokens, float64(l.Capacity)), ts
}

// Micros rounds a duration in µs up, to 0..MaxMicros.
func Micros(x float64) int64 {
	if !(x > 0) {
		return 0
	}
	if x = math.Ceil(x); x > MaxMicros {
		return MaxMicros
	}
	return int64(x)
}

// Until is the time in µs until the bucket gains want tokens.
func (l Limit) Until(want float64) int64 {
	if want <= 0 {
		return 0
	}
	return Micros(want * l.Period * 1e12 / float64(l.PermitsMicro))
}

// Codes of an Answer, as in the scripts.
const (
	Denied    = 0
	Allowed   = 1
	WouldDeny = 2
)

// Answer is the decision of one request of n tokens, in the scripts'
// terms.
type Answer struct {
	Code        int
	Remaining   int64 // whole tokens left, never below 0
	RetryMicros int64 // until n tokens are there (0 when allowed)
	ResetMicros int64 // until the bucket is full
}

// Take decides a request of n tokens, critical or not, from a bucket
// holding tokens: the tokens left and ok when they were taken (tokens -
// r >= n, r what the request must leave, Kept). Otherwise nothing is taken
// and the answer is Denied, or WouldDeny in shadow mode, with the wait
// until the bucket holds r + n counted from its actual count: a bucket in
// debt waits for the debt and then r + n (docs/protocol.md, "Debt").
// Remaining is what the request could still take. The caller checks
// Exceeds first.
func (l Limit) Take(tokens float64, n int64, shadow, critical bool) (left float64, ok bool, a Answer) {
	r := float64(l.Kept(critical))
	if tokens-r >= float64(n) {
		left = tokens - float64(n)
		return left, true, Answer{Code: Allowed, Remaining: int64(math.Floor(left - r)),
			ResetMicros: l.Until(float64(l.Capacity) - left)}
	}
	a = Answer{Code: Denied, Remaining: int64(math.Max(math.Floor(tokens-r), 0)),
		RetryMicros: l.Until(float64(n) + r - tokens), ResetMicros: l.Until(float64(l.Capacity) - tokens)}
	if shadow {
		a.Code = WouldDeny
	}
	return tokens, false, a
}

// Adjust applies a refund (delta > 0) or a charge (delta < 0) to a bucket
// holding tokens: never above capacity, never below -capacity (the deepest
// debt). It returns the new count and the tokens applied, rounded.
func (l Limit) Adjust(tokens float64, delta int64) (float64, int64) {
	c := float64(l.Capacity)
	tokens = math.Max(tokens, -c)
	after := math.Max(-c, math.Min(c, tokens+float64(delta)))
	return after, int64(math.Floor(math.Abs(after-tokens) + 0.5))
}

// PerSecond is the refill rate in tokens per second.
func (l Limit) PerSecond() float64 { return float64(l.PermitsMicro) / 1e6 / l.Period }

// Per is the time in µs one token takes, as the keyed script computes it.
func (l Limit) Per() float64 { return l.Period * 1e12 / float64(l.PermitsMicro) }

// KeyFullAt is a key's full_at (µs; the time its bucket is full again)
// read from a stored fullAt (ok false when there is none), as the keyed
// script reads it: none or in the past is full (now); a key owes no more
// than it holds (now + a full bucket).
func (l Limit) KeyFullAt(fullAt float64, ok bool, now int64) float64 {
	n := float64(now)
	if !ok {
		return n
	}
	return math.Max(n, math.Min(fullAt, n+float64(l.Capacity)*l.Per()))
}

// KeyTake decides a request of n tokens of a key whose bucket is full at
// fullAt, as the keyed script does: the new fullAt and ok when granted.
// A billionth of a token is the tolerance for the rounding of fullAt.
func (l Limit) KeyTake(fullAt float64, n, now int64, shadow, critical bool) (float64, bool, Answer) {
	per := l.Per()
	r := float64(l.Kept(critical))
	t := math.Max(0, float64(l.Capacity)-(fullAt-float64(now))/per)
	if t-r+0.000000001 >= float64(n) {
		fullAt += float64(n) * per
		left := math.Max(0, t-float64(n))
		return fullAt, true, Answer{Code: Allowed, Remaining: int64(math.Max(math.Floor(left-r), 0)),
			ResetMicros: Micros(fullAt - float64(now))}
	}
	a := Answer{Code: Denied, Remaining: int64(math.Max(math.Floor(t-r), 0)), RetryMicros: Micros((float64(n) + r - t) * per),
		ResetMicros: Micros(fullAt - float64(now))}
	if shadow {
		a.Code = WouldDeny
	}
	return fullAt, false, a
}
