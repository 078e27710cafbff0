package client_test

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// TestHealthyRedisLoadedClient is BRIEF Q12: a healthy Redis while the
// client's machine is saturated (CPU burners on every core beside
// hundreds of callers). Calls may miss their timeout now and then (the
// caller's goroutine did not run in time) and get the policy's answer,
// but the breaker never opens: no call is sent to the policy because of a
// slow client. Run with the default timeout and with 5 ms.
func TestHealthyRedisLoadedClient(t *testing.T) {
	t.Parallel()
	heavy.Lock() // the burners would distort the tests that time single calls
	defer heavy.Unlock()
	e, _ := privateRedis(t)
	e.define(t, "busy", 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc")
	dur := 3 * time.Second
	if soak() {
		dur = 20 * time.Second
	}
	for _, timeout := range []time.Duration{client.DefaultTimeout, 5 * time.Millisecond} {
		t.Run(timeout.String(), func(t *testing.T) {
			var logs syncBuffer
			l := e.limiter(t, "svc", client.WithTimeout(timeout),
				client.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var burned atomic.Int64
			for range 2 * runtime.GOMAXPROCS(0) {
				wg.Go(func() {
					x := uint64(1)
					for {
						select {
						case <-stop:
							burned.Add(int64(x & 1))
							return
						default:
						}
						for range 100_000 {
							x = x*6364136223846793005 + 1442695040888963407
						}
					}
				})
			}
			var calls, fallbacks, allowed atomic.Int64
			for range 200 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						res, _ := l.Acquire(context.Background(), "busy", 1)
						calls.Add(1)
						if res.Fallback {
							fallbacks.Add(1)
						}
						if res.Allowed && !res.Fallback {
							allowed.Add(1)
						}
					}
				})
			}
			time.Sleep(dur)
			close(stop)
			wg.Wait()
			st := l.Stats()
			opened := strings.Count(logs.String(), "redis unavailable")
			t.Logf("timeout %v: %d calls, %d granted by redis, %d answered by the policy (call timeouts), "+
				"breaker opened %d times (%d logged), %v in fallback", timeout, calls.Load(), allowed.Load(),
				fallbacks.Load(), st.BreakerOpenings, opened, st.Fallback)
			if st.BreakerOpenings != 0 || opened != 0 {
				t.Errorf("the breaker opened %d times on a healthy Redis:\n%s", max(int(st.BreakerOpenings), opened), logs.String())
			}
			if allowed.Load() == 0 {
				t.Error("no call was answered by Redis")
			}
		})
	}
}
