package redisscript

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Op is what an adjust call does to a bucket.
type Op string

// Operations of the adjust script.
const (
	// Refund gives n tokens back, never above capacity.
	Refund Op = "refund"
	// Charge takes n tokens after the fact, whatever is left: the bucket may
	// go into debt, never deeper than MaxDebt (its capacity).
	Charge Op = "charge"
	// Reserve takes n tokens now if that leaves a debt of at most the
	// capacity (else it takes nothing and answers Denied); the answer's
	// RetryAfterMicros is when the debt will be paid, the time the holder
	// must wait before acting on the tokens.
	Reserve Op = "reserve"
)

// The deepest debt a bucket can be in is its capacity: tokens never go
// below -capacity. Charges past it are cut; reservations past it are denied.

// AdjustAnswer is a parsed adjust answer.
type AdjustAnswer struct {
	// Answer has the acquire answer's fields. Code is Allowed when the
	// operation was applied (Denied only for a reservation that would go
	// too deep). Remaining may be negative: the bucket is in debt.
	// RetryAfterMicros is, for a reservation, how long to wait before using
	// the tokens (0 when there was no debt), and when Denied how long until
	// the reservation would fit.
	Answer
	// Applied is how many tokens were actually given back or taken, rounded
	// to a whole number: less than n when capacity (refund) or the debt
	// bound (charge) cut it.
	Applied int64
}

// AdjustAnswerOf interprets the adjust script's reply: eight integers.
func AdjustAnswerOf(v []int64) (AdjustAnswer, error) {
	if len(v) != 8 {
		return AdjustAnswer{}, fmt.Errorf("%w: adjust: %v", ErrBadAnswer, v)
	}
	a, err := AnswerOf(v[:7])
	if err != nil {
		return AdjustAnswer{}, err
	}
	return AdjustAnswer{Answer: a, Applied: v[7]}, nil
}

// AdjustArgs returns the ARGV of an adjust call: app, op, n.
func AdjustArgs(app string, op Op, n int64) []any {
	return []any{app, string(op), strconv.FormatInt(n, 10)}
}

// Adjust runs the adjust script once on bucket name. It is the plain form
// used by tests and tools; services use the client package.
func Adjust(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, app string, op Op, n int64) (AdjustAnswer, error) {
	v, err := AdjustScript.Run(ctx, rdb, []string{ks.Bucket(name)}, AdjustArgs(app, op, n)...).Int64Slice()
	if err != nil {
		return AdjustAnswer{}, fmt.Errorf("%s %q: %w", op, name, err)
	}
	return AdjustAnswerOf(v)
}
