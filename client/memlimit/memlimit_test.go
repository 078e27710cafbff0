package memlimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/memlimit"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

func newLimiter(t *testing.T) (*memlimit.Limiter, *memlimit.ManualClock) {
	t.Helper()
	clock := memlimit.NewManualClock(time.Unix(1_700_000_000, 0))
	l := memlimit.New("svc", memlimit.WithClock(clock))
	if err := l.Define("orders", memlimit.Bucket{Capacity: 10, Permits: 2, Per: time.Second}); err != nil {
		t.Fatal(err)
	}
	return l, clock
}

func TestRefillByTheInjectedClock(t *testing.T) {
	l, clock := newLimiter(t)
	ctx := context.Background()
	if res, err := l.Acquire(ctx, "orders", 10); err != nil || !res.Allowed || res.Remaining != 0 || res.ResetAfter != 5*time.Second {
		t.Fatalf("take all: %+v %v", res, err)
	}
	if res, err := l.Acquire(ctx, "orders", 3); err != nil || res.Allowed || res.RetryAfter != 1500*time.Millisecond || res.Limit != 10 {
		t.Fatalf("empty: %+v %v", res, err)
	}
	clock.Advance(1500 * time.Millisecond)
	granted := 0
	for range 4 {
		if l.Allow(ctx, "orders") {
			granted++
		}
	}
	if granted != 3 {
		t.Fatalf("1.5 s at 2/s granted %d, want exactly 3", granted)
	}
	clock.Advance(time.Hour)
	if tok, _ := l.Tokens("orders"); tok != 10 {
		t.Fatalf("after an hour: %v, want capacity", tok)
	}
	clock.Advance(-time.Minute) // back in time: no refill, no loss
	if res, _ := l.Acquire(ctx, "orders", 1); !res.Allowed || res.Remaining != 9 {
		t.Fatalf("clock went back: %+v", res)
	}
}

