package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// TestWaitDeadlineAfterTokens: a deadline a little after the tokens are
// due (here 1.1x the retry-after) is met: Wait asks again before it.
func TestWaitDeadlineAfterTokens(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	e := sharedRedis(t)
	e.define(t, "due", 1, 2_000_000, 1, "svc") // capacity 1, 2 per second
	l := e.limiter(t, "svc")
	ctx := context.Background()
	for round := range 3 {
		res, err := l.Acquire(ctx, "due", 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed { // take the token, then learn when the next is due
			if res, err = l.Acquire(ctx, "due", 1); err != nil || res.Allowed {
				t.Fatalf("second token: %+v %v", res, err)
			}
		}
		dl, cancel := context.WithTimeout(ctx, res.RetryAfter*11/10)
		err = l.Wait(dl, "due", 1)
		cancel()
		if err != nil {
			t.Errorf("round %d: tokens due in %v, deadline 1.1x: %v", round, res.RetryAfter, err)
		}
	}
}

// TestWaitFairness: 50 waiters on one bucket in one Limiter are served in
// turn: every one gets its token within the time the bucket needs for all
// of them (with room for a slow machine), and only the first waiter asks
// Redis, so the calls stay near one per token instead of one per waiter
// per token.
func TestWaitFairness(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "fair", 1, 20_000_000, 1, "svc") // capacity 1, 20 per second
	var calls atomic.Int64
	l := e.limiter(t, "svc", client.WithObserver(func(client.Decision) { calls.Add(1) }))
	const waiters = 50
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // 2.5 s of tokens
	defer cancel()
	var wg sync.WaitGroup
	var done atomic.Int64
	for range waiters {
		wg.Go(func() {
			if err := l.Wait(ctx, "fair", 1); err != nil {
				t.Errorf("waiter: %v", err)
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	t.Logf("%d waiters served with %d acquire calls", done.Load(), calls.Load())
	if done.Load() != waiters {
		t.Fatalf("%d of %d waiters got their token", done.Load(), waiters)
	}
	// One call per token, plus a retry now and then (a wake-up a hair early
	// by Redis's clock, a stalled waiter).
	if n := calls.Load(); n > 3*waiters {
		t.Errorf("%d acquire calls for %d tokens: waiters poll Redis side by side", n, waiters)
	}
}
