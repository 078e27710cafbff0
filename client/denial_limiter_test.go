package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// TestDenialCacheCallers: a denied key is answered from the cache like a
// denied bucket, other keys of the bucket are not; a shadow bucket's
// would-deny answers and a Limiter without the cache always ask Redis.
func TestDenialCacheCallers(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.defineKeyed(t, "per-user", 1, slow, 3600, "svc")
	e.define(t, "trial", 1, slow, 3600, "svc")
	e.shadow(t, "trial", 2, true)
	e.define(t, "plain", 1, slow, 3600, "svc")
	ctx := context.Background()
	l := e.limiter(t, "svc", client.WithDenialCache(time.Hour)) // a stalled test must not outlive an entry
	cached := func() uint64 { return l.Stats().CachedDenials }

	for i, want := range []bool{true, false, false} {
		res, err := l.AcquireKey(ctx, "per-user", "u1", 1)
		if err != nil || res.Allowed != want || res.Limit != 1 {
			t.Fatalf("key u1, call %d: %+v %v", i, res, err)
		}
	}
	if got := cached(); got != 1 {
		t.Fatalf("%d keyed calls answered from the cache, want 1 (the second denial)", got)
	}
	if res, err := l.AcquireKey(ctx, "per-user", "u2", 1); err != nil || !res.Allowed || cached() != 1 {
		t.Fatalf("key u2: %+v %v, %d cached: another key's denial answered it", res, err, cached())
	}

	for i := range 3 {
		res, err := l.Acquire(ctx, "trial", 1)
		if err != nil || !res.Allowed || (i > 0 && !res.WouldDeny) {
			t.Fatalf("shadow bucket, call %d: %+v %v", i, res, err)
		}
	}
	if got := cached(); got != 1 {
		t.Fatalf("a shadow bucket was answered from the cache (%d cached)", got)
	}

	off := e.limiter(t, "svc", client.WithDenialCache(0))
	for i, want := range []bool{true, false, false, false} {
		if res, err := off.Acquire(ctx, "plain", 1); err != nil || res.Allowed != want {
			t.Fatalf("without the cache, call %d: %+v %v", i, res, err)
		}
	}
	if got := off.Stats().CachedDenials; got != 0 {
		t.Fatalf("WithDenialCache(0): %d calls answered from the cache", got)
	}
	if _, err := client.New(e.rdb, "svc", client.WithDenialCache(-time.Second)); err == nil {
		t.Fatal("a negative denial cache time was accepted")
	}
}
