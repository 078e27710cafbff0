package client_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// defineLeased creates bucket name in lease mode with lease time leaseMillis.
func (e env) defineLeased(t testing.TB, name string, capacity, permitsMicro, period, leaseMillis int64, apps ...string) {
	t.Helper()
	ctx := context.Background()
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := redisscript.Config{Name: name, ID: st.Config.ID + 1, Version: 1, Capacity: capacity,
		PermitsMicro: permitsMicro, PeriodSeconds: period, Apps: apps, LeaseMillis: leaseMillis}
	if out, err := redisscript.Apply(ctx, e.rdb, e.ks(), cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("define %s: %v %v", name, out, err)
	}
}

// scriptCalls counts the scripts redis-server ran (EVALSHA, EVAL and
// FCALL).
func scriptCalls(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") &&
			!strings.HasPrefix(line, "cmdstat_fcall:") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		v, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		total += v
	}
	return total
}

// A bucket in lease mode is answered in-process: many acquires, few scripts.
func TestLeaseAnswersInProcess(t *testing.T) {
	t.Parallel()
	e, _ := privateRedis(t)
	// One token a day: nothing refills while the test runs.
	e.defineLeased(t, "hot", 1_000_000, 1, 86400, 1000, "svc")
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second), quiet())
	ctx := context.Background()
	before := scriptCalls(t, e.rdb)
	for i := range 10_000 {
		res, err := l.Acquire(ctx, "hot", 1)
		if err != nil || !res.Allowed || res.Fallback {
			t.Fatalf("acquire %d: %+v %v", i, res, err)
		}
	}
	if calls := scriptCalls(t, e.rdb) - before; calls > 1000 {
		t.Fatalf("%d scripts for 10000 acquires: leases are not used", calls)
	}
	// Unused tokens go back when the Limiter closes.
	l.Close()
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), "hot")
	if err != nil {
		t.Fatal(err)
	}
	if st.Stored != 1_000_000-10_000 {
		t.Fatalf("bucket holds %v after 10000 tokens were used and the rest given back", st.Stored)
	}
}

// leaseRun has processes (Limiters with their own connections) take tokens
// from one hot bucket in lease mode for d, and returns what they admitted
// and the bound capacity + rate x T, T measured on Redis's clock from just
// before the first acquire to just after the last one.
func leaseRun(t *testing.T, e env, procs, callers int, d time.Duration, capacity, rate int64) (admitted []int64, bound float64) {
	return leaseRunPaced(t, e, make([]float64, procs), callers, d, capacity, rate, 0)
}

// leaseRunPaced is leaseRun with a demand per process: demand[p] acquires
// per second spread over its callers (0: as fast as they can). Process
// p >= 1 starts late after the first.
func leaseRunPaced(t *testing.T, e env, demand []float64, callers int, d time.Duration, capacity, rate int64,
	late time.Duration) (admitted []int64, bound float64) {
	procs := len(demand)
	t.Helper()
	e.defineLeased(t, "shared", capacity, rate*1_000_000, 1, 100, "svc")
	ctx := context.Background()
	addr := e.rdb.(*redis.Client).Options().Addr
	lims := make([]*client.Limiter, procs)
	for i := range lims {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		l, err := client.New(rdb, "svc", client.WithKeyPrefix(e.prefix), client.WithFailurePolicy(client.FailClosed),
			client.WithTimeout(5*time.Second), quiet())
		if err != nil {
			t.Fatal(err)
		}
		lims[i] = l
	}
	admitted = make([]int64, procs)
	var stop atomic.Bool
	var wg sync.WaitGroup
	t0, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for p, l := range lims {
		for range callers {
			wg.Go(func() {
				if p > 0 && late > 0 {
					time.Sleep(late)
				}
				var n, calls int64
				began := time.Now()
				for !stop.Load() {
					if res, err := l.Acquire(ctx, "shared", 1); err == nil && res.Allowed {
						n++
					}
					calls++
					if demand[p] > 0 {
						// Pace: the calls so far are due at calls / (demand / callers).
						due := began.Add(time.Duration(float64(calls) / (demand[p] / float64(callers)) * 1e9))
						if w := time.Until(due); w > 0 {
							time.Sleep(w)
						}
					}
				}
				atomic.AddInt64(&admitted[p], n)
			})
		}
	}
	time.Sleep(d - time.Since(start))
	stop.Store(true)
	wg.Wait()
	t1, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lims {
		l.Close()
	}
	return admitted, float64(capacity) + float64(rate)*t1.Sub(t0).Seconds()
}

