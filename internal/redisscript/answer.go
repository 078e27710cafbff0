package redisscript

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/limits"
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
}

// ErrBadAnswer is returned by AnswerOf for a malformed answer.
var ErrBadAnswer = errors.New("malformed acquire answer")

// AnswerOf interprets the acquire script's reply: seven integers.
func AnswerOf(v []int64) (Answer, error) {
	if len(v) != 7 || v[0] < int64(InvalidN) || v[0] > int64(Allowed) {
		return Answer{}, fmt.Errorf("%w: %v", ErrBadAnswer, v)
	}
	return Answer{Code: Code(v[0]), Remaining: v[1], RetryAfterMicros: v[2], ResetAfterMicros: v[3],
		Capacity: v[4], PermitsMicro: v[5], PeriodSeconds: v[6]}, nil
}

// Acquire runs the acquire script once (EVALSHA, EVAL after NOSCRIPT) for
// app taking n tokens from bucket name. It is the plain, unbatched form
// used by tests and tools; services use the client package.
func Acquire(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, app string, n int64) (Answer, error) {
	return AcquireRaw(ctx, rdb, ks, name, app, strconv.FormatInt(n, 10))
}

// AcquireRaw is Acquire with n passed as the raw string argument, so that
// tests can send what a careless client might ("1.5", "1e3", "-1").
func AcquireRaw(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, app, n string) (Answer, error) {
	v, err := acquireScript.Run(ctx, rdb, []string{ks.Bucket(name)}, app, n).Int64Slice()
	if err != nil {
		return Answer{}, fmt.Errorf("acquire %q: %w", name, err)
	}
	return AnswerOf(v)
}
