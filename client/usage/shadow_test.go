package usage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// Acquires that leave the bucket at least 80% used, and denials, count
// as near the limit in "<app>:n"; the others do not.
func TestNearLimitCounted(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	cfg := redisscript.Config{Name: "tight", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1, PeriodSeconds: 3600,
		Apps: []string{"web"}}
	if out, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("apply: %v %v", out, err)
	}
	rec, err := usage.NewRecorder(rdb, "web", usage.WithKeyPrefix(prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	lim, err := client.New(rdb, "web", client.WithKeyPrefix(prefix), client.WithObserver(rec.Observe),
		client.WithFailurePolicy(client.FailClosed), client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	// The refill (1 token an hour) cannot add a token during the test.
	for i := range 12 {
		res, err := lim.Acquire(ctx, "tight", 1)
		if err != nil || res.Allowed != (i < 10) {
			t.Fatalf("acquire %d: %+v %v", i+1, res, err)
		}
	}
	// n over the capacity is the caller's error, not traffic near the limit.
	if _, err := lim.Acquire(ctx, "tight", 11); err == nil {
		t.Fatal("acquire of 11 from a bucket of 10 succeeded")
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Acquires 8, 9 and 10 leave 80%, 90% and 100% used; 11 and 12 are
	// denied.
	want := map[string]int64{redisscript.UsageAllowedField("web"): 10, redisscript.UsageDeniedField("web"): 3,
		redisscript.UsageNearLimitField("web"): 5}
	got := sums(t, rdb, fmt.Sprintf("%s{tight}:usage:m:*", prefix))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("minute hashes: got %v, want %v", got, want)
	}
}

// Would-denies of a bucket in shadow mode count as allowed and, apart, in
// "<app>:w", in the minute and the hour hashes.
func TestWouldDenyCounted(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	cfg := redisscript.Config{Name: "trial", ID: 1, Version: 1, Capacity: 2, PermitsMicro: 1, PeriodSeconds: 3600,
		Apps: []string{"web"}, Shadow: true}
	if out, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("apply: %v %v", out, err)
	}
	rec, err := usage.NewRecorder(rdb, "web", usage.WithKeyPrefix(prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	lim, err := client.New(rdb, "web", client.WithKeyPrefix(prefix), client.WithObserver(rec.Observe),
		client.WithFailurePolicy(client.FailClosed), client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	would := 0
	for range 5 {
		res, err := lim.Acquire(ctx, "trial", 1)
		if err != nil || !res.Allowed {
			t.Fatalf("%+v %v", res, err)
		}
		if res.WouldDeny {
			would++
		}
	}
	if would != 3 {
		t.Fatalf("%d would-denies of 5 on a bucket of 2, want 3", would)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Near the limit: the second acquire (the bucket then empty) and the
	// three would-denies.
	want := map[string]int64{redisscript.UsageAllowedField("web"): 5, redisscript.UsageWouldDenyField("web"): 3,
		redisscript.UsageNearLimitField("web"): 4}
	for _, kind := range []string{"m", "h"} {
		got := sums(t, rdb, fmt.Sprintf("%s{trial}:usage:%s:*", prefix, kind))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s hashes: got %v, want %v", kind, got, want)
		}
	}
}
