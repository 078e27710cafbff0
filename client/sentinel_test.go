package client_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// TestSentinelFailover takes tokens through Redis Sentinel, kills the
// primary under load, and checks that acquires work again on the promoted
// replica, which has the bucket because it was replicated before the kill.
func TestSentinelFailover(t *testing.T) {
	sentinel := testenv.StartSentinel(t)
	rdb := sentinel.Client(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{}

	buckets := []string{"search", "upload"}
	for i, name := range buckets {
		cfg := redisscript.Config{Name: name, ID: int64(i + 1), Version: 1, Capacity: 1_000_000,
			PermitsMicro: 1_000_000 * 1_000_000, PeriodSeconds: 1, Apps: []string{"gateway"}}
		if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
			t.Fatalf("apply %s: %v", name, err)
		}
	}
	// The definitions must reach the replica before the primary dies: a
	// promoted replica without them would answer "unknown bucket".
	if n, err := rdb.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT for the replica: %d replicas, %v", n, err)
	}

	// FailClosed, so that an answer of the policy is never mistaken for
	// one of Redis; a generous timeout, so that a slow CI machine does not
	// look like an outage.
	lim, err := client.New(rdb, "gateway", client.WithFailurePolicy(client.FailClosed),
		client.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	// A second Limiter with the default policy, FailLocal, takes tokens
	// alongside: a service using it must not see a single error during the
	// failover, only answers of its local buckets while Redis is away.
	local, err := client.New(rdb, "gateway", client.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	for _, name := range buckets {
		if _, err := local.Acquire(ctx, name, 1); err != nil {
			t.Fatalf("acquire %s before the failover: %v", name, err)
		}
	}

	// served counts acquires answered by Redis (not by the failure policy),
	// lastErr keeps the latest failure for the message of a failed test.
	var (
		served, failed atomic.Int64
		mu             sync.Mutex
		lastErr        string
		stop           atomic.Bool
		wg             sync.WaitGroup

		localCalls, localFallbacks, localErrs atomic.Int64
		localErr                              atomic.Pointer[error]
	)
	for g := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				res, err := local.Acquire(ctx, buckets[(g+i)%len(buckets)], 1)
				localCalls.Add(1)
				if err != nil {
					localErrs.Add(1)
					localErr.Store(&err)
				}
				if res.Fallback {
					localFallbacks.Add(1)
					time.Sleep(time.Millisecond) // a fallback answer is fast; do not spin
				}
			}
		})
	}
	for g := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				res, err := lim.Acquire(ctx, buckets[(g+i)%len(buckets)], 1)
				if err == nil && !res.Fallback && res.Allowed {
					served.Add(1)
					continue
				}
				failed.Add(1)
				mu.Lock()
				lastErr = fmt.Sprintf("allowed=%v fallback=%v err=%v", res.Allowed, res.Fallback, err)
				mu.Unlock()
				time.Sleep(time.Millisecond) // a failing call is fast; do not spin
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()

	waitServed := func(what string, d time.Duration) {
		t.Helper()
		start := time.Now()
		from := served.Load()
		for served.Load() < from+100 {
			if time.Since(start) > d {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: no acquire served by Redis for %v (%d failed; last: %s)", what, d, failed.Load(), lastErr)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitServed("through sentinel", 5*time.Second)

	old := sentinel.Primary
	failedBefore := failed.Load()
	killed := time.Now()
	promoted := sentinel.KillPrimary()
	t.Logf("sentinels promoted %s %v after %s was killed", promoted.Addr, time.Since(killed).Round(time.Millisecond), old.Addr)
	waitServed("after failover", 10*time.Second)
	t.Logf("acquires served again %v after the kill (%d failed meanwhile)", time.Since(killed).Round(time.Millisecond), failed.Load()-failedBefore)

	// Steady again, once the FailLocal Limiter's probe has had the 1 s the
	// brief allows to notice: half a second on the new primary with no
	// failure and no local answer.
	time.Sleep(time.Second)
	f0, s0, lf0 := failed.Load(), served.Load(), localFallbacks.Load()
	time.Sleep(500 * time.Millisecond)
	if f, s := failed.Load()-f0, served.Load()-s0; f > 0 || s == 0 {
		mu.Lock()
		t.Errorf("on the new primary: %d served, %d failed in 500 ms; last failure: %s", s, f, lastErr)
		mu.Unlock()
	}
	if lf := localFallbacks.Load() - lf0; lf > 0 {
		t.Errorf("FailLocal Limiter still answered %d calls locally 1 s after Redis was back", lf)
	}
	if n := localErrs.Load(); n > 0 {
		t.Errorf("FailLocal: %d of %d acquires failed during the failover; last: %v", n, localCalls.Load(), *localErr.Load())
	}
	t.Logf("FailLocal: %d acquires, %d answered locally during the failover", localCalls.Load(), localFallbacks.Load())

	direct := redis.NewClient(&redis.Options{Addr: promoted.Addr})
	defer direct.Close()
	for _, name := range buckets {
		if n, err := direct.Exists(ctx, ks.Bucket(name)).Result(); err != nil || n != 1 {
			t.Errorf("bucket %s on the new primary %s: EXISTS = %d, %v", name, promoted.Addr, n, err)
		}
	}
}
