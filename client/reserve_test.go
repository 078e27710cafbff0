package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// defineReserved creates bucket name for apps: capacity tokens of which
// reserve are kept for critical requests, refilled one an hour (nothing
// comes back while a test runs), in lease mode when leaseMillis is not 0.
func (e env) defineReserved(t testing.TB, name string, capacity, reserve, leaseMillis int64, apps ...string) {
	t.Helper()
	cfg := redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: capacity, PermitsMicro: 1_000_000,
		PeriodSeconds: 3600, Apps: apps, Reserve: reserve, LeaseMillis: leaseMillis}
	if out, err := redisscript.Apply(context.Background(), e.rdb, e.ks(), cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("define %s: %v %v", name, out, err)
	}
}

func TestCriticalContext(t *testing.T) {
	ctx := context.Background()
	if client.IsCritical(ctx) {
		t.Fatal("a plain context is critical")
	}
	c := client.Critical(ctx)
	if !client.IsCritical(c) || client.Critical(c) != c {
		t.Fatal("Critical marks once")
	}
	child, cancel := context.WithCancel(c)
	defer cancel()
	if !client.IsCritical(child) {
		t.Fatal("the mark is inherited")
	}
}

// TestReserveAcquire: requests not marked critical leave the reserve, and
// are answered with what they could take; critical ones take it, also
// right after a denial the denial cache keeps.
func TestReserveAcquire(t *testing.T) {
	e := sharedRedis(t)
	e.defineReserved(t, "pay", 5, 2, 0, "svc")
	l := e.limiter(t, "svc")
	ctx := context.Background()
	res, err := l.Acquire(ctx, "pay", 3)
	if err != nil || !res.Allowed || res.Remaining != 0 || res.Limit != 5 {
		t.Fatalf("3 of 5, 2 kept: %+v %v", res, err)
	}
	for i := range 2 {
		if res, err := l.Acquire(ctx, "pay", 1); err != nil || res.Allowed || res.RetryAfter <= 0 {
			t.Fatalf("not critical, %d: %+v %v", i, res, err)
		}
	}
	if _, err := l.Acquire(ctx, "pay", 4); err != client.ErrExceedsCapacity {
		t.Fatalf("4 not critical, above capacity - reserve: %v", err)
	}
	crit := client.Critical(ctx)
	if res, err := l.Acquire(crit, "pay", 1); err != nil || !res.Allowed || res.Remaining != 1 {
		t.Fatalf("critical after cached denials: %+v %v", res, err)
	}
	if res, err := l.Acquire(crit, "pay", 1); err != nil || !res.Allowed || res.Remaining != 0 {
		t.Fatalf("the last critical: %+v %v", res, err)
	}
	if res, err := l.Acquire(crit, "pay", 1); err != nil || res.Allowed {
		t.Fatalf("an empty bucket: %+v %v", res, err)
	}
	if l.Stats().CachedDenials == 0 {
		t.Error("the denial cache answered nothing")
	}
}

// TestReserveAcquireAll: a set marked critical takes the reserves; one not
// marked leaves them, all or nothing.
func TestReserveAcquireAll(t *testing.T) {
	e := sharedRedis(t)
	e.defineReserved(t, "a", 4, 2, 0, "svc")
	e.defineReserved(t, "b", 4, 0, 0, "svc")
	l := e.limiter(t, "svc")
	ctx := context.Background()
	set := []client.Request{{Bucket: "a", N: 2}, {Bucket: "b", N: 2}}
	if res, err := l.AcquireAll(ctx, set); err != nil || !res.Allowed {
		t.Fatalf("first set: %+v %v", res, err)
	}
	if res, err := l.AcquireAll(ctx, set); err != nil || res.Allowed || res.Each[1].RetryAfter != 0 {
		t.Fatalf("second set, not critical: %+v %v", res, err)
	}
	if res, err := l.AcquireAll(client.Critical(ctx), set); err != nil || !res.Allowed {
		t.Fatalf("second set, critical: %+v %v", res, err)
	}
}

