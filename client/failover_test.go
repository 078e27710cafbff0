package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

func quiet() client.Option { return client.WithLogger(slog.New(slog.DiscardHandler)) }

// waitFallback calls until the policy answers (the breaker is open).
func waitFallback(t *testing.T, l *client.Limiter, bucket string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if res, _ := l.Acquire(context.Background(), bucket, 1); res.Fallback {
			return
		}
	}
	t.Fatal("the failure policy never answered")
}

func TestFailurePolicies(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "p", 10, 1_000_000, 1, "svc") // 10 tokens, 1 per second
	ctx := context.Background()
	open := e.limiter(t, "svc", client.WithFailurePolicy(client.FailOpen), quiet())
	closed := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), quiet())
	local := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), client.WithInstances(2), quiet(),
		client.WithTimeout(client.DefaultTimeout))
	blind := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), quiet()) // never sees "p"
	stranger := e.limiter(t, "other", client.WithFailurePolicy(client.FailLocal), quiet())
	if _, err := stranger.Acquire(ctx, "p", 1); !errors.Is(err, client.ErrAppNotAllowed) {
		t.Fatalf("stranger: %v", err)
	}
	// The local limiter learns the config (6 tokens left).
	if res, err := local.Acquire(ctx, "p", 4); err != nil || !res.Allowed || res.Remaining != 6 {
		t.Fatalf("%+v %v", res, err)
	}
	for _, l := range []*client.Limiter{open, closed} {
		if _, err := l.Acquire(ctx, "p", 1); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	srv.Kill()
	for _, l := range []*client.Limiter{open, closed, local, blind, stranger} {
		waitFallback(t, l, "p")
	}

	for range 20 {
		if res, err := open.Acquire(ctx, "p", 1); err != nil || !res.Allowed || !res.Fallback {
			t.Fatalf("fail open: %+v %v", res, err)
		}
		if res, err := closed.Acquire(ctx, "p", 1); !errors.Is(err, client.ErrUnavailable) || res.Allowed || !res.Fallback || res.RetryAfter <= 0 {
			t.Fatalf("fail closed: %+v %v", res, err)
		}
		if res, err := blind.Acquire(ctx, "p", 1); !errors.Is(err, client.ErrUnavailable) || res.Allowed {
			t.Fatalf("local without a known config: %+v %v", res, err)
		}
		// Redis said this app may not use the bucket: the local policy must not grant it either.
		if res, err := stranger.Acquire(ctx, "p", 1); !errors.Is(err, client.ErrUnavailable) || res.Allowed {
			t.Fatalf("local for an app not allowed: %+v %v", res, err)
		}
	}
	if closed.Allow(ctx, "p") || !open.Allow(ctx, "p") {
		t.Error("Allow under the policies")
	}

	// Local: a bucket of capacity 10/2 = 5 at 1/2 per second that starts
	// empty and fills only while Redis fails (from when the first failed
	// call was sent, at most the timeout before it failed): never the
	// tokens Redis last reported, which are Redis's to grant.
	localGrants := func(calls int) (int, client.Result) {
		var got int
		var last client.Result
		for range calls {
			res, err := local.Acquire(ctx, "p", 1)
			if err != nil || !res.Fallback || res.Limit != 5 {
				t.Fatalf("local: %+v %v", res, err)
			}
			if res.Allowed {
				got++
			}
			last = res
		}
		return got, last
	}
	got, last := localGrants(10)
	if most := int(0.5 * (time.Since(killed) + client.DefaultTimeout).Seconds()); got > most {
		t.Errorf("local bucket granted %d of 10, at most %d filled since Redis went away", got, most)
	}
	if last.Allowed || last.RetryAfter <= 0 || last.RetryAfter > 2*time.Second {
		t.Errorf("local denial: %+v (want retry within 2 s at 0.5/s)", last)
	}
	time.Sleep(2100 * time.Millisecond) // at least one token more
	if got, _ = localGrants(10); got < 1 || got > int(0.5*(time.Since(killed)+client.DefaultTimeout).Seconds()) {
		t.Errorf("local bucket granted %d of 10 after 2 s more", got)
	}
	if _, err := local.Acquire(ctx, "p", 11); !errors.Is(err, client.ErrExceedsCapacity) {
		t.Errorf("n over the known capacity: %v", err)
	}
	if _, err := local.Acquire(ctx, "nope", 1); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("unseen bucket: %v", err)
	}
}

