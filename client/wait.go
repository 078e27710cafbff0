package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// maxWaitStep caps one sleep of Wait, so that a config change (a higher
// rate) or a recovered Redis is noticed within a second.
const maxWaitStep = time.Second

// Wait blocks until n tokens of bucket are granted or ctx ends, and never
// spins: between attempts it sleeps for the RetryAfter of the denial plus
// a little jitter, so that processes waiting on one bucket do not wake in
// lockstep.
//
// Deadline: when ctx has a deadline sooner than the tokens can come, Wait
// returns at once with an error matching context.DeadlineExceeded. When
// the tokens are due before the deadline, the jitter is kept within the
// time left, so Wait asks again before the deadline and gets them (unless
// another process took them first).
//
// Fairness: the waiters of one bucket in one Limiter are served in the
// order they called Wait. Only the first of them asks Redis; the next
// starts when it was granted or gave up. So a waiter is never overtaken by
// a later one of the same process, and it waits for the tokens asked for
// by the waiters ahead of it (a large n ahead holds up small ones behind,
// which in return are never starved by a stream of small ones). Critical
// waiters (a ctx marked Critical) queue apart, in their own order: they
// never wait behind waiters that must leave the bucket's reserve. Across
// processes, each process's first waiter competes for the refill on equal
// terms.
//
// Errors other than denial and ErrUnavailable end the wait; under
// FailClosed (or FailLocal without a known config) it keeps waiting for
// Redis to come back.
func (l *Limiter) Wait(ctx context.Context, bucket string, n int64) error {
	if n < 1 || n > redisscript.MaxN || !redisscript.ValidName(bucket) || l.closed.Load() {
		_, err := l.Acquire(ctx, bucket, n) // the error of the call
		return err
	}
	q := &l.bucket(bucket).waiters
	if IsCritical(ctx) {
		q = &l.bucket(bucket).criticalWaiters
	}
	w := q.join()
	defer q.leave(w)
	select {
	case <-w.turn:
	case <-ctx.Done():
		return ctx.Err()
	}
	return waitLoop(ctx, bucket, l.opt.probe, func(ctx context.Context) (Result, error) { return l.Acquire(ctx, bucket, n) })
}

// Wait blocks until n tokens of bucket are granted by a or ctx ends, with
// the deadline and jitter rules of Limiter.Wait; for a *Limiter it is
// Limiter.Wait, fairness included. Any other Acquirer (such as package
// memlimit's) is asked again after each RetryAfter.
func Wait(ctx context.Context, a Acquirer, bucket string, n int64) error {
	if l, ok := a.(*Limiter); ok {
		return l.Wait(ctx, bucket, n)
	}
	return waitLoop(ctx, bucket, probeOf(a), func(ctx context.Context) (Result, error) { return a.Acquire(ctx, bucket, n) })
}

// waitLoop runs acquire until it grants or fails for good (see
// Limiter.Wait); probe is the sleep after an answer without a RetryAfter.
func waitLoop(ctx context.Context, bucket string, probe time.Duration, acquire func(context.Context) (Result, error)) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		res, err := acquire(ctx)
		switch {
		case err == nil && res.Allowed:
			return nil
		case err != nil && !errors.Is(err, ErrUnavailable):
			return err
		}
		var left time.Duration
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline {
			left = time.Until(dl)
		}
		d, ok := waitStep(res.RetryAfter, probe, left, hasDeadline, rand.Int64N)
		if !ok {
			return fmt.Errorf("sluice: wait for %q would pass the deadline: %w", bucket, context.DeadlineExceeded)
		}
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

// waitStep returns how long Wait sleeps after a denial with retry (the
// probe interval when Redis gave none), with left until the deadline if
// there is one, or false when the tokens come too late. The jitter (up to
// a tenth, so that processes do not wake in lockstep) never takes the
// wake-up past halfway between the tokens and the deadline: the call
// after it then still has time to get them.
func waitStep(retry, probe, left time.Duration, hasDeadline bool, rnd func(int64) int64) (time.Duration, bool) {
	d := retry
	if d <= 0 {
		d = probe
	}
	jitter := d/10 + time.Millisecond
	if hasDeadline {
		if left < d {
			return 0, false
		}
		jitter = min(jitter, (left-d)/2)
	}
	if jitter > 0 {
		d += time.Duration(rnd(int64(jitter) + 1))
	}
	return min(d, maxWaitStep), true
}

// waitQueue orders the waiters of one bucket: the first one has its turn.
type waitQueue struct {
	mu sync.Mutex
	q  []*waiter
}

type waiter struct {
	turn chan struct{} // closed when the waiter is first
}

func (q *waitQueue) join() *waiter {
	w := &waiter{turn: make(chan struct{})}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.q = append(q.q, w)
	if len(q.q) == 1 {
		close(w.turn)
	}
	return w
}

// leave removes w, granted or given up, and gives the turn to the next.
func (q *waitQueue) leave(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.q {
		if x != w {
			continue
		}
		copy(q.q[i:], q.q[i+1:])
		q.q[len(q.q)-1] = nil
		q.q = q.q[:len(q.q)-1]
		if i == 0 && len(q.q) > 0 {
			close(q.q[0].turn)
		}
		return
	}
}
