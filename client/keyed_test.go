package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// defineKeyed creates keyed bucket name (id 1) the way the sync worker does.
func (e env) defineKeyed(t testing.TB, name string, capacity, permitsMicro, period int64, apps ...string) {
	t.Helper()
	cfg := redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: capacity, PermitsMicro: permitsMicro,
		PeriodSeconds: period, Apps: apps}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks(), cfg, false); err != nil {
		t.Fatalf("define keyed %s: %v", name, err)
	}
}

func (e env) override(t testing.TB, bucket string, id int64, match, key string, capacity int64) {
	t.Helper()
	o := redisscript.Override{Bucket: bucket, BucketID: 1, ID: id, Version: 1, Match: match, Key: key,
		Capacity: capacity, PermitsMicro: 1_000_000, PeriodSeconds: 3600}
	if _, err := redisscript.ApplyOverride(context.Background(), e.rdb, e.ks(), o, false); err != nil {
		t.Fatalf("override %q: %v", key, err)
	}
}

func TestAcquireKey(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.defineKeyed(t, "api", 3, 1_000_000, 3600, "svc") // 3 per key, 1 per hour
	e.define(t, "plain", 3, 1_000_000, 3600, "svc")
	e.override(t, "api", 1, redisscript.MatchPrefix, "vip:", 10)
	// A generous timeout: this test is about answers, and a loaded machine
	// must not turn them into the failure policy's.
	l := e.limiter(t, "svc", client.WithTimeout(5*time.Second))
	other := e.limiter(t, "other", client.WithTimeout(5*time.Second))
	ctx := context.Background()

	for i := int64(2); i >= 0; i-- {
		res, err := l.AcquireKey(ctx, "api", "alice", 1)
		if err != nil || !res.Allowed || res.Remaining != i || res.Limit != 3 {
			t.Fatalf("alice: %+v %v", res, err)
		}
	}
	res, err := l.AcquireKey(ctx, "api", "alice", 1)
	if err != nil || res.Allowed || res.RetryAfter < 59*time.Minute || res.RetryAfter > time.Hour {
		t.Fatalf("alice empty: %+v %v", res, err)
	}
	if !l.AllowKey(ctx, "api", "bob") {
		t.Fatal("bob has his own tokens")
	}
	if res, err := l.AcquireKey(ctx, "api", "vip:carol", 10); err != nil || !res.Allowed || res.Limit != 10 {
		t.Fatalf("vip: %+v %v", res, err)
	}
	for _, c := range []struct {
		l           *client.Limiter
		bucket, key string
		n           int64
		want        error
	}{
		{l, "nope", "k", 1, client.ErrUnknownBucket},
		{l, "plain", "k", 1, client.ErrUnknownBucket}, // not keyed
		{l, "Not A Name", "k", 1, client.ErrUnknownBucket},
		{other, "api", "k", 1, client.ErrAppNotAllowed},
		{l, "api", "k", 4, client.ErrExceedsCapacity},
		{l, "api", "k", 0, client.ErrInvalidN},
		{l, "api", "", 1, client.ErrInvalidKey},
		{l, "api", strings.Repeat("x", 257), 1, client.ErrInvalidKey},
	} {
		if _, err := c.l.AcquireKey(ctx, c.bucket, c.key, c.n); !errors.Is(err, c.want) {
			t.Errorf("AcquireKey(%q, %q, %d) = %v; want %v", c.bucket, c.key, c.n, err, c.want)
		}
	}
	// And a plain acquire of a keyed bucket does not exist.
	if _, err := l.Acquire(ctx, "api", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("plain acquire of a keyed bucket: %v", err)
	}
	// Any bytes are a key.
	if res, err := l.AcquireKey(ctx, "api", "\x00}{\xff", 1); err != nil || !res.Allowed {
		t.Errorf("binary key: %+v %v", res, err)
	}
}

