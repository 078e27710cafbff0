package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// defineQuota creates quota name (a new id): q per period of table, for
// apps; keyed makes it a keyed quota.
func (e env) defineQuota(t testing.TB, name string, q int64, table []int64, keyed bool, apps ...string) {
	t.Helper()
	ctx := context.Background()
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := redisscript.Config{Name: name, ID: st.Config.ID + 1, Version: 1, Capacity: q,
		Apps: apps, Kind: redisscript.KindQuota, Bounds: table}
	var out redisscript.ApplyOutcome
	if keyed {
		out, err = redisscript.ApplyKeyed(ctx, e.rdb, e.ks(), cfg, false)
	} else {
		out, err = redisscript.Apply(ctx, e.rdb, e.ks(), cfg, false)
	}
	if err != nil || out != redisscript.Created {
		t.Fatalf("define quota %s: %v %v", name, out, err)
	}
}

func redisMicros(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	tm, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMicro()
}

// TestQuotaMonthEndsAcrossDSTOnRedisClock checks that a monthly quota in
// Europe/Berlin resets at the instant its month ends, on Redis's clock,
// for the months that hold a change of offset (October 2025: 31 days and
// an hour; March 2026: 31 days less an hour). Redis's clock cannot be
// moved, so the table the sync worker computes for the month is shifted
// whole, keeping every length, until the month's end is a moment ahead.
// Each call is bracketed by two readings of Redis's TIME: a call that
// ended before the end must count in the month (and its answer's period
// be the month's length), a call that started after it in the next; calls
// astride the instant are not judged. A plain and a keyed quota run side
// by side.
func TestQuotaMonthEndsAcrossDSTOnRedisClock(t *testing.T) {
	e := sharedRedis(t)
	berlin, err := quota.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		at            string
		month, follow int64 // the lengths of the month and the next, in seconds
	}{
		{"october-2025", "2025-10-15T12:00:00Z", 31*86400 + 3600, 30 * 86400},
		{"march-2026", "2026-03-15T12:00:00Z", 31*86400 - 3600, 30 * 86400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, _ := time.Parse(time.RFC3339, tc.at)
			table := quota.Table(quota.Month, berlin, at)
			if table[2]-table[1] != tc.month || table[3]-table[2] != tc.follow {
				t.Fatalf("Berlin's months from %s: %v", tc.at, table)
			}
			const q = 5
			l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed))
			for attempt := 0; ; attempt++ {
				if attempt == 5 {
					t.Fatal("the month ended before 5 calls could be made, 5 times over")
				}
				// The month ends 2 s from now on Redis's clock.
				end := redisMicros(t, e.rdb)/1_000_000 + 2
				shifted := make([]int64, len(table))
				for i, b := range table {
					shifted[i] = b + end - table[2]
				}
				name := fmt.Sprintf("month-%s-%d", tc.name, attempt)
				e.defineQuota(t, name, q, shifted, false, "svc")
				e.defineQuota(t, name+"-k", q, shifted, true, "svc")
				if monthEnd(t, e, l, name, q, end*1_000_000, tc.month, tc.follow) {
					return
				}
			}
		})
	}
}

