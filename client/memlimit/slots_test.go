package memlimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/memlimit"
)

func TestSlots(t *testing.T) {
	ctx := context.Background()
	clock := memlimit.NewManualClock(time.Unix(1_700_000_000, 0))
	l := memlimit.New("svc", memlimit.WithClock(clock))
	if err := l.Define("jobs", memlimit.Bucket{Capacity: 2, SlotLease: time.Second}); err != nil {
		t.Fatal(err)
	}
	a, err := l.TakeSlot(ctx, "jobs")
	if err != nil || !a.Allowed || a.InUse != 1 || a.Limit != 2 || a.Lease != time.Second {
		t.Fatalf("first take: %+v %v", a.SlotResult, err)
	}
	clock.Advance(100 * time.Millisecond)
	b, _ := l.TakeSlot(ctx, "jobs")
	c, err := l.TakeSlot(ctx, "jobs")
	if err != nil || c.Allowed || c.InUse != 2 || c.RetryAfter != 900*time.Millisecond {
		t.Fatalf("at the limit: %+v %v, want denied with 900ms until the first slot expires", c.SlotResult, err)
	}
	if res, err := c.Release(ctx); err != nil || res.Allowed {
		t.Errorf("release of a denied take: %+v %v", res, err)
	}
	if res, err := a.Release(ctx); err != nil || !res.Allowed || res.InUse != 1 {
		t.Errorf("release: %+v %v", res, err)
	}
	if res, err := a.Release(ctx); err != nil || res.Allowed || res.InUse != 1 {
		t.Errorf("second release: %+v %v, want nothing freed", res, err)
	}
	clock.Advance(800 * time.Millisecond)
	if res, err := b.Renew(ctx); err != nil || !res.Allowed {
		t.Errorf("renew: %+v %v", res, err)
	}
	clock.Advance(900 * time.Millisecond) // b was taken 1.7 s ago, renewed 0.9 s ago
	if n, ok := l.InUse("jobs", ""); !ok || n != 1 {
		t.Errorf("in use after the renewal: %d %v, want 1", n, ok)
	}
	clock.Advance(100 * time.Millisecond)
	if n, _ := l.InUse("jobs", ""); n != 0 {
		t.Errorf("in use a lease time after the renewal: %d, want 0 (expired)", n)
	}
	if res, err := b.Release(ctx); err != nil || res.Allowed {
		t.Errorf("release after expiry: %+v %v, want nothing freed", res, err)
	}

	// Kinds: tokens of a concurrency limit, slots of a token bucket.
	if err := l.Define("orders", memlimit.Bucket{Capacity: 5, Permits: 1, Per: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "jobs", 1); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("acquire of a concurrency limit: %v", err)
	}
	if _, err := l.TakeSlot(ctx, "orders"); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("slot of a token bucket: %v", err)
	}
	if _, err := l.TakeSlot(ctx, "nope"); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("slot of no limit: %v", err)
	}
	if _, err := l.As("other").TakeSlot(ctx, "jobs"); err != nil {
		t.Errorf("a limit without apps serves every app: %v", err)
	}
}

func TestKeyedSlots(t *testing.T) {
	ctx := context.Background()
	clock := memlimit.NewManualClock(time.Unix(1_700_000_000, 0))
	l := memlimit.New("svc", memlimit.WithClock(clock))
	if err := l.Define("per-user", memlimit.Bucket{Capacity: 1, SlotLease: time.Minute, Keyed: true, Apps: []string{"svc"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Override("per-user", memlimit.Override{Key: "vip", Capacity: 2}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key     string
		allowed bool
		limit   int64
	}{{"ann", true, 1}, {"ann", false, 1}, {"bob", true, 1}, {"vip", true, 2}, {"vip", true, 2}, {"vip", false, 2}} {
		s, err := l.TakeSlotKey(ctx, "per-user", c.key)
		if err != nil || s.Allowed != c.allowed || s.Limit != c.limit {
			t.Errorf("%s: %+v %v, want allowed %v limit %d", c.key, s.SlotResult, err, c.allowed, c.limit)
		}
	}
	if _, err := l.TakeSlot(ctx, "per-user"); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("a shared take of a keyed limit: %v", err)
	}
	if _, err := l.As("other").TakeSlotKey(ctx, "per-user", "ann"); !errors.Is(err, client.ErrAppNotAllowed) {
		t.Errorf("another app: %v", err)
	}
	if _, err := l.TakeSlotKey(ctx, "per-user", ""); !errors.Is(err, client.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

// TestConcurrencyMiddleware: a request holds its slot while its handler
// runs; a second one meanwhile gets 429; once the first answered, the
// slot is free again.
func TestConcurrencyMiddleware(t *testing.T) {
	l := memlimit.New("web")
	if err := l.Define("uploads", memlimit.Bucket{Capacity: 1, SlotLease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	h := client.ConcurrencyMiddleware(l, func(r *http.Request) string { return "uploads" })(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				close(inside)
				<-release
			}
			w.WriteHeader(http.StatusNoContent)
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	slow := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/slow")
		if err != nil {
			slow <- 0
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	<-inside
	resp, err := http.Get(srv.URL + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get("RateLimit-Limit") != "1" || resp.Header.Get("RateLimit-Remaining") != "0" {
		t.Errorf("while the slot is held: %d %v", resp.StatusCode, resp.Header)
	}
	close(release)
	if code := <-slow; code != http.StatusNoContent {
		t.Errorf("the slow request: %d", code)
	}
	if n, _ := l.InUse("uploads", ""); n != 0 {
		t.Errorf("%d slots in use after the request answered", n)
	}
	resp, err = http.Get(srv.URL + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("RateLimit-Remaining") != "0" {
		t.Errorf("after the release: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestSlotTakesObserved: the observer sees every take, as a client
// Limiter's does (client.Decision.Slot), and no release.
func TestSlotTakesObserved(t *testing.T) {
	ctx := context.Background()
	var seen []client.Decision
	l := memlimit.New("svc", memlimit.WithObserver(func(d client.Decision) { seen = append(seen, d) }))
	if err := l.Define("jobs", memlimit.Bucket{Capacity: 1, SlotLease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := l.Define("users", memlimit.Bucket{Capacity: 1, SlotLease: time.Minute, Keyed: true}); err != nil {
		t.Fatal(err)
	}
	a, _ := l.TakeSlot(ctx, "jobs")
	_, _ = l.TakeSlot(ctx, "jobs")
	_, _ = a.Release(ctx)
	_, _ = l.TakeSlotKey(ctx, "users", "u1")
	_, _ = l.TakeSlotKey(ctx, "users", "")
	if len(seen) != 4 {
		t.Fatalf("observed %d calls, want the 4 takes: %+v", len(seen), seen)
	}
	want := []string{"jobs  true 0", "jobs  false 0", "users u1 true 0", "users  false 0"}
	for i, d := range seen {
		if got := fmt.Sprintf("%s %s %v %d", d.Bucket, d.Key, d.Result.Allowed, d.Result.Remaining); !d.Slot || got != want[i] {
			t.Errorf("take %d observed as %+v, want %s", i, d, want[i])
		}
	}
	if !errors.Is(seen[3].Err, client.ErrInvalidKey) || seen[0].Result.Limit != 1 || seen[0].Result.Used() != 1 {
		t.Errorf("observed %+v and %+v", seen[0], seen[3])
	}
}
