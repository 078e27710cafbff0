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

// TestFailLocalHonoursKeyedShadow: FailLocal never refuses a key in shadow
// mode, of a keyed bucket in shadow mode or of a shadow override, although
// every answer Redis gave for the bucket was a grant: keyed answers carry
// the shadow flag (protocol 2), which the fallback keeps with the limit it
// learns. Its local buckets start empty at the outage, so they answer
// would deny, as Redis does.
func TestFailLocalHonoursKeyedShadow(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	ctx := context.Background()
	e.defineKeyed(t, "trial", 2, slow, 3600, "svc")
	cfg := redisscript.Config{Name: "trial", ID: 1, Version: 2, Capacity: 2, PermitsMicro: slow, PeriodSeconds: 3600,
		Apps: []string{"svc"}, Shadow: true}
	if out, err := redisscript.ApplyKeyed(ctx, e.rdb, e.ks(), cfg, false); err != nil || out != redisscript.Updated {
		t.Fatalf("shadow on: %v %v", out, err)
	}
	// An enforced bucket whose prefix override is in shadow mode.
	e.defineKeyed(t, "api", 2, slow, 3600, "svc")
	o := redisscript.Override{Bucket: "api", BucketID: 1, ID: 1, Version: 1, Match: redisscript.MatchPrefix,
		Key: "try:", Capacity: 2, PermitsMicro: slow, PeriodSeconds: 3600, Shadow: true}
	if _, err := redisscript.ApplyOverride(ctx, e.rdb, e.ks(), o, false); err != nil {
		t.Fatal(err)
	}
	local := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), client.WithDenialCache(0), quiet())
	for _, c := range []struct{ bucket, key string }{{"trial", "alice"}, {"api", "try:1"}, {"api", "paid:1"}} {
		if res, err := local.AcquireKey(ctx, c.bucket, c.key, 1); err != nil || !res.Allowed || res.WouldDeny || res.Fallback {
			t.Fatalf("%s[%s], the only answer of Redis: %+v %v, want a plain grant", c.bucket, c.key, res, err)
		}
	}
	srv.Kill()
	waitFallback(t, local, "trial")
	// alice was seen; bob was not (the bucket's own limit, learned from
	// alice's answer, applies); try:1 has the shadow override's limit.
	for _, c := range []struct{ bucket, key string }{{"trial", "alice"}, {"trial", "bob"}, {"api", "try:1"}} {
		wouldDeny := 0
		for i := range 10 {
			res, err := local.AcquireKey(ctx, c.bucket, c.key, 1)
			if err != nil || !res.Allowed || !res.Fallback {
				t.Fatalf("%s[%s], call %d in fallback: %+v %v, want allowed by the local bucket", c.bucket, c.key, i, res, err)
			}
			if res.WouldDeny {
				wouldDeny++
			}
		}
		if wouldDeny == 0 {
			t.Fatalf("%s[%s]: the local bucket, empty at the outage's start, reported no would-deny", c.bucket, c.key)
		}
	}
	// The enforced key of the same bucket is still refused where it lacks
	// tokens: shadow mode is the override's, not the bucket's.
	refused := false
	for range 10 {
		res, err := local.AcquireKey(ctx, "api", "paid:1", 1)
		if err != nil || !res.Fallback {
			t.Fatalf("api[paid:1] in fallback: %+v %v", res, err)
		}
		if !res.Allowed {
			refused = true
		}
		if res.WouldDeny {
			t.Fatalf("api[paid:1] in fallback: %+v, an enforced key is never would deny", res)
		}
	}
	if !refused {
		t.Fatal("api[paid:1]: the local bucket, empty at the outage's start, never refused an enforced key")
	}
}