// monthEnd runs calls on quota name and its keyed twin until a moment
// past end (µs, Redis's clock), checking each against it; false when the
// quota could not be used up before end, which leaves nothing to judge.
func monthEnd(t *testing.T, e env, l *client.Limiter, name string, q, end, month, follow int64) bool {
	t.Helper()
	ctx := context.Background()
	var before, after [2]int64 // grants wholly before and wholly after end
	var across [2]int64        // grants of calls that began before end and answered after it
	var done [2]bool           // the new month's quota is used up
	exhausted := false
	for i := 0; ; i++ {
		for k := range 2 {
			if done[k] {
				continue
			}
			t0 := redisMicros(t, e.rdb)
			if t0 > end+30_000_000 {
				t.Fatalf("30 s past the month's end and the new month's quota of %s is not used up: %d granted after, %d across (keyed %v)",
					name, after[k], across[k], k == 1)
			}
			var res client.Result
			var err error
			if k == 0 {
				res, err = l.Acquire(ctx, name, 1)
			} else {
				res, err = l.AcquireKey(ctx, name+"-k", "user-1", 1)
			}
			t1 := redisMicros(t, e.rdb)
			if err != nil || res.Fallback {
				t.Fatalf("call %d on %s (keyed %v): %+v %v", i, name, k == 1, res, err)
			}
			switch {
			case t0 < end && t1 >= end:
				// Counted in either month, depending on when Redis ran it.
				if res.Allowed {
					across[k]++
				}
			case t1 < end:
				if res.Allowed {
					before[k]++
				}
				if reset := res.ResetAfter.Microseconds(); reset < end-t1 || reset > end-t0 {
					t.Errorf("before the end: reset in %d µs, want %d..%d", reset, end-t1, end-t0)
				}
			case t0 >= end:
				if res.Allowed {
					after[k]++
				} else if after[k] > 0 {
					// Used up: by the calls after the end and perhaps some across it.
					if after[k]+across[k] < q {
						t.Errorf("denied after %d grants in the new month (%d across the end): quota %d (keyed %v)",
							after[k], across[k], q, k == 1)
					}
					done[k] = true
				}
				// The first call of the new month is granted: the count reset.
				if after[k] == 0 {
					t.Fatalf("the first call after the month's end was denied: %+v (keyed %v)", res, k == 1)
				}
				if reset := res.ResetAfter.Microseconds(); reset > end+follow*1_000_000-t0 || reset < end+follow*1_000_000-t1 {
					t.Errorf("after the end: reset in %d µs, want the next month's end", reset)
				}
			}
		}
		if before[0] == q && before[1] == q {
			exhausted = true
		}
		if !exhausted && redisMicros(t, e.rdb) >= end {
			return false
		}
		for k := range 2 {
			done[k] = done[k] || after[k] == q
		}
		if done[0] && done[1] {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for k := range 2 {
		if before[k] > q || after[k] > q || before[k]+after[k]+across[k] > 2*q {
			t.Errorf("keyed %v: %d granted in the month, %d after: more than the quota %d", k == 1, before[k], after[k], q)
		}
	}
	// The answer's period is the length of the month it counted in.
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), name)
	if err != nil || st.Used != q || st.PeriodEnd.Sub(st.PeriodStart) != time.Duration(follow)*time.Second {
		t.Errorf("read after the end: used %d, period %v..%v (%v)", st.Used, st.PeriodStart, st.PeriodEnd, err)
	}
	return true
}

// TestQuotaNeverAboveAcrossClientsAndRestarts runs 4 Limiters, each with
// its own connections, 25 callers each, on one quota of a Redis with an
// append-only file that syncs every write; the server is restarted twice
// during the run, by SIGTERM and by SIGKILL. Admitted calls (Redis's
// grants, never a policy's: the Limiters fail closed) never add up to
// more than the quota, and Redis's count, which survives the restarts,
// reaches it exactly.
func TestQuotaNeverAboveAcrossClientsAndRestarts(t *testing.T) {
	srv := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { admin.Close() })
	e := env{rdb: admin, prefix: "sluice:"}
	now := redisMicros(t, admin) / 1_000_000
	const q = 3000
	e.defineQuota(t, "api", q, []int64{now - 3600, now + 3600}, false, "svc")

	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for p := range 4 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		l, err := client.New(rdb, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(time.Second),
			client.WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		for g := range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					res, err := l.Acquire(context.Background(), "api", 1)
					switch {
					case err == nil && res.Allowed && !res.Fallback:
						admitted.Add(1)
					case err == nil && !res.Allowed:
						denied.Add(1)
						time.Sleep(time.Millisecond)
					case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrUnknownBucket):
						time.Sleep(5 * time.Millisecond) // restarting
					default:
						t.Errorf("process %d caller %d: %+v %v", p, g, res, err)
						return
					}
				}
			}()
		}
	}
	// Restart while the quota is being used, then let it run out.
	waitAdmitted := func(n int64) {
		if !eventually(time.Minute, func() bool { return admitted.Load() >= n }) {
			t.Fatalf("only %d admitted", admitted.Load())
		}
	}
	waitAdmitted(q / 3)
	srv.Stop()
	srv.Start()
	waitAdmitted(2 * q / 3)
	srv.Kill()
	srv.Start()
	if !eventually(time.Minute, func() bool { return denied.Load() > 1000 }) {
		t.Fatalf("the quota never ran out: %d admitted", admitted.Load())
	}
	close(stop)
	wg.Wait()
	st, err := redisscript.Read(context.Background(), admin, e.ks(), "api")
	if err != nil {
		t.Fatal(err)
	}
	// A call in flight when the server went down may have been counted
	// without its answer arriving (it is never sent again): such a call is
	// not admitted, so the callers may admit up to their number less at
	// each of the two restarts.
	if a := admitted.Load(); a > q || a < q-2*100 || st.Used != q {
		t.Errorf("admitted %d, Redis counted %d: want the quota, %d, counted, and at most that admitted", a, st.Used, q)
	}
}

