package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// Adjustment is the answer to Refund and Charge.
type Adjustment struct {
	// Applied is how many tokens were given back or taken: less than n
	// when the capacity (Refund) or the debt bound (Charge) cut it.
	Applied int64
	// Remaining is the whole tokens left; negative while the bucket is in
	// debt.
	Remaining int64
	// Limit is the bucket's capacity. The bucket never holds more than
	// Limit tokens, nor owes more than Limit (Remaining >= -Limit).
	Limit int64
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
}

// Refund gives n tokens back to bucket, after work that turned out
// cheaper than what was acquired. The bucket never holds more than its
// capacity; the excess is dropped. A refund is sent once and never
// resent: when Redis does not answer (ErrUnavailable) the tokens are not
// given back, and the bucket refills on its own.
func (l *Limiter) Refund(ctx context.Context, bucket string, n int64) (Adjustment, error) {
	a, err := l.adjust(ctx, bucket, redisscript.Refund, n)
	return adjustment(a), err
}

// Charge takes n tokens from bucket after the fact ("the response was 3 MB:
// charge 3 more"), whatever is left: the bucket may go into debt, which
// later requests pay off (they are denied until refill brings the tokens
// back above what they ask). The debt never goes deeper than the
// capacity: a charge past it is cut (Applied < n). When Redis does not
// answer (ErrUnavailable) nothing is charged.
func (l *Limiter) Charge(ctx context.Context, bucket string, n int64) (Adjustment, error) {
	a, err := l.adjust(ctx, bucket, redisscript.Charge, n)
	return adjustment(a), err
}

func adjustment(a redisscript.AdjustAnswer) Adjustment {
	return Adjustment{Applied: a.Applied, Remaining: a.Remaining, Limit: a.Capacity,
		ResetAfter: time.Duration(a.ResetAfterMicros) * time.Microsecond}
}

// adjust runs the adjust script; errors are ErrInvalidN, ErrUnknownBucket,
// ErrAppNotAllowed, ErrExceedsCapacity (Reserve), ErrUnavailable (also for
// an error reply), ErrClosed or ctx's error.
func (l *Limiter) adjust(ctx context.Context, bucket string, op redisscript.Op, n int64) (redisscript.AdjustAnswer, error) {
	if n < 1 || n > redisscript.MaxN {
		return redisscript.AdjustAnswer{}, ErrInvalidN
	}
	if !redisscript.ValidName(bucket) {
		return redisscript.AdjustAnswer{}, ErrUnknownBucket
	}
	key := l.ks.Bucket(bucket)
	reply, err := l.runScript(ctx, adjustScript,
		[]string{key}, redisscript.AdjustArgs(l.app, op, n))
	if op == redisscript.Refund {
		// Tokens may have come back: a cached denial of the bucket no longer holds.
		l.denied.drop(key)
	}
	var rep errReply
	if errors.As(err, &rep) {
		return redisscript.AdjustAnswer{}, ErrUnavailable
	}
	if err != nil {
		return redisscript.AdjustAnswer{}, err
	}
	a, err := redisscript.AdjustAnswerOf(reply)
	if err != nil {
		l.failed()
		return redisscript.AdjustAnswer{}, ErrUnavailable
	}
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied:
		return a, nil
	}
	return a, codeErr(a.Code)
}

// Reservation is n tokens taken ahead of time by Reserve, in the style of
// golang.org/x/time/rate: the holder waits Delay, then acts, or cancels to
// give the tokens back.
type Reservation struct {
	l        *Limiter
	bucket   string
	n        int64
	ok       bool
	readyAt  time.Time
	retry    time.Duration
	limit    int64
	canceled atomic.Bool
}

// OK reports whether the tokens were reserved. When false nothing was
// taken: the bucket's debt would have passed its capacity; RetryAfter says
// when the reservation would fit.
func (r *Reservation) OK() bool { return r.ok }

// Delay is how long the holder must still wait before acting on the
// tokens: until the bucket's debt, this reservation included, is paid.
// It is measured on this process's clock from when Redis answered.
func (r *Reservation) Delay() time.Duration { return max(0, time.Until(r.readyAt)) }

// RetryAfter is, when !OK, how long until a reservation of the same size
// would fit.
func (r *Reservation) RetryAfter() time.Duration { return r.retry }

// Limit is the bucket's capacity: the most one reservation takes and the
// deepest debt reservations can run up.
func (r *Reservation) Limit() int64 { return r.limit }

// Cancel gives the reserved tokens back (a Refund of n, capped at the
// capacity). It does so once; later calls, and calls on a reservation
// that is not OK, do nothing. Unlike x/time/rate it cannot tell whether
// later reservations already counted on these tokens, so it returns all n.
func (r *Reservation) Cancel(ctx context.Context) error {
	if !r.ok || r.canceled.Swap(true) {
		return nil
	}
	_, err := r.l.Refund(ctx, r.bucket, r.n)
	return err
}

// Wait sleeps for Delay. If ctx ends first, it cancels the reservation
// and returns ctx's error; it returns an error matching
// context.DeadlineExceeded at once when ctx's deadline comes before Delay
// ends. A reservation that is not OK returns ErrNotReserved.
func (r *Reservation) Wait(ctx context.Context) error {
	if !r.ok {
		return ErrNotReserved
	}
	d := r.Delay()
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		_ = r.Cancel(context.WithoutCancel(ctx))
		return context.DeadlineExceeded
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		_ = r.Cancel(context.WithoutCancel(ctx))
		return ctx.Err()
	}
}

// ErrNotReserved: Wait on a reservation that was not granted.
var ErrNotReserved = errors.New("sluice: tokens not reserved")

// Reserve takes n tokens from bucket now, even if they are not there yet:
// the bucket goes into debt, and the holder waits Delay (until the debt is
// paid) before acting, or calls Cancel to give them back. Plain acquires
// are denied meanwhile, so the reservation holds its place. Debt is
// bounded by the capacity: a reservation that would pass it is not OK and
// takes nothing. Errors are Acquire's; while Redis is unavailable Reserve
// returns ErrUnavailable (a reservation cannot be honoured locally).
func (l *Limiter) Reserve(ctx context.Context, bucket string, n int64) (*Reservation, error) {
	a, err := l.adjust(ctx, bucket, redisscript.Reserve, n)
	if err != nil {
		return nil, err
	}
	r := &Reservation{l: l, bucket: bucket, n: n, ok: a.Code == redisscript.Allowed, limit: a.Capacity}
	d := time.Duration(a.RetryAfterMicros) * time.Microsecond
	if r.ok {
		r.readyAt = time.Now().Add(d)
	} else {
		r.retry = d
	}
	return r, nil
}