// TestReserveKeyedConcurrent: many goroutines take keys of a keyed bucket
// at once, half of them critical, so that the client merges critical and
// other acquires into one call of the keyed script: per key, those not
// critical never take more than capacity - reserve, the critical ones get
// at least the reserve, and together exactly the capacity.
func TestReserveKeyedConcurrent(t *testing.T) {
	e := sharedRedis(t)
	cfg := redisscript.Config{Name: "per-user", ID: 1, Version: 1, Capacity: 4, PermitsMicro: 1_000_000,
		PeriodSeconds: 3600, Apps: []string{"svc"}, Reserve: 2}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks(), cfg, false); err != nil {
		t.Fatal(err)
	}
	l := e.limiter(t, "svc")
	const keys, calls = 20, 4
	var plain, crit [keys]atomic.Int64
	var wg sync.WaitGroup
	for k := range keys {
		for c := range 2 * calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, count := context.Background(), &plain[k]
				if c%2 == 1 {
					ctx, count = client.Critical(ctx), &crit[k]
				}
				res, err := l.AcquireKey(ctx, "per-user", "user-"+strconv.Itoa(k), 1)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					count.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	for k := range keys {
		p, c := plain[k].Load(), crit[k].Load()
		if p > 2 || c < 2 || p+c != 4 {
			t.Errorf("key %d: %d granted not critical, %d critical; want at most 2, at least 2, 4 in all", k, p, c)
		}
	}
}

// TestReserveLeaseMode: leases never hold the reserve; a critical call
// finding the lease dry takes the reserve from Redis.
func TestReserveLeaseMode(t *testing.T) {
	e := sharedRedis(t)
	e.defineReserved(t, "leased", 10, 4, 1000, "svc")
	l := e.limiter(t, "svc")
	ctx := context.Background()
	granted := 0
	for range 50 {
		res, err := l.Acquire(ctx, "leased", 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			granted++
		}
	}
	if granted > 6 {
		t.Fatalf("%d granted not critical, at most 6 (10 less the reserve of 4)", granted)
	}
	crit := 0
	for range 10 {
		if res, err := l.Acquire(client.Critical(ctx), "leased", 1); err == nil && res.Allowed {
			crit++
		}
	}
	if granted+crit != 10 || crit < 4 {
		t.Fatalf("%d not critical and %d critical granted, want 10 in all and the reserve to critical ones", granted, crit)
	}
}

func TestCriticalWhenMiddleware(t *testing.T) {
	e := sharedRedis(t)
	e.defineReserved(t, "api", 3, 2, 0, "web")
	l := e.limiter(t, "web")
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	h := client.CriticalWhen(func(r *http.Request) bool { return r.URL.Path == "/pay" })(
		client.Middleware(l, func(*http.Request) string { return "api" })(ok))
	for i, s := range []struct {
		path string
		want int
	}{{"/browse", 200}, {"/browse", 429}, {"/pay", 200}, {"/pay", 200}, {"/pay", 429}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, s.path, nil))
		if rec.Code != s.want {
			t.Fatalf("request %d, %s: %d, want %d", i+1, s.path, rec.Code, s.want)
		}
	}
}

