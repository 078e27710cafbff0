package usage_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
	readusage "github.com/sluicehq/sluice/internal/usage"
)

// TestKindsCounted: slot takes of concurrency limits and acquires of a
// quota on real Redis count as decisions of their limit: allowed, denied,
// near the limit from 80% of the slots in use or of the quota used this
// period, keyed takes in the top keys, and takes the failure policy
// answered apart, as for a token bucket.
func TestKindsCounted(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	ks := redisscript.Keyspace{Prefix: "kinds:"}
	ctx := context.Background()
	slot := func(name string, capacity int64) redisscript.Config {
		return redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: capacity, Apps: []string{"web"},
			Kind: redisscript.KindConcurrency, SlotMillis: 600_000}
	}
	if _, err := redisscript.Apply(ctx, rdb, ks, slot("jobs", 5), false); err != nil {
		t.Fatal(err)
	}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, slot("per-user", 2), false); err != nil {
		t.Fatal(err)
	}
	q := redisscript.Config{Name: "daily", ID: 1, Version: 1, Capacity: 10, Apps: []string{"web"},
		Kind: redisscript.KindQuota, Bounds: quota.Table(quota.Day, time.UTC, time.Now())}
	if _, err := redisscript.Apply(ctx, rdb, ks, q, false); err != nil {
		t.Fatal(err)
	}
	rec, err := usage.NewRecorder(rdb, "web", usage.WithKeyPrefix(ks.Prefix), usage.WithFlushInterval(time.Hour),
		usage.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	var seen []client.Decision
	lim, err := client.New(rdb, "web", client.WithKeyPrefix(ks.Prefix), client.WithTimeout(5*time.Second),
		client.WithFailurePolicy(client.FailOpen), client.WithLogger(nil),
		client.WithObserver(func(d client.Decision) { seen = append(seen, d); rec.Observe(d) }))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()

	for i := 1; i <= 6; i++ { // 1 to 5 of 5 in use, then a denial
		if s, err := lim.TakeSlot(ctx, "jobs"); err != nil || s.Allowed != (i <= 5) {
			t.Fatalf("take %d: %+v %v", i, s.SlotResult, err)
		}
	}
	for i := 1; i <= 3; i++ { // 1 and 2 of 2 in use, then a denial
		if s, err := lim.TakeSlotKey(ctx, "per-user", "u1"); err != nil || s.Allowed != (i <= 2) {
			t.Fatalf("keyed take %d: %+v %v", i, s.SlotResult, err)
		}
	}
	if _, err := lim.TakeSlotKey(ctx, "per-user", ""); !errors.Is(err, client.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	for i := 1; i <= 9; i++ { // 1 to 9 of 10 used
		if res, err := lim.Acquire(ctx, "daily", 1); err != nil || !res.Allowed || math.Abs(res.Used()-float64(i)/10) > 1e-9 {
			t.Fatalf("quota acquire %d: %+v (used %v) %v", i, res, res.Used(), err)
		}
	}
	if res, err := lim.Acquire(ctx, "daily", 2); err != nil || res.Allowed {
		t.Fatalf("quota over: %+v %v", res, err)
	}

	// What the observer saw of the takes.
	d := seen[4]
	if !d.Slot || d.Bucket != "jobs" || d.N != 1 || !d.Result.Allowed || d.Result.Limit != 5 || d.Result.Remaining != 0 ||
		d.Result.Used() != 1 || d.Latency <= 0 {
		t.Errorf("fifth take observed as %+v", d)
	}
	if d := seen[5]; !d.Slot || d.Result.Allowed || d.Result.RetryAfter <= 0 {
		t.Errorf("denied take observed as %+v", d)
	}
	if d := seen[8]; !d.Slot || d.Key != "u1" || d.Result.Allowed {
		t.Errorf("denied keyed take observed as %+v", d)
	}
	if d := seen[9]; !d.Slot || !errors.Is(d.Err, client.ErrInvalidKey) {
		t.Errorf("invalid key observed as %+v", d)
	}
	if d := seen[10]; d.Slot {
		t.Errorf("a quota acquire observed as a slot take: %+v", d)
	}

	// Redis gone: FailOpen grants takes, counted as the policy's.
	srv.Stop()
	for range 2 {
		if s, err := lim.TakeSlot(ctx, "jobs"); err != nil || !s.Allowed || !s.Fallback {
			t.Fatalf("take while Redis is down: %+v %v", s.SlotResult, err)
		}
	}
	if d := seen[len(seen)-1]; !d.Slot || !d.Result.Fallback || !d.Result.Allowed {
		t.Errorf("fallback take observed as %+v", d)
	}
	srv.Start() // empty: no persistence
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	want := map[string]map[string]int64{
		"jobs":     {"web:a": 5, "web:d": 1, "web:n": 3, "web:f": 2}, // near: 4 and 5 of 5, the denial
		"per-user": {"web:a": 2, "web:d": 1, "web:n": 2},             // near: 2 of 2, the denial
		"daily":    {"web:a": 9, "web:d": 1, "web:n": 3},             // near: 8 and 9 of 10, the denial
	}
	for bucket, w := range want {
		for _, kind := range []string{"m", "h"} {
			got := sums(t, rdb, fmt.Sprintf("%s{%s}:usage:%s:*", ks.Prefix, bucket, kind))
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s, %s hashes: got %v, want %v", bucket, kind, got, w)
			}
		}
	}
	top, err := readusage.NewReader(rdb, ks).TopKeys(ctx, "per-user", readusage.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(top.Taken, top.Denied) != "[{u1 2}] [{u1 1}]" {
		t.Errorf("top keys: taken %v, denied %v", top.Taken, top.Denied)
	}
}