func TestWaitKey(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.defineKeyed(t, "api", 1, 20_000_000, 1, "svc")    // 1 per key, 20/s
	e.defineKeyed(t, "slow", 1, 1_000_000, 3600, "svc") // 1 per key, 1 an hour
	l := e.limiter(t, "svc", client.WithTimeout(5*time.Second))
	ctx := context.Background()
	// The second token of a key exists 50 ms after the first was taken,
	// which was after start: a stalled test only waits longer.
	start := time.Now()
	for range 2 {
		if err := l.WaitKey(ctx, "api", "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 45*time.Millisecond {
		t.Errorf("two tokens after %v; the rate allows one per 50 ms", d)
	}
	// A wait that cannot end before the deadline gives up at once.
	if err := l.WaitKey(ctx, "slow", "k", 1); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.WaitKey(short, "slow", "k", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait past the deadline: %v", err)
	}
}

// With Redis dead, FailLocal answers each recent key from its own local
// bucket, and keys it never saw from the bucket's own limit.
func TestAcquireKeyFailLocal(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.defineKeyed(t, "api", 4, 1_000_000, 3600, "svc") // 4 per key, 1 per hour
	e.override(t, "api", 1, redisscript.MatchExact, "big", 100)
	e.override(t, "api", 2, redisscript.MatchExact, "was-big", 100)
	l := e.limiter(t, "svc", client.WithLogger(slog.New(slog.DiscardHandler)), client.WithTimeout(2*time.Second))
	ctx := context.Background()
	e.defineKeyed(t, "revoked", 4, 1_000_000, 3600, "svc")
	for _, key := range []string{"seen", "seen", "seen", "big", "default", "was-big"} {
		if _, err := l.AcquireKey(ctx, "api", key, 1); err != nil {
			t.Fatal(err)
		}
	}
	// An override removed: its key's next answer is the bucket's limit,
	// which FailLocal must then apply to it too.
	o := redisscript.Override{Bucket: "api", BucketID: 1, ID: 2, Version: 2, Match: redisscript.MatchExact, Key: "was-big"}
	if _, err := redisscript.DeleteOverride(ctx, e.rdb, e.ks(), o); err != nil {
		t.Fatal(err)
	}
	if r, err := l.AcquireKey(ctx, "api", "was-big", 1); err != nil || r.Limit != 4 {
		t.Fatalf("after the override's removal: %+v %v", r, err)
	}
	// A bucket this app lost: FailLocal must refuse even the keys it saw.
	if _, err := l.AcquireKey(ctx, "revoked", "k", 1); err != nil {
		t.Fatal(err)
	}
	cfg := redisscript.Config{Name: "revoked", ID: 1, Version: 2, Capacity: 4, PermitsMicro: 1_000_000,
		PeriodSeconds: 3600, Apps: []string{"someone-else"}}
	if _, err := redisscript.ApplyKeyed(ctx, e.rdb, e.ks(), cfg, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireKey(ctx, "revoked", "k", 1); !errors.Is(err, client.ErrAppNotAllowed) {
		t.Fatalf("after the app lost the bucket: %v", err)
	}
	srv.Kill()
	var res client.Result
	if !eventually(5*time.Second, func() bool { res, _ = l.AcquireKey(ctx, "api", "seen", 1); return res.Fallback }) {
		t.Fatal("no fallback after Redis died")
	}
	// Local buckets start empty and fill at the key's rate only while the
	// policy answers (1 per hour here), so no key gets more than one grant
	// however many calls it makes; each answers with its own limit: "big"
	// keeps its override's, a new key gets the bucket's.
	count := func(key string) (grants int, limit int64) {
		for range 200 {
			r, err := l.AcquireKey(ctx, "api", key, 1)
			if err == nil && r.Fallback {
				limit = r.Limit
				if r.Allowed {
					grants++
				}
			}
		}
		return grants, limit
	}
	for key, want := range map[string]int64{"seen": 4, "big": 100, "fresh": 4, "was-big": 4} {
		grants, limit := count(key)
		if grants > 1 {
			t.Errorf("%s: %d local grants; want at most 1", key, grants)
		}
		if limit != want {
			t.Errorf("%s: local limit %d; want %d", key, limit, want)
		}
	}
	if _, err := l.AcquireKey(ctx, "never-seen-bucket", "k", 1); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("unknown bucket in an outage: %v; want ErrUnavailable", err)
	}
	if _, err := l.AcquireKey(ctx, "revoked", "k", 1); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("a bucket the app lost, in an outage: %v; want ErrUnavailable", err)
	}
}

func TestKeyMiddleware(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.defineKeyed(t, "api", 1, 1_000_000, 3600, "svc")
	l := e.limiter(t, "svc", client.WithTimeout(5*time.Second))
	h := client.KeyMiddleware(l, "api", client.HeaderKey("X-API-Key"))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	do := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("k1"); w.Code != http.StatusNoContent || w.Header().Get("RateLimit-Limit") != "1" {
		t.Fatalf("first: %d %v", w.Code, w.Header())
	}
	if w := do("k1"); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second: %d %v", w.Code, w.Header())
	}
	if w := do("k2"); w.Code != http.StatusNoContent {
		t.Fatalf("other key: %d", w.Code)
	}
	if w := do(""); w.Code != http.StatusNoContent {
		t.Fatalf("no key: %d", w.Code)
	}
	long := strings.Repeat("a", 300)
	if w := do(long); w.Code != http.StatusNoContent {
		t.Fatalf("long key: %d", w.Code)
	}
	if w := do(long); w.Code != http.StatusTooManyRequests {
		t.Fatalf("long key again: %d", w.Code)
	}
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	trusting := client.ClientIP(proxies...)
	direct := client.ClientIP()
	for _, c := range []struct {
		remote, xff string
		f           func(*http.Request) string
		want        string
	}{
		{"203.0.113.5:4000", "", trusting, "203.0.113.5"},
		{"203.0.113.5:4000", "1.2.3.4", trusting, "203.0.113.5"}, // untrusted peer: header ignored
		{"10.0.0.2:80", "1.2.3.4", direct, "10.0.0.2"},           // no trusted proxies
		{"10.0.0.2:80", "1.2.3.4", trusting, "1.2.3.4"},
		{"10.0.0.2:80", "6.6.6.6, 1.2.3.4, 10.0.0.9", trusting, "1.2.3.4"}, // spoofed left part skipped
		{"10.0.0.2:80", "garbage, 10.0.0.9", trusting, "10.0.0.9"},
		{"[::1]:80", "2001:db8::1", trusting, "2001:db8::1"},
		{"[::ffff:198.51.100.7]:80", "", trusting, "198.51.100.7"},
		{"not-an-ip", "", trusting, ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := c.f(r); got != c.want {
			t.Errorf("remote %q, X-Forwarded-For %q: %q; want %q", c.remote, c.xff, got, c.want)
		}
	}
}