// load runs goroutines acquiring from bucket until stop, recording every call.
type load struct {
	mu    sync.Mutex
	calls []sample
	wg    sync.WaitGroup
	stop  chan struct{}
}

type sample struct {
	start, end time.Time
	res        client.Result
	err        error
}

func startLoad(l *client.Limiter, bucket string, goroutines int) *load {
	ld := &load{stop: make(chan struct{})}
	for range goroutines {
		ld.wg.Go(func() {
			var mine []sample
			for {
				select {
				case <-ld.stop:
					ld.mu.Lock()
					ld.calls = append(ld.calls, mine...)
					ld.mu.Unlock()
					return
				default:
				}
				s := sample{start: time.Now()}
				s.res, s.err = l.Acquire(context.Background(), bucket, 1)
				s.end = time.Now()
				mine = append(mine, s)
				time.Sleep(500 * time.Microsecond)
			}
		})
	}
	return ld
}

func (ld *load) finish() []sample {
	close(ld.stop)
	ld.wg.Wait()
	slices.SortFunc(ld.calls, func(a, b sample) int { return a.start.Compare(b.start) })
	return ld.calls
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(float64(len(d)-1)*p)]
}

// TestPausedRedis is BRIEF Q4: Redis stopped with SIGSTOP for 3 s under
// load. No call waits more than 100 ms, calls in fallback cost
// microseconds, and the limiter is back on Redis within 1 s of SIGCONT.
// Those wall-clock figures are asserted in the soak suite (SLUICE_SOAK=1),
// on a machine left to it; make test, which may run on a saturated one,
// asserts bounds ten times as wide, which only a broken timeout or probe
// misses (a call waiting go-redis's 3 s read timeout, a probe that never
// closes the breaker).
func TestPausedRedis(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	e, srv := privateRedis(t)
	e.define(t, "q4", 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc")
	l := e.limiter(t, "svc", quiet(), client.WithTimeout(client.DefaultTimeout)) // defaults: FailLocal, 50 ms, 100 ms probe
	if res, err := l.Acquire(context.Background(), "q4", 1); err != nil || !res.Allowed {
		t.Fatal(res, err)
	}
	ld := startLoad(l, "q4", 8)
	time.Sleep(500 * time.Millisecond)
	paused := time.Now()
	srv.Pause()
	time.Sleep(3 * time.Second)
	srv.Resume()
	resumed := time.Now()
	time.Sleep(1500 * time.Millisecond)
	calls := ld.finish()

	var worst time.Duration
	var fallback []time.Duration
	var back time.Time
	for _, c := range calls {
		d := c.end.Sub(c.start)
		worst = max(worst, d)
		if c.err != nil || !c.res.Allowed {
			t.Fatalf("call at %v: %+v %v", c.start.Sub(paused), c.res, c.err)
		}
		if c.res.Fallback && c.start.After(paused.Add(200*time.Millisecond)) && c.end.Before(resumed) {
			fallback = append(fallback, d)
		}
		if back.IsZero() && !c.res.Fallback && c.start.After(resumed) {
			back = c.start
		}
	}
	p50, p99 := percentile(fallback, 0.5), percentile(fallback, 0.99)
	t.Logf("%d calls; worst %v; %d fallback calls during the pause: p50 %v, p99 %v; back on redis %v after SIGCONT",
		len(calls), worst, len(fallback), p50, p99, back.Sub(resumed))
	if most := strict(100 * time.Millisecond); worst > most {
		t.Errorf("worst acquire took %v, want <= %v", worst, most)
	}
	if len(fallback) < 100 {
		t.Errorf("only %d fallback calls during the pause", len(fallback))
	}
	// Microseconds per call: a generous bound that holds under -race on a busy machine.
	if p50 > 200*time.Microsecond {
		t.Errorf("fallback p50 %v, want microseconds", p50)
	}
	if most := strict(time.Second); back.IsZero() || back.Sub(resumed) > most {
		t.Errorf("back on redis %v after SIGCONT, want <= %v", back.Sub(resumed), most)
	}
}

// TestRestartedRedis is BRIEF Q5: Redis killed and restarted empty. The
// policy answers within 200 ms (asserted as in TestPausedRedis); after the restart the script is loaded
// again and no acquire fails because of NOSCRIPT, nor with "unknown
// bucket" before the bucket is defined again.
func TestRestartedRedis(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	e, srv := privateRedis(t)
	e.define(t, "q5", 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc")
	var logs syncBuffer
	l := e.limiter(t, "svc", client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), client.WithTimeout(client.DefaultTimeout))
	if res, err := l.Acquire(context.Background(), "q5", 1); err != nil || !res.Allowed {
		t.Fatal(res, err)
	}
	ld := startLoad(l, "q5", 8)
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	srv.Kill()
	time.Sleep(500 * time.Millisecond)
	srv.Start()
	e.define(t, "q5", 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc") // as the reconcile would
	defined := time.Now()
	time.Sleep(1500 * time.Millisecond)
	calls := ld.finish()

	var firstFallback, back time.Time
	for _, c := range calls {
		if firstFallback.IsZero() && c.res.Fallback && c.start.After(killed) {
			firstFallback = c.end
		}
		if back.IsZero() && !c.res.Fallback && c.err == nil && c.start.After(defined) {
			back = c.start
		}
		// Between the restart and the reconcile Redis calls the bucket
		// unknown: a loss of state, answered by the policy, not an error.
		if c.err != nil {
			t.Errorf("call at %v after kill: %+v %v", c.start.Sub(killed), c.res, c.err)
		}
	}
	t.Logf("%d calls; fallback %v after kill; back on redis %v after the bucket was restored",
		len(calls), firstFallback.Sub(killed), back.Sub(defined))
	if most := strict(200 * time.Millisecond); firstFallback.IsZero() || firstFallback.Sub(killed) > most {
		t.Errorf("fallback %v after kill, want <= %v", firstFallback.Sub(killed), most)
	}
	if most := strict(time.Second); back.IsZero() || back.Sub(defined) > most {
		t.Errorf("back on redis %v after restart, want <= %v", back.Sub(defined), most)
	}
	if ok, err := e.rdb.ScriptExists(context.Background(), redisscript.AcquireScript.SHA()).Result(); err != nil || !ok[0] {
		t.Errorf("acquire script not loaded after the restart: %v %v", ok, err)
	}
	if strings.Contains(logs.String(), "NOSCRIPT") {
		t.Errorf("an acquire failed with NOSCRIPT:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "redis answers again") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCloseWithPausedRedis: Close returns at once even while a call is
// stuck on a server that answers nothing, and later calls get ErrClosed.
func TestCloseWithPausedRedis(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "c", 10, 1_000_000, 1, "svc")
	l := e.limiter(t, "svc", quiet(), client.WithTimeout(client.DefaultTimeout))
	ctx := context.Background()
	if _, err := l.Acquire(ctx, "c", 1); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	if res, _ := l.Acquire(ctx, "c", 1); !res.Fallback {
		t.Fatalf("paused: %+v", res)
	}
	start := time.Now()
	l.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if _, err := l.Acquire(ctx, "c", 1); !errors.Is(err, client.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// strict returns d in the soak suite and 10 d otherwise: wall-clock
// figures of the brief hold on a machine left to the test, not on one
// that stalls goroutines for tens of milliseconds.
func strict(d time.Duration) time.Duration {
	if soak() {
		return d
	}
	return 10 * d
}