// TestReserveUnderFlood is the reserve's acceptance test on a real Redis:
// four processes (Limiters) of 25 goroutines each flood a bucket with
// requests not marked critical while a fifth takes the reserve in
// critical rounds. Each round starts once the reserve is whole again (read
// from Redis) and asks for all of it, one token at a time: every critical
// request of every round is granted, however the flood and the scheduler
// interleave, since the flood never takes a bucket below its reserve.
// Counted against Redis's clock over the whole run (T): the flood got at
// most capacity - reserve + rate x T, both classes together at most
// capacity + rate x T. Nothing is timed: a slow machine only makes T
// longer.
func TestReserveUnderFlood(t *testing.T) {
	e := sharedRedis(t)
	const (
		capacity, reserve = 50, 10
		rate              = 200.0 // tokens a second
		rounds            = 10
	)
	cfg := redisscript.Config{Name: "flooded", ID: 1, Version: 1, Capacity: capacity, PermitsMicro: 200_000_000,
		PeriodSeconds: 1, Apps: []string{"svc"}, Reserve: reserve}
	ctx := context.Background()
	if _, err := redisscript.Apply(ctx, e.rdb, e.ks(), cfg, false); err != nil {
		t.Fatal(err)
	}
	redisNow := func() time.Time {
		now, err := e.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	start := redisNow()

	var flood atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		l := e.limiter(t, "svc")
		for range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					res, err := l.Acquire(ctx, "flooded", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						flood.Add(1)
					} else if res.Fallback {
						t.Errorf("the failure policy answered: %+v", res)
						return
					}
				}
			}()
		}
	}

	crit := e.limiter(t, "svc")
	critical := int64(0)
	for r := range rounds {
		// Wait, without a clock, until the reserve is whole: the flood
		// keeps the bucket just above it, and refill brings it back.
		for {
			st, err := redisscript.Read(ctx, e.rdb, e.ks(), "flooded")
			if err != nil {
				t.Fatal(err)
			}
			if st.Tokens >= reserve {
				break
			}
			if t.Failed() {
				break
			}
			time.Sleep(time.Millisecond)
		}
		for i := range reserve {
			res, err := crit.Acquire(client.Critical(ctx), "flooded", 1)
			if err != nil || !res.Allowed {
				t.Fatalf("round %d, critical request %d: %+v %v", r+1, i+1, res, err)
			}
			critical++
		}
	}
	stop.Store(true)
	wg.Wait()
	elapsed := redisNow().Sub(start).Seconds()
	f := flood.Load()
	t.Logf("T %.2f s on Redis's clock: %d critical (the reserve %d times), %d not critical", elapsed, critical, rounds, f)
	if f == 0 {
		t.Fatal("the flood got nothing: it did not run against the bucket")
	}
	if bound := float64(capacity-reserve) + rate*elapsed; float64(f) > bound {
		t.Errorf("not critical: %d granted, more than capacity - reserve + rate x T = %.1f", f, bound)
	}
	if bound := float64(capacity) + rate*elapsed; float64(f+critical) > bound {
		t.Errorf("in all: %d granted, more than capacity + rate x T = %.1f", f+critical, bound)
	}
}

// TestCriticalWaitNotBehindOthers: a critical Wait is not queued behind a
// waiter that must leave the reserve, which the reserve holds back.
func TestCriticalWaitNotBehindOthers(t *testing.T) {
	e := sharedRedis(t)
	e.defineReserved(t, "queue", 3, 2, 0, "svc")
	// The observer tells when the waiter not marked critical has been
	// denied: it holds the queue's turn from then on.
	denied := make(chan struct{}, 1)
	l := e.limiter(t, "svc", client.WithObserver(func(d client.Decision) {
		if d.Err == nil && !d.Result.Allowed {
			select {
			case denied <- struct{}{}:
			default:
			}
		}
	}))
	ctx := context.Background()
	if res, err := l.Acquire(ctx, "queue", 1); err != nil || !res.Allowed {
		t.Fatalf("the one token above the reserve: %+v %v", res, err)
	}
	// A waiter not marked critical: its token comes in an hour.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiting := make(chan error, 1)
	go func() { waiting <- l.Wait(wctx, "queue", 1) }()
	<-denied
	// The critical waiter gets the reserve at once. The generous deadline
	// only keeps a regression (queued behind the other) from hanging.
	cctx, ccancel := context.WithTimeout(client.Critical(ctx), time.Minute)
	defer ccancel()
	for i := range 2 {
		if err := l.Wait(cctx, "queue", 1); err != nil {
			t.Fatalf("critical wait %d: %v", i+1, err)
		}
	}
	cancel()
	if err := <-waiting; err == nil {
		t.Fatal("the waiter not marked critical was granted the reserve")
	}
}
