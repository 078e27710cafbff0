package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

func TestTakeSlot(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.defineSlots(t, "jobs", 2, time.Minute, "svc")
	e.define(t, "orders", 5, 1_000_000, 1, "svc")
	ctx := context.Background()
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed))

	a, err := l.TakeSlot(ctx, "jobs")
	if err != nil || !a.Allowed || a.InUse != 1 || a.Limit != 2 || a.Lease != time.Minute || a.Fallback || a.ID() == "" {
		t.Fatalf("first take: %+v %q %v", a.SlotResult, a.ID(), err)
	}
	b, _ := l.TakeSlot(ctx, "jobs")
	if b.ID() == a.ID() || !redisscript.ValidSlotID(b.ID()) {
		t.Errorf("slot ids %q and %q", a.ID(), b.ID())
	}
	c, err := l.TakeSlot(ctx, "jobs")
	if err != nil || c.Allowed || c.InUse != 2 || c.RetryAfter <= 0 || c.RetryAfter > time.Minute {
		t.Fatalf("at the limit: %+v %v", c.SlotResult, err)
	}
	if res, err := c.Release(ctx); err != nil || res.Allowed {
		t.Errorf("release of a denied take: %+v %v", res, err)
	}
	if res, err := a.Renew(ctx); err != nil || !res.Allowed || res.InUse != 2 {
		t.Errorf("renew: %+v %v", res, err)
	}
	if res, err := a.Release(ctx); err != nil || !res.Allowed || res.InUse != 1 {
		t.Errorf("release: %+v %v", res, err)
	}
	if res, err := a.Release(ctx); err != nil || res.Allowed || res.InUse != 1 {
		t.Errorf("second release: %+v %v, want nothing freed", res, err)
	}
	if res, err := a.Renew(ctx); err != nil || res.Allowed {
		t.Errorf("renew of a released slot: %+v %v", res, err)
	}

	// By id, as the decision service does: another Limiter of the app.
	other := e.limiter(t, "svc")
	if res, err := other.RenewSlot(ctx, "jobs", "", b.ID()); err != nil || !res.Allowed {
		t.Errorf("renew by id: %+v %v", res, err)
	}
	if res, err := other.ReleaseSlot(ctx, "jobs", "", b.ID()); err != nil || !res.Allowed || res.InUse != 0 {
		t.Errorf("release by id: %+v %v", res, err)
	}
	if _, err := other.ReleaseSlot(ctx, "jobs", "", "not an id"); !errors.Is(err, client.ErrInvalidSlotID) {
		t.Errorf("a bad id: %v", err)
	}

	// Calls that can never succeed.
	if s, err := l.TakeSlot(ctx, "orders"); !errors.Is(err, client.ErrWrongKind) || s == nil || s.Allowed {
		t.Errorf("a slot of a token bucket: %+v %v", s, err)
	}
	if _, err := l.Acquire(ctx, "jobs", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("tokens of a concurrency limit: %v", err)
	}
	if _, err := l.TakeSlot(ctx, "nope"); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("no such limit: %v", err)
	}
	if _, err := l.TakeSlotKey(ctx, "jobs", "alice"); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("a keyed take of a shared limit: %v", err)
	}
	if _, err := e.limiter(t, "other").TakeSlot(ctx, "jobs"); !errors.Is(err, client.ErrAppNotAllowed) {
		t.Errorf("another app: %v", err)
	}
	if st, err := redisscript.ReadSlots(ctx, e.rdb, e.ks(), "jobs", ""); err != nil || st.InUse != 0 || st.Held != 0 {
		t.Errorf("after every release: %+v %v", st, err)
	}
}

// TestKeepAlive: a slot kept alive is renewed before it expires: its
// expiry moves on (read from Redis), and stopping ends the renewals.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	// Renewed every 3 s: a stall of up to 3 s does not lose the slot.
	e.defineSlots(t, "long", 1, 6*time.Second, "svc")
	ctx := context.Background()
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed))
	s, err := l.TakeSlot(ctx, "long")
	if err != nil || !s.Allowed {
		t.Fatalf("take: %+v %v", s, err)
	}
	set := e.ks().Slots("long")
	first, err := e.rdb.ZScore(ctx, set, s.ID()).Result()
	if err != nil {
		t.Fatal(err)
	}
	stop := s.KeepAlive()
	if !eventually(30*time.Second, func() bool {
		v, err := e.rdb.ZScore(ctx, set, s.ID()).Result()
		return err == nil && v > first
	}) {
		t.Fatal("the slot's expiry never moved: not renewed")
	}
	stop()
	stop() // twice is fine
	if _, err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSlotFailurePolicies: what each policy answers a take while Redis is
