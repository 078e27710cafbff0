package redisscript

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript/limits"
)

// Code is the first field of an acquire answer.
type Code int8

// Codes of the acquire script.
const (
	// Denied: not enough tokens; RetryAfterMicros says when there will be.
	Denied Code = 0
	// Allowed: n tokens were taken.
	Allowed Code = 1
	// UnknownBucket: no bucket hash with a config.
	UnknownBucket Code = -1
	// AppNotAllowed: the app is not in the bucket's allowed apps.
	AppNotAllowed Code = -2
	// ExceedsCapacity: n is larger than the capacity and can never be granted.
	ExceedsCapacity Code = -3
	// InvalidN: n is not an integer from 1 to 1e9.
	InvalidN Code = -4
	// WouldDeny: the bucket is in shadow mode and would have denied; the
	// caller is allowed, nothing was taken, and RetryAfterMicros says
	// when the tokens would have been there.
	WouldDeny Code = 2
)

// MaxN is the largest n an acquire accepts.
const MaxN = limits.MaxCapacity

// Answer is a parsed acquire answer. Fields the code does not carry are
// zero: UnknownBucket and InvalidN carry nothing else; AppNotAllowed and
// ExceedsCapacity carry the config; Allowed and Denied carry everything.
type Answer struct {
	// Code says which answer it is.
	Code Code
	// Remaining is the whole tokens left after this call.
	Remaining int64
	// RetryAfterMicros is, when Denied, the time until n tokens are there.
	RetryAfterMicros int64
	// ResetAfterMicros is the time until the bucket is full again.
	ResetAfterMicros int64
	// Capacity is the bucket's capacity.
	Capacity int64
	// PermitsMicro is the bucket's permits per period times 1e6.
	PermitsMicro int64
	// PeriodSeconds is the bucket's period.
	PeriodSeconds int64
	// LeaseMillis is the bucket's lease time when it is in lease mode and
	// the call asked for it (protocol 2); else 0.
	LeaseMillis int64
	// HasShadow says the answer tells the bucket's shadow mode (the ninth
	// integer of a protocol 2 answer), and Shadow what it is.
	HasShadow, Shadow bool
	// HasReserve says the answer tells the bucket's reserve (the tenth
	// integer of a protocol 3 answer), and Reserve what it is: the tokens
	// only critical requests may take.
	HasReserve bool
	Reserve    int64
}

// ErrBadAnswer is returned by AnswerOf for a malformed answer.
var ErrBadAnswer = errors.New("malformed acquire answer")

// AnswerOf interprets the acquire script's reply: seven integers, nine
// (the lease time and shadow mode) when the call passed protocol 2 (eight
// from a script of an older release), ten (and the reserve) under
// protocol 3.
func AnswerOf(v []int64) (Answer, error) {
	if len(v) < 7 || len(v) > 10 || v[0] < int64(InvalidN) || v[0] > int64(WouldDeny) {
		return Answer{}, fmt.Errorf("%w: %v", ErrBadAnswer, v)
	}
	a := Answer{Code: Code(v[0]), Remaining: v[1], RetryAfterMicros: v[2], ResetAfterMicros: v[3],
		Capacity: v[4], PermitsMicro: v[5], PeriodSeconds: v[6]}
	if len(v) >= 8 {
		a.LeaseMillis = v[7]
	}
	if len(v) >= 9 {
		a.HasShadow, a.Shadow = true, v[8] == 1
	}
	if len(v) == 10 {
		a.HasReserve, a.Reserve = true, v[9]
	}
	return a, nil
}

// LeaseAnswer is a parsed lease answer. Granted tokens were taken from the
// bucket; they may be handed out until the lease ends.
type LeaseAnswer struct {
	// Code is Allowed when tokens were granted, Denied when none were, or
	// one of the error codes of acquire (never ExceedsCapacity: a request
	// above capacity is cut to it).
	Code Code
	// Granted is the tokens leased, 0 to the tokens asked for.
	Granted int64
	// Remaining is the whole tokens left in the bucket.
	Remaining int64
	// RetryAfterMicros is, when nothing was granted, the time until one
	// token is there.
	RetryAfterMicros int64
	// Capacity, PermitsMicro and PeriodSeconds are the bucket's config.
	Capacity, PermitsMicro, PeriodSeconds int64
	// LeaseMillis is the bucket's lease time; 0 when it is not (or no
	// longer) in lease mode, and then nothing is granted.
	LeaseMillis int64
}

// LeaseAnswerOf interprets the lease script's reply: eight integers.
func LeaseAnswerOf(v []int64) (LeaseAnswer, error) {
	if len(v) != 8 || v[0] < int64(InvalidN) || v[0] > int64(Allowed) {
		return LeaseAnswer{}, fmt.Errorf("%w: %v", ErrBadAnswer, v)
	}
	return LeaseAnswer{Code: Code(v[0]), Granted: v[1], Remaining: v[2], RetryAfterMicros: v[3],
		Capacity: v[4], PermitsMicro: v[5], PeriodSeconds: v[6], LeaseMillis: v[7]}, nil
}

// Lease runs the lease script once for app: it gives back back unused
// tokens of an ended lease and takes up to want tokens as a new one. It
// is the plain form used by tests and tools; services use the client.
func Lease(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, app string, want, back int64) (LeaseAnswer, error) {
	v, err := LeaseScript.Run(ctx, rdb, []string{ks.Bucket(name)}, app, strconv.FormatInt(want, 10),
		strconv.FormatInt(back, 10)).Int64Slice()
	if err != nil {
		return LeaseAnswer{}, fmt.Errorf("lease %q: %w", name, err)
	}
	return LeaseAnswerOf(v)
}

// Acquire runs the acquire script once (EVALSHA, EVAL after NOSCRIPT) for
// app taking n tokens from bucket name. It is the plain, unbatched form
// used by tests and tools; services use the client package.
func Acquire(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, app string, n int64) (Answer, error) {
	return AcquireRaw(ctx, rdb, ks, name, app, strconv.FormatInt(n, 10))
}

// AcquireCritical is Acquire of a request marked critical, which may take
// the bucket's reserve, under protocol 3: the answer tells the lease time,
// shadow mode and reserve.
func AcquireCritical(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, app string, n int64, critical bool) (Answer, error) {
	v, err := AcquireScript.Run(ctx, rdb, []string{ks.Bucket(name)}, app, strconv.FormatInt(n, 10), ProtocolReserve,
		CriticalArg(critical)).Int64Slice()
	if err != nil {
		return Answer{}, fmt.Errorf("acquire %q: %w", name, err)
	}
	return AnswerOf(v)
}

// ProtocolReserve is the protocol argument of protocol 3: the acquire
// answers carry the lease time, shadow mode and reserve.
const ProtocolReserve = "3"

// CriticalArg is the critical argument of the acquire script: "1" marks a
// request critical, "0" not.
func CriticalArg(critical bool) string { return flag(critical) }

// AcquireRaw is Acquire with n passed as the raw string argument, so that
// tests can send what a careless client might ("1.5", "1e3", "-1").
func AcquireRaw(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, app, n string) (Answer, error) {
	v, err := AcquireScript.Run(ctx, rdb, []string{ks.Bucket(name)}, app, n).Int64Slice()
	if err != nil {
		return Answer{}, fmt.Errorf("acquire %q: %w", name, err)
	}
	return AnswerOf(v)
}