// TestQuotaOutageAllowance stops Redis while 4 Limiters (WithInstances 4)
// use a quota, under each policy, and counts what each admits during the
// outage and after it: FailClosed admits nothing without Redis; FailLocal
// at most its share, quota/instances, in the period Redis last reported
// (so the 4 at most one quota more); FailOpen everything (unbounded).
// Redis keeps its count across the outage (append-only file): once it
// answers again it grants only what the quota has left.
func TestQuotaOutageAllowance(t *testing.T) {
	for _, tc := range []struct {
		policy client.FailurePolicy
		most   int64 // admitted by the 4 during the outage, at most
	}{
		{client.FailClosed, 0},
		{client.FailLocal, 4 * (100 / 4)},
		{client.FailOpen, 4 * 60},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			t.Parallel()
			srv := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { admin.Close() })
			e := env{rdb: admin, prefix: "sluice:"}
			now := redisMicros(t, admin) / 1_000_000
			const q = 100
			e.defineQuota(t, "api", q, []int64{now - 3600, now + 3600}, false, "svc")
			ctx := context.Background()
			var ls []*client.Limiter
			for range 4 {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
				t.Cleanup(func() { rdb.Close() })
				l, err := client.New(rdb, "svc", client.WithFailurePolicy(tc.policy), client.WithInstances(4),
					client.WithTimeout(200*time.Millisecond), client.WithLogger(nil))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				ls = append(ls, l)
			}
			// 40 granted by Redis, 10 per Limiter: each learns the period.
			for _, l := range ls {
				for range 10 {
					if res, err := l.Acquire(ctx, "api", 1); err != nil || !res.Allowed || res.Fallback {
						t.Fatalf("before the outage: %+v %v", res, err)
					}
				}
			}
			srv.Stop()
			var during int64
			for _, l := range ls {
				for range 60 {
					res, err := l.Acquire(ctx, "api", 1)
					if err == nil && res.Allowed {
						if !res.Fallback {
							t.Fatalf("granted without Redis yet not by the policy: %+v", res)
						}
						during++
					}
				}
			}
			if during > tc.most {
				t.Errorf("%s admitted %d during the outage, more than its allowance %d", tc.policy, during, tc.most)
			}
			if tc.policy == client.FailLocal && during != tc.most {
				t.Errorf("local admitted %d during the outage, want each Limiter's share, %d in all", during, tc.most)
			}
			srv.Start()
			var after int64
			for _, l := range ls {
				if !eventually(time.Minute, func() bool {
					res, err := l.Acquire(ctx, "api", 1)
					if err == nil && res.Allowed && !res.Fallback {
						after++
					}
					return err == nil && !res.Fallback && !res.Allowed
				}) {
					t.Fatal("Redis never answered a denial after the outage")
				}
			}
			if after != q-40 {
				t.Errorf("Redis granted %d after the outage, want what the quota had left, %d", after, q-40)
			}
		})
	}
}
