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
// due (1.02x to 1.1x the retry-after) is met: Wait asks again after the
// tokens are due and before the deadline. On a saturated machine that last round
// trip may itself end past the deadline; the test then checks that Wait
// did ask in time, which is what it controls.
func TestWaitDeadlineAfterTokens(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	e := sharedRedis(t)
	e.define(t, "due", 1, 2_000_000, 1, "svc") // capacity 1, 2 per second
	var mu sync.Mutex
	var starts []time.Time // of the Acquire calls of Wait
	// Without the denial cache: its retry-after counts from when the denied
	// call was sent, so it may say the tokens are due a round trip early,
	// and this test measures Wait against Redis's own due time.
	l := e.limiter(t, "svc", client.WithDenialCache(0), client.WithObserver(func(d client.Decision) {
		mu.Lock()
		starts = append(starts, time.Now().Add(-d.Latency))
		mu.Unlock()
	}))
	ctx := context.Background()
	// A round passes when Wait got the tokens, or asked Redis between the
	// due time and the deadline; a stalled scheduler can keep even a
	// correct Wait from asking within that short window, so a round is
	// tried up to three times, while a Wait that gives up early fails
	// every try.
	missed := map[int]int{}
	rounds := []float64{1.02, 1.05, 1.1, 1.02, 1.05}
	for round := 0; round < len(rounds); round++ {
		factor := rounds[round]
		res, err := l.Acquire(ctx, "due", 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed { // take the token, then learn when the next is due
			if res, err = l.Acquire(ctx, "due", 1); err != nil || res.Allowed {
				t.Fatalf("second token: %+v %v", res, err)
			}
		}
		due := time.Now().Add(res.RetryAfter) // a little after Redis's due time
		mu.Lock()
		starts = nil
		mu.Unlock()
		dl, cancel := context.WithDeadline(ctx, time.Now().Add(time.Duration(float64(res.RetryAfter)*factor)))
		err = l.Wait(dl, "due", 1)
		deadline, _ := dl.Deadline()
		cancel()
		if err == nil {
			continue
		}
		mu.Lock()
		askedInTime := false
		for _, s := range starts {
			askedInTime = askedInTime || (!s.Before(due.Add(-5*time.Millisecond)) && s.Before(deadline))
		}
		mu.Unlock()
		if !askedInTime {
			if missed[round]++; missed[round] < 3 {
				t.Logf("round %d: Wait did not ask between the due time and the deadline: trying again", round)
				round--
				continue
			}
			t.Errorf("round %d: tokens due in %v, deadline %.2fx: %v, and Wait did not ask between the two, 3 times",
				round, res.RetryAfter, factor, err)
		} else {
			t.Logf("round %d: Wait asked in time, but the round trip ended past the deadline (a stalled machine)", round)
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