func TestErrors(t *testing.T) {
	l, _ := newLimiter(t)
	if err := l.Define("billing", memlimit.Bucket{Capacity: 5, Permits: 1, Per: time.Second, Apps: []string{"other"}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		bucket string
		n      int64
		want   error
	}{
		{"nope", 1, client.ErrUnknownBucket}, {"billing", 1, client.ErrAppNotAllowed},
		{"orders", 11, client.ErrExceedsCapacity}, {"orders", 0, client.ErrInvalidN},
	} {
		if _, err := l.Acquire(ctx, tc.bucket, tc.n); !errors.Is(err, tc.want) {
			t.Errorf("%s %d: %v, want %v", tc.bucket, tc.n, err, tc.want)
		}
	}
	if err := l.Define("bad", memlimit.Bucket{Capacity: 0, Permits: 1, Per: time.Second}); err == nil {
		t.Error("capacity 0 accepted")
	}
	l.Delete("orders")
	if _, err := l.Acquire(ctx, "orders", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("deleted bucket: %v", err)
	}
}

func TestAcquireAllRefundCharge(t *testing.T) {
	l, _ := newLimiter(t)
	if err := l.Define("small", memlimit.Bucket{Capacity: 2, Permits: 1, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := l.AcquireAll(ctx, []client.Request{{Bucket: "orders", N: 5}, {Bucket: "small", N: 3 - 1}, {Bucket: "small", N: 1}})
	if !errors.Is(err, client.ErrExceedsCapacity) {
		t.Fatalf("together over capacity: %+v %v", res, err)
	}
	if res, err = l.AcquireAll(ctx, []client.Request{{Bucket: "orders", N: 5}, {Bucket: "small", N: 2}}); err != nil || !res.Allowed {
		t.Fatalf("both: %+v %v", res, err)
	}
	res, err = l.AcquireAll(ctx, []client.Request{{Bucket: "orders", N: 5}, {Bucket: "small", N: 1}})
	if err != nil || res.Allowed || res.Each[0].RetryAfter != 0 || res.Each[1].RetryAfter <= 0 {
		t.Fatalf("last denies: %+v %v", res, err)
	}
	if tok, _ := l.Tokens("orders"); tok != 5 {
		t.Fatalf("a denied set charged orders: %v", tok)
	}
	if a, err := l.Refund(ctx, "orders", 8); err != nil || a.Applied != 5 || a.Remaining != 10 {
		t.Fatalf("refund: %+v %v", a, err)
	}
	if a, err := l.Charge(ctx, "orders", 25); err != nil || a.Applied != 20 || a.Remaining != -10 {
		t.Fatalf("charge: %+v %v", a, err)
	}
}

// TestSameAnswersAsRedis runs one sequence on the in-memory limiter and on
// real Redis (with a refill too slow to matter) and compares the answers.
func TestSameAnswersAsRedis(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{Prefix: prefix}
	for i, name := range []string{"a", "b"} {
		cfg := redisscript.Config{Name: name, ID: int64(i + 1), Version: 1, Capacity: int64(10 * (i + 1)), PermitsMicro: 1,
			PeriodSeconds: 3600, Apps: []string{"svc"}}
		if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	redisLim, err := client.New(rdb, "svc", client.WithKeyPrefix(prefix), client.WithFailurePolicy(client.FailClosed),
		client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer redisLim.Close()
	mem := memlimit.New("svc", memlimit.WithClock(memlimit.NewManualClock(time.Unix(0, 0))))
	for i, name := range []string{"a", "b"} {
		if err := mem.Define(name, memlimit.Bucket{Capacity: int64(10 * (i + 1)), Permits: 1e-6, Per: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	type limiter interface {
		client.Acquirer
		AcquireAll(context.Context, []client.Request) (client.Results, error)
		Refund(context.Context, string, int64) (client.Adjustment, error)
		Charge(context.Context, string, int64) (client.Adjustment, error)
	}
	steps := []func(l limiter) (any, error){
		func(l limiter) (any, error) { return l.Acquire(ctx, "a", 4) },
		func(l limiter) (any, error) { return l.Acquire(ctx, "a", 7) },
		func(l limiter) (any, error) {
			return l.AcquireAll(ctx, []client.Request{{Bucket: "a", N: 2}, {Bucket: "b", N: 19}})
		},
		func(l limiter) (any, error) {
			return l.AcquireAll(ctx, []client.Request{{Bucket: "a", N: 4}, {Bucket: "b", N: 19}, {Bucket: "a", N: 1}})
		},
		func(l limiter) (any, error) { return l.Refund(ctx, "b", 30) },
		func(l limiter) (any, error) { return l.Charge(ctx, "a", 6) },
		func(l limiter) (any, error) { return l.Acquire(ctx, "a", 1) },
		func(l limiter) (any, error) { return l.Charge(ctx, "a", 100) },
		func(l limiter) (any, error) { return l.Acquire(ctx, "a", 11) },
		func(l limiter) (any, error) { return l.Acquire(ctx, "c", 1) },
	}
	for i, step := range steps {
		want, werr := step(redisLim)
		got, gerr := step(mem)
		if !errors.Is(gerr, errors.Unwrap(werr)) && !errors.Is(werr, gerr) {
			t.Errorf("step %d: error %v, redis %v", i, gerr, werr)
		}
		if !sameAnswer(got, want) {
			t.Errorf("step %d: %+v, redis %+v", i, got, want)
		}
	}
}

// sameAnswer compares the counts of two answers; durations depend on the
// rate, which differs by rounding between the two.
func sameAnswer(a, b any) bool {
	switch x := a.(type) {
	case client.Result:
		y := b.(client.Result)
		return x.Allowed == y.Allowed && x.Remaining == y.Remaining && x.Limit == y.Limit
	case client.Results:
		y := b.(client.Results)
		if x.Allowed != y.Allowed || len(x.Each) != len(y.Each) {
			return false
		}
		for i := range x.Each {
			if !sameAnswer(x.Each[i], y.Each[i]) || (x.Each[i].RetryAfter == 0) != (y.Each[i].RetryAfter == 0) {
				return false
			}
		}
		return true
	case client.Adjustment:
		y := b.(client.Adjustment)
		return x.Applied == y.Applied && x.Remaining == y.Remaining && x.Limit == y.Limit
	}
	return false
}

func TestShadow(t *testing.T) {
	l, _ := newLimiter(t)
	if err := l.Define("trial", memlimit.Bucket{Capacity: 1, Permits: 1, Per: time.Hour, Shadow: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := l.Acquire(ctx, "trial", 1); err != nil || !res.Allowed || res.WouldDeny {
		t.Fatalf("first: %+v %v", res, err)
	}
	if res, err := l.Acquire(ctx, "trial", 1); err != nil || !res.Allowed || !res.WouldDeny || res.RetryAfter <= 0 {
		t.Fatalf("would deny: %+v %v", res, err)
	}
	res, err := l.AcquireAll(ctx, []client.Request{{Bucket: "orders", N: 1}, {Bucket: "trial", N: 1}})
	if err != nil || !res.Allowed || !res.Each[1].WouldDeny || res.Each[0].WouldDeny {
		t.Fatalf("set with a shadow bucket: %+v %v", res, err)
	}
	if tok, _ := l.Tokens("orders"); tok != 9 {
		t.Errorf("orders holds %v, want 9", tok)
	}
}

// client.Wait takes any Acquirer: here it waits on the system clock for
// the in-memory bucket to refill.
func TestWaitOnTheInterface(t *testing.T) {
	l := memlimit.New("svc")
	if err := l.Define("fast", memlimit.Bucket{Capacity: 1, Permits: 1000, Per: time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if !l.Allow(ctx, "fast") {
		t.Fatal("first token")
	}
	var a client.Acquirer = l
	if err := client.Wait(ctx, a, "fast", 1); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if tok, _ := l.Tokens("fast"); tok >= 1 {
		t.Errorf("wait did not take the token: %v left", tok)
	}
	// A bucket that can never grant ends the wait with its error.
	if err := l.Wait(ctx, "fast", 2); !errors.Is(err, client.ErrExceedsCapacity) {
		t.Errorf("wait for more than capacity: %v", err)
	}
}

// WithObserver hears every Acquire with its arguments and answer.
func TestWithObserver(t *testing.T) {
	var seen []client.Decision
	l := memlimit.New("svc", memlimit.WithObserver(func(d client.Decision) { seen = append(seen, d) }))
	if err := l.Define("orders", memlimit.Bucket{Capacity: 1, Permits: 1, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := l.Acquire(ctx, "orders", 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Acquire(ctx, "nope", 1); err == nil {
		t.Fatal("an unknown bucket was granted")
	}
	if len(seen) != 3 {
		t.Fatalf("observer heard %d decisions; want 3", len(seen))
	}
	if d := seen[0]; d.Bucket != "orders" || d.N != 1 || !d.Result.Allowed || d.Err != nil {
		t.Errorf("first decision %+v; want orders, 1, allowed", d)
	}
	if d := seen[1]; d.Result.Allowed || d.Err != nil {
		t.Errorf("second decision %+v; want denied", d)
	}
	if d := seen[2]; d.Bucket != "nope" || d.Err == nil {
		t.Errorf("third decision %+v; want the unknown bucket's error", d)
	}
}

// TestKeysOverridesAndUnknownBuckets: memlimit answers keyed requests as
// the Redis client does: each key has its own tokens, the most specific
// override sets a key's limit, and a keyed request on a plain bucket (or a
// plain one on a keyed bucket) is an unknown bucket.
func TestKeysOverridesAndUnknownBuckets(t *testing.T) {
	clock := memlimit.NewManualClock(time.Unix(0, 0))
	l := memlimit.New("svc", memlimit.WithClock(clock))
	if err := l.Define("per-user", memlimit.Bucket{Capacity: 1, Permits: 1, Per: time.Hour, Keyed: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Define("global", memlimit.Bucket{Capacity: 10, Permits: 1, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"alice", "bob"} {
		res, err := l.AcquireAll(ctx, []client.Request{{Bucket: "per-user", Key: key, N: 1}, {Bucket: "global", N: 1}})
		if err != nil || !res.Allowed {
			t.Fatalf("%s: %+v %v, want allowed (a key of its own)", key, res, err)
		}
	}
	if res, err := l.AcquireKey(ctx, "per-user", "alice", 1); err != nil || res.Allowed || res.RetryAfter != time.Hour {
		t.Fatalf("alice again: %+v %v, want denied for an hour", res, err)
	}
	if err := l.Override("per-user", memlimit.Override{Key: "vip:", Prefix: true, Capacity: 3, Permits: 1, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := l.Override("per-user", memlimit.Override{Key: "vip:carol", Capacity: 2, Permits: 1, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if res, err := l.AcquireKey(ctx, "per-user", "vip:dave", 3); err != nil || !res.Allowed || res.Limit != 3 {
		t.Fatalf("prefix override: %+v %v", res, err)
	}
	if _, err := l.AcquireKey(ctx, "per-user", "vip:carol", 3); !errors.Is(err, client.ErrExceedsCapacity) {
		t.Fatalf("the exact override beats the prefix: %v", err)
	}
	for _, tc := range []struct {
		name string
		req  client.Request
		want error
	}{
		{"keyed request on a plain bucket", client.Request{Bucket: "global", Key: "alice", N: 1}, client.ErrUnknownBucket},
		{"plain request on a keyed bucket", client.Request{Bucket: "per-user", N: 1}, client.ErrUnknownBucket},
		{"unknown bucket", client.Request{Bucket: "nope", Key: "alice", N: 1}, client.ErrUnknownBucket},
		{"key too long", client.Request{Bucket: "per-user", Key: strings.Repeat("k", 257), N: 1}, client.ErrInvalidKey},
	} {
		if _, err := l.AcquireAll(ctx, []client.Request{tc.req}); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := l.Acquire(ctx, "per-user", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("Acquire on a keyed bucket: %v", err)
	}
	if _, err := l.AcquireKey(ctx, "per-user", "", 1); !errors.Is(err, client.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

// TestDebtWait: a bucket in debt answers the wait for its debt and then n,
// as the scripts do (docs/protocol.md, "Debt").
func TestDebtWait(t *testing.T) {
	clock := memlimit.NewManualClock(time.Unix(0, 0))
	l := memlimit.New("svc", memlimit.WithClock(clock))
	if err := l.Define("b", memlimit.Bucket{Capacity: 10, Permits: 1, Per: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if a, err := l.Charge(ctx, "b", 15); err != nil || a.Remaining != -5 {
		t.Fatalf("charge: %+v %v", a, err)
	}
	if res, err := l.Acquire(ctx, "b", 1); err != nil || res.Allowed || res.RetryAfter != 12*time.Second ||
		res.Remaining != 0 || res.ResetAfter != 30*time.Second {
		t.Fatalf("in debt: %+v %v, want denied, retry 12 s, reset 30 s", res, err)
	}
	res, err := l.AcquireAll(ctx, []client.Request{{Bucket: "b", N: 1}})
	if err != nil || res.Allowed || res.RetryAfter != 12*time.Second {
		t.Fatalf("in debt, a set: %+v %v, want retry 12 s", res, err)
	}
}

func TestDeleteOverride(t *testing.T) {
	l := memlimit.New("svc", memlimit.WithClock(memlimit.NewManualClock(time.Unix(0, 0))))
	if err := l.Define("k", memlimit.Bucket{Capacity: 1, Permits: 1, Per: time.Hour, Keyed: true}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []bool{false, true} {
		if err := l.Override("k", memlimit.Override{Key: "a", Prefix: prefix, Capacity: 5, Permits: 1, Per: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	l.DeleteOverride("k", "a", false) // the prefix override "a" still applies to "a"
	if res, err := l.AcquireKey(ctx, "k", "a", 5); err != nil || !res.Allowed || res.Limit != 5 {
		t.Fatalf("after deleting the exact override: %+v %v", res, err)
	}
	l.DeleteOverride("k", "a", true)
	if _, err := l.AcquireKey(ctx, "k", "ab", 2); !errors.Is(err, client.ErrExceedsCapacity) {
		t.Fatalf("after deleting both: %v, want the bucket's capacity", err)
	}
}

// TestQuotaBerlinMonth: a monthly quota in Europe/Berlin resets at
// 1 November 00:00 CET (23:00 UTC), the October change of offset inside
// the month, and not a second earlier; keys count apart, and an override
// is another quota for its key.
func TestQuotaBerlinMonth(t *testing.T) {
	ctx := context.Background()
	clock := memlimit.NewManualClock(time.Date(2025, 10, 31, 22, 59, 58, 0, time.UTC))
	l := memlimit.New("svc", memlimit.WithClock(clock))
	if err := l.Define("monthly", memlimit.Bucket{Capacity: 2, Period: "month", Zone: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Define("per-key", memlimit.Bucket{Capacity: 1, Period: "month", Zone: "Europe/Berlin", Keyed: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Override("per-key", memlimit.Override{Key: "vip", Capacity: 3}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		res, err := l.Acquire(ctx, "monthly", 1)
		if err != nil || res.Allowed != want || res.ResetAfter != 2*time.Second || res.Limit != 2 {
			t.Fatalf("call %d in October: %+v %v", i, res, err)
		}
	}
	if res, _ := l.AcquireKey(ctx, "per-key", "a", 1); !res.Allowed {
		t.Fatalf("key a: %+v", res)
	}
	if res, _ := l.AcquireKey(ctx, "per-key", "a", 1); res.Allowed {
		t.Fatalf("key a twice: %+v", res)
	}
	if res, _ := l.AcquireKey(ctx, "per-key", "vip", 3); !res.Allowed || res.Limit != 3 {
		t.Fatalf("key vip: %+v", res)
	}
	clock.Advance(time.Second + 999*time.Millisecond)
	if res, _ := l.Acquire(ctx, "monthly", 1); res.Allowed || res.RetryAfter != time.Millisecond {
		t.Fatalf("a millisecond before November: %+v", res)
	}
	clock.Advance(time.Millisecond)
	res, err := l.Acquire(ctx, "monthly", 2)
	if err != nil || !res.Allowed || res.ResetAfter != 30*24*time.Hour {
		t.Fatalf("1 November 00:00 CET: %+v %v, want granted, reset in 30 days", res, err)
	}
	if used, ok := l.Used("monthly"); !ok || used != 2 {
		t.Errorf("used %d %v", used, ok)
	}
	if res, _ := l.AcquireKey(ctx, "per-key", "a", 1); !res.Allowed {
		t.Fatalf("key a in November: %+v", res)
	}
	if err := l.Define("bad", memlimit.Bucket{Capacity: 1, Period: "month", Zone: "Mars/Olympus"}); err == nil {
		t.Error("an unknown time zone was accepted")
	}
	if err := l.Define("bad", memlimit.Bucket{Capacity: 1, Period: "year"}); err == nil {
		t.Error("an unknown period was accepted")
	}
}
