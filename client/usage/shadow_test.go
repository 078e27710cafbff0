package usage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// Calls the failure policy answered while Redis was down count apart:
// refusals in "<app>:r" (a bucket in shadow mode included, which never
// denies), grants in "<app>:f", never as Redis's allowed or denied. A
// flush that could not reach Redis keeps them, and the first flush that
// reaches it again writes them, once. Buckets no decision of Redis was
// counted for are left out.
func TestFallbackCounted(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	ks := redisscript.Keyspace{Prefix: "fb:"}
	ctx := context.Background()
	cfg := redisscript.Config{Name: "trial", ID: 1, Version: 1, Capacity: 2, PermitsMicro: 1, PeriodSeconds: 3600,
		Apps: []string{"web"}, Shadow: true}
	if out, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("apply: %v %v", out, err)
	}
	rec, err := usage.NewRecorder(rdb, "web", usage.WithKeyPrefix(ks.Prefix), usage.WithFlushInterval(time.Hour),
		usage.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	limiter := func(p client.FailurePolicy) *client.Limiter {
		l, err := client.New(rdb, "web", client.WithKeyPrefix(ks.Prefix), client.WithObserver(rec.Observe),
			client.WithFailurePolicy(p), client.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	closed, open := limiter(client.FailClosed), limiter(client.FailOpen)
	if res, err := closed.Acquire(ctx, "trial", 1); err != nil || !res.Allowed || res.Fallback {
		t.Fatalf("acquire with Redis up: %+v %v", res, err)
	}

	srv.Stop()
	for range 3 {
		if res, err := closed.Acquire(ctx, "trial", 1); !errors.Is(err, client.ErrUnavailable) || !res.Fallback {
			t.Fatalf("fail closed while Redis is down: %+v %v", res, err)
		}
	}
	for range 2 {
		if res, err := open.Acquire(ctx, "trial", 1); err != nil || !res.Allowed || !res.Fallback {
			t.Fatalf("fail open while Redis is down: %+v %v", res, err)
		}
	}
	if _, err := closed.Acquire(ctx, "ghost", 1); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("unknown bucket while Redis is down: %v", err)
	}
	if err := rec.Flush(ctx); err == nil {
		t.Fatal("a flush to a stopped Redis succeeded")
	}
	srv.Start() // empty: no persistence
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Redis's own decision was in the failed flush: dropped, as ever.
	want := map[string]int64{redisscript.UsageFallbackRefusedField("web"): 3, redisscript.UsageFallbackAllowedField("web"): 2}
	for _, kind := range []string{"m", "h"} {
		got := sums(t, rdb, fmt.Sprintf("%s{trial}:usage:%s:*", ks.Prefix, kind))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s hashes: got %v, want %v", kind, got, want)
		}
	}
	if got := sums(t, rdb, ks.Prefix+"{ghost}:*"); len(got) != 0 {
		t.Errorf("an unknown bucket's fallback answers were counted: %v", got)
	}
	// Written once: a second flush adds nothing.
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sums(t, rdb, fmt.Sprintf("%s{trial}:usage:m:*", ks.Prefix)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a second flush: got %v, want %v", got, want)
	}
}
