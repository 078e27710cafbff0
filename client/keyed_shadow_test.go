package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// outcome is what an observer (the metrics adapter among them) learns of a
// decision; clientmetrics maps the same fields to its result label.
func outcome(d client.Decision) string {
	switch {
	case d.Err != nil || d.Result.Fallback:
		return "other"
	case d.Result.Allowed && d.Result.WouldDeny:
		return "would_deny"
	case d.Result.Allowed:
		return "allowed"
	}
	return "denied"
}

// Shadow mode of keyed buckets and overrides: the keys of an override in
// shadow mode are allowed with WouldDeny where they would be denied, and
// the decision is counted as would_deny; other keys are enforced. The
// bucket in shadow mode covers every key.
func TestKeyedShadow(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	ctx := context.Background()
	e.defineKeyed(t, "api", 1, 1_000_000, 3600, "svc") // 1 per key, 1 per hour
	trial := redisscript.Override{Bucket: "api", BucketID: 1, ID: 1, Version: 1, Match: redisscript.MatchPrefix,
		Key: "trial:", Capacity: 2, PermitsMicro: 1_000_000, PeriodSeconds: 3600, Shadow: true}
	if _, err := redisscript.ApplyOverride(ctx, e.rdb, e.ks(), trial, false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	results := map[string][]string{}
	// Without the denial cache: it would answer the denied key below as
	// denied for up to its time after shadow mode is turned on (a change
	// it is documented to see that late).
	l := e.limiter(t, "svc", client.WithTimeout(5*time.Second), client.WithDenialCache(0), client.WithObserver(func(d client.Decision) {
		mu.Lock()
		results[d.Key] = append(results[d.Key], outcome(d))
		mu.Unlock()
	}))

	for i := range 4 {
		res, err := l.AcquireKey(ctx, "api", "trial:7", 1)
		if err != nil || !res.Allowed || res.Fallback || res.Limit != 2 || res.WouldDeny != (i >= 2) {
			t.Fatalf("trial key, call %d: %+v %v", i, res, err)
		}
	}
	if !l.AllowKey(ctx, "api", "trial:7") {
		t.Fatal("AllowKey refused a key in shadow mode")
	}
	if res, err := l.AcquireKey(ctx, "api", "paid:7", 1); err != nil || !res.Allowed || res.WouldDeny {
		t.Fatalf("paid key: %+v %v", res, err)
	}
	if res, err := l.AcquireKey(ctx, "api", "paid:7", 1); err != nil || res.Allowed || res.WouldDeny {
		t.Fatalf("paid key past its limit: %+v %v, want denied", res, err)
	}
	mu.Lock()
	got := results["trial:7"]
	mu.Unlock()
	want := []string{"allowed", "allowed", "would_deny", "would_deny", "would_deny"}
	if len(got) != len(want) {
		t.Fatalf("trial key decisions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("trial key decisions %v, want %v", got, want)
		}
	}

	cfg := redisscript.Config{Name: "api", ID: 1, Version: 2, Capacity: 1, PermitsMicro: 1_000_000, PeriodSeconds: 3600,
		Apps: []string{"svc"}, Shadow: true}
	if _, err := redisscript.ApplyKeyed(ctx, e.rdb, e.ks(), cfg, false); err != nil {
		t.Fatal(err)
	}
	if res, err := l.AcquireKey(ctx, "api", "paid:7", 1); err != nil || !res.Allowed || !res.WouldDeny {
		t.Fatalf("paid key in a shadow bucket: %+v %v, want would deny", res, err)
	}
}