// down, and that FailLocal's slots are a per-process share of the limit
// Redis reported, released locally.
func TestSlotFailurePolicies(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.defineSlots(t, "jobs", 5, time.Minute, "svc")
	ctx := context.Background()
	open := e.limiter(t, "svc", client.WithFailurePolicy(client.FailOpen), quiet())
	closed := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), quiet())
	local := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), client.WithInstances(2), quiet())
	blind := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), quiet()) // never sees "jobs"
	// The local limiter learns the limit; its Redis slot stays held.
	held, err := local.TakeSlot(ctx, "jobs")
	if err != nil || !held.Allowed || held.Fallback {
		t.Fatalf("take from Redis: %+v %v", held.SlotResult, err)
	}
	srv.Kill()

	for range 3 {
		if s, err := open.TakeSlot(ctx, "jobs"); err != nil || !s.Allowed || !s.Fallback || s.Limit != 0 {
			t.Fatalf("fail open: %+v %v", s.SlotResult, err)
		}
		if s, err := closed.TakeSlot(ctx, "jobs"); !errors.Is(err, client.ErrUnavailable) || s.Allowed || !s.Fallback {
			t.Fatalf("fail closed: %+v %v", s.SlotResult, err)
		}
		if s, err := blind.TakeSlot(ctx, "jobs"); !errors.Is(err, client.ErrUnavailable) || s.Allowed {
			t.Fatalf("local without a known limit: %+v %v", s.SlotResult, err)
		}
	}
	// Local: 5 / 2 instances = 2 slots, whatever Redis holds.
	var locals []*client.Slot
	for i := range 3 {
		s, err := local.TakeSlot(ctx, "jobs")
		if err != nil || !s.Fallback || s.Limit != 2 || s.Lease != time.Minute || s.Allowed != (i < 2) {
			t.Fatalf("local take %d: %+v %v", i+1, s.SlotResult, err)
		}
		locals = append(locals, s)
	}
	if res, err := locals[0].Release(ctx); err != nil || !res.Allowed || res.InUse != 1 {
		t.Errorf("local release: %+v %v", res, err)
	}
	if s, err := local.TakeSlot(ctx, "jobs"); err != nil || !s.Allowed || !s.Fallback {
		t.Errorf("local take after a release: %+v %v", s.SlotResult, err)
	}
	if res, err := locals[1].Renew(ctx); err != nil || !res.Allowed {
		t.Errorf("local renew: %+v %v", res, err)
	}
	// A slot held in Redis cannot be released while Redis is down; it
	// stays counted there until it expires.
	if _, err := held.Release(ctx); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("release of a Redis slot during the outage: %v", err)
	}

	srv.Start()
	// It restarted empty: the sync worker would define the limit again.
	if !eventually(30*time.Second, func() bool { return e.rdb.Ping(ctx).Err() == nil }) {
		t.Fatal("Redis did not start again")
	}
	e.defineSlots(t, "jobs", 5, time.Minute, "svc")
	// Each limiter finds Redis again on its own: the local one's breaker
	// may still be open for a while after the closed one got through.
	back := func(l *client.Limiter) func() bool {
		return func() bool {
			s, err := l.TakeSlot(ctx, "jobs")
			if err == nil && s.Allowed {
				_, _ = s.Release(ctx)
			}
			return err == nil && s.Allowed && !s.Fallback
		}
	}
	if !eventually(30*time.Second, back(closed)) || !eventually(30*time.Second, back(local)) {
		t.Fatal("Redis never came back")
	}
	// A local slot is still released locally once Redis answers again.
	if res, err := locals[1].Release(ctx); err != nil || !res.Allowed || !res.Fallback {
		t.Errorf("local release after the outage: %+v %v", res, err)
	}
	// The Redis slot taken before the outage was lost with Redis's data
	// (a restart with persistence would keep it): its release frees nothing.
	if res, err := held.Release(ctx); err != nil || res.Allowed || res.Fallback {
		t.Errorf("release of the Redis slot after the outage: %+v %v", res, err)
	}
}

// TestConcurrencyMiddlewareRedis: the middleware on Redis holds a slot
// for the length of a request and releases it after.
func TestConcurrencyMiddlewareRedis(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.defineSlots(t, "uploads", 1, time.Minute, "web")
	e.define(t, "orders", 5, 1_000_000, 1, "web")
	l := e.limiter(t, "web", client.WithFailurePolicy(client.FailClosed))
	inside, release := make(chan struct{}), make(chan struct{})
	h := client.ConcurrencyMiddleware(l, func(r *http.Request) string { return r.URL.Query().Get("limit") })(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				close(inside)
				<-release
			}
			w.WriteHeader(http.StatusNoContent)
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) *http.Response {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	slow := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/slow?limit=uploads")
		if err != nil {
			slow <- 0
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	<-inside
	if resp := get("/fast?limit=uploads"); resp.StatusCode != http.StatusTooManyRequests ||
		resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit-Remaining") != "0" {
		t.Errorf("while the slot is held: %d %v", resp.StatusCode, resp.Header)
	}
	close(release)
	if code := <-slow; code != http.StatusNoContent {
		t.Errorf("the slow request: %d", code)
	}
	if st, err := redisscript.ReadSlots(context.Background(), e.rdb, e.ks(), "uploads", ""); err != nil || st.InUse != 0 {
		t.Errorf("after the request: %+v %v", st, err)
	}
	if resp := get("/fast?limit=uploads"); resp.StatusCode != http.StatusNoContent {
		t.Errorf("after the release: %d", resp.StatusCode)
	}
	if resp := get("/fast"); resp.StatusCode != http.StatusNoContent {
		t.Errorf("no limit named: %d", resp.StatusCode)
	}
	if resp := get("/fast?limit=orders"); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("a token bucket named: %d, want 500", resp.StatusCode)
	}
}
