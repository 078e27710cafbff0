package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// maxWaitStep caps one sleep of Wait, so that a config change (a higher
// rate) or a recovered Redis is noticed within a second.
const maxWaitStep = time.Second

// Wait blocks until n tokens of bucket are granted by l or ctx ends. Between
// attempts it sleeps for the RetryAfter of the denial plus a little
// jitter, so waiters do not wake in lockstep, and never spins. When ctx
// has a deadline that the wait would pass, it returns at once with an
// error matching context.DeadlineExceeded. Errors other than denial and
// ErrUnavailable end the wait; under FailClosed (or FailLocal without a
// known config) it keeps waiting for Redis to come back.
func Wait(ctx context.Context, l Acquirer, bucket string, n int64) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		res, err := l.Acquire(ctx, bucket, n)
		switch {
		case err == nil && res.Allowed:
			return nil
		case err != nil && !errors.Is(err, ErrUnavailable):
			return err
		}
		d := res.RetryAfter
		if d <= 0 {
			d = probeOf(l)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return fmt.Errorf("sluice: wait for %q would pass the deadline: %w", bucket, context.DeadlineExceeded)
		}
		d += time.Duration(rand.Int64N(int64(d/10) + int64(time.Millisecond)))
		d = min(d, maxWaitStep)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
}