// TestLeaseBound: 4 processes on one hot bucket in lease mode admit at
// most capacity + rate x T, and at least 97% of it. The soak suite
// (SLUICE_SOAK=1) runs it for 10 s and holds the 97% floor; the normal
// suite runs 2 s and checks only the bound, which no stalled scheduler
// can break (a stall can only make the callers ask for less).
func TestLeaseBound(t *testing.T) {
	t.Parallel()
	d := 2 * time.Second
	if os.Getenv("SLUICE_SOAK") != "" {
		d = 10 * time.Second
	}
	e, _ := privateRedis(t)
	// A capacity of one second's refill absorbs a stalled scheduler: the
	// refill of a pause goes to waste only when it is longer than that.
	admitted, bound := leaseRun(t, e, 4, 4, d, 1000, 1000)
	var total int64
	for _, n := range admitted {
		total += n
	}
	t.Logf("admitted %d (%v per process) of bound %.0f: %.2f%%", total, admitted, bound, 100*float64(total)/bound)
	if float64(total) > bound {
		t.Fatalf("admitted %d > capacity + rate x T = %.0f", total, bound)
	}
	if soak() && float64(total) < 0.97*bound {
		t.Fatalf("admitted %d < 97%% of capacity + rate x T = %.0f", total, bound)
	}
}

// BenchmarkLeaseAcquire measures Acquire on a hot bucket in lease mode
// (every call granted from the lease) with GOMAXPROCS goroutines; ns/op is
// the time per decision of the whole process.
func BenchmarkLeaseAcquire(b *testing.B) {
	e, _ := privateRedis(b)
	e.defineLeased(b, "hot", 1_000_000_000, 1_000_000_000*1_000_000, 1, 100, "svc")
	l := e.limiter(b, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second), quiet())
	ctx := context.Background()
	if _, err := l.Acquire(ctx, "hot", 1); err != nil {
		b.Fatal(err)
	}
	// Every 16th call of each goroutine is timed, for the p50 and p99.
	var mu sync.Mutex
	var lat []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := make([]time.Duration, 0, 1<<16)
		for i := 0; pb.Next(); i++ {
			var t0 time.Time
			if i%16 == 0 && len(mine) < cap(mine) {
				t0 = time.Now()
			}
			res, err := l.Acquire(ctx, "hot", 1)
			if !t0.IsZero() {
				mine = append(mine, time.Since(t0))
			}
			if err != nil || !res.Allowed {
				b.Errorf("acquire: %+v %v", res, err)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
	}
}

// TestLeaseFairness: on a bucket that cannot serve everyone, processes
// get tokens in proportion to their demand, and one that starts late
// gets its share as well.
//
// Its shares depend on how evenly paced callers are scheduled, which a
// loaded machine cannot promise: it runs in the soak suite (SLUICE_SOAK=1).
func TestLeaseFairness(t *testing.T) {
	if !soak() {
		t.Skip("soak suite only (SLUICE_SOAK=1): shares depend on the scheduler")
	}
	t.Parallel()
	e, _ := privateRedis(t)
	// Demands of 1,500 and 4,500 acquires a second on a rate of 1,000.
	admitted, bound := leaseRunPaced(t, e, []float64{1500, 4500}, 4, 3*time.Second, 100, 1000, 0)
	t.Logf("admitted %v of bound %.0f", admitted, bound)
	// Wide enough for a loaded machine, where sleeping callers ask less
	// evenly; an equal split (1) or winner takes all would fail it.
	ratio := float64(admitted[1]) / float64(max(admitted[0], 1))
	if ratio < 1.5 || ratio > 6 {
		t.Errorf("demands 1:3 got %v (ratio %.2f), want about 1:3", admitted, ratio)
	}
	// Equal demand, the second process starting 1 s late: over the 2 s it
	// runs it must get a fair part of what is handed out then.
	e2, _ := privateRedis(t)
	admitted, _ = leaseRunPaced(t, e2, []float64{0, 0}, 4, 3*time.Second, 100, 1000, time.Second)
	t.Logf("late starter: admitted %v", admitted)
	if float64(admitted[1]) < 0.25*float64(admitted[0]) {
		t.Errorf("late starter got %d against %d: starved", admitted[1], admitted[0])
	}
}
