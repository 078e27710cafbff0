package client_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// TestKeyedCluster is BRIEF Q15: one keyed bucket driven with many keys on
// a 3-master Redis Cluster loads all three masters, every acquire is one
// script on one slot, and no key admits more than its bound.
func TestKeyedCluster(t *testing.T) {
	cluster := testenv.StartCluster(t, 3)
	rdb := cluster.Client(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{}
	cfg := redisscript.Config{Name: "per-user", ID: 1, Version: 1, Capacity: 5, PermitsMicro: 10 * 1_000_000,
		PeriodSeconds: 1, Apps: []string{"svc"}}
	start := time.Now()
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	if _, err := redisscript.ApplyOverride(ctx, rdb, ks, redisscript.Override{Bucket: "per-user", BucketID: 1, ID: 1,
		Version: 1, Match: redisscript.MatchPrefix, Key: "vip-", Capacity: 50, PermitsMicro: 1_000_000, PeriodSeconds: 1}, false); err != nil {
		t.Fatal(err)
	}
	lim, err := client.New(rdb, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	if res, err := lim.AcquireKey(ctx, "per-user", "vip-1", 50); err != nil || !res.Allowed {
		t.Fatalf("prefix override on the cluster: %+v %v", res, err)
	}

	calls := func() []int64 {
		out := make([]int64, len(cluster.Nodes))
		for i, n := range cluster.Nodes {
			c := redis.NewClient(&redis.Options{Addr: n.Addr})
			info, err := c.Info(ctx, "commandstats").Result()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(info, "\n") {
				if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
					out[i], _ = strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				}
			}
		}
		return out
	}
	before := calls()

	const keys = 3000
	admitted := make([]atomic.Int64, keys)
	var failed atomic.Int64
	var wg sync.WaitGroup
	const load = 2 * time.Second
	loadStart := time.Now()
	for g := range 12 {
		wg.Go(func() {
			for i := g * 250; time.Since(loadStart) < load; i++ {
				k := i % keys
				res, err := lim.AcquireKey(ctx, "per-user", "user-"+strconv.Itoa(k), 1)
				switch {
				case err != nil || res.Fallback:
					failed.Add(1)
					time.Sleep(time.Millisecond)
				case res.Allowed:
					admitted[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d keyed acquires failed on the cluster", n)
	}
	bound := 5 + 10*elapsed
	for k := range keys {
		if got := float64(admitted[k].Load()); got > bound {
			t.Errorf("key %d admitted %.0f, above %.1f", k, got, bound)
		}
	}
	after := calls()
	var total int64
	for i := range after {
		after[i] -= before[i]
		total += after[i]
	}
	for i, n := range cluster.Nodes {
		share := float64(after[i]) / float64(total)
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		size, _ := c.DBSize(ctx).Result()
		c.Close()
		t.Logf("master %s: %d keyed acquires (%.1f%%), %d keys", n.Addr, after[i], 100*share, size)
		// 64 groups over 3 masters: each carries about a third.
		if share < 0.15 {
			t.Errorf("master %s carried %.1f%% of the load", n.Addr, 100*share)
		}
	}
}
