package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// TestDenialCacheAnswersAsRedis: after a denial, the cache's answer to a
// call of any size equals Redis's answer to the same call (the acquire
// script run directly, which writes nothing when it denies): the same
// remaining and limit, retry-after and reset-after within the time the
// test ran (the cache counts the refill from when the denied call was
// sent, Redis from when it ran; the refill is one token an hour, so no
// stall moves a whole token). Calls the refilled level may cover are
// left to Redis.
func TestDenialCacheAnswersAsRedis(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "hourly", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1_000_000,
		PeriodSeconds: 3600, Apps: []string{"svc"}}
	if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	// Entries kept an hour: a stalled test must not outlive them.
	l, err := New(rdb, "svc", WithKeyPrefix(prefix), WithTimeout(5*time.Second), WithDenialCache(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := ks.Bucket("hourly")
	fromRedis := func(n int64) Result {
		t.Helper()
		v, err := redisscript.AcquireScript.Run(ctx, rdb, []string{key}, "svc", n, "2").Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		a, err := redisscript.AnswerOf(v)
		if err != nil || a.Code != redisscript.Denied {
			t.Fatalf("redis answer to %d: %+v %v, want a denial", n, a, err)
		}
		res, _ := resultOf(a)
		return res
	}
	within := func(what string, cached, redis, bound time.Duration) {
		t.Helper()
		if d := (cached - redis).Abs(); d > bound+2*time.Microsecond {
			t.Errorf("%s: cache %v, redis %v: %v apart, more than the %v the test ran", what, cached, redis, d, bound)
		}
	}
	// Two denials: 3 tokens left (asked 5), then none (asked 1). The
	// second comes from the cache: the entry of the first counts the 3
	// tokens granted since.
	start := time.Now()
	for i, step := range []struct{ take, ask, left int64 }{{7, 5, 3}, {3, 1, 0}} {
		if res, err := l.Acquire(ctx, "hourly", step.take); err != nil || !res.Allowed || res.Remaining != step.left {
			t.Fatalf("take %d: %+v %v", step.take, res, err)
		}
		before := l.Stats().CachedDenials
		if res, err := l.Acquire(ctx, "hourly", step.ask); err != nil || res.Allowed {
			t.Fatalf("ask %d: %+v %v, want denied", step.ask, res, err)
		}
		if fromCache := l.Stats().CachedDenials != before; fromCache != (i == 1) {
			t.Fatalf("step %d: denial from the cache %v", i, fromCache)
		}
		for n := int64(1); n <= 10; n++ {
			cached, ok, cl := l.denied.answer(key, n, int64(l.now()))
			if n <= step.left {
				if ok || cl.e == nil {
					t.Errorf("%d left: the cache denied %d or did not claim it: %+v", step.left, n, cached)
				}
				l.denied.release(key, cl)
				continue
			}
			if !ok {
				t.Fatalf("%d left: the cache did not answer %d", step.left, n)
			}
			redis := fromRedis(n)
			elapsed := time.Since(start)
			what := fmt.Sprintf("%d left, asked %d", step.left, n)
			if cached.Allowed || cached.Remaining != redis.Remaining || cached.Limit != redis.Limit || cached.Fallback ||
				cached.WouldDeny {
				t.Errorf("%s: cache %+v, redis %+v", what, cached, redis)
			}
			within(what+", retry-after", cached.RetryAfter, redis.RetryAfter, elapsed)
			within(what+", reset-after", cached.ResetAfter, redis.ResetAfter, elapsed)
			// Through the Limiter: the same answer, without a round trip.
			before := l.Stats().CachedDenials
			res, err := l.Acquire(ctx, "hourly", n)
			if err != nil || res.Allowed || res.Remaining != redis.Remaining || l.Stats().CachedDenials != before+1 {
				t.Errorf("%s: Acquire %+v %v (cached %d, before %d)", what, res, err, l.Stats().CachedDenials, before)
			}
			within(what+", Acquire's retry-after", res.RetryAfter, redis.RetryAfter, time.Since(start))
		}
	}
	// A refund gives tokens back: the next call goes to Redis.
	if _, err := l.Refund(ctx, "hourly", 2); err != nil {
		t.Fatal(err)
	}
	before := l.Stats().CachedDenials
	if res, err := l.Acquire(ctx, "hourly", 2); err != nil || !res.Allowed || l.Stats().CachedDenials != before {
		t.Fatalf("after a refund of 2: %+v %v (cached %d, before %d)", res, err, l.Stats().CachedDenials, before)
	}
}

// TestDenialEntry: an entry denies while the refilled level, less the
// tokens claimed, is below the call, never past the cache's time, and not
// a call larger than the capacity; claims are taken by grants and given
// back otherwise.
func TestDenialEntry(t *testing.T) {
	ms := int64(time.Millisecond)
	// Capacity 4, 2 tokens a second; a call of 2 denied at 1000 ms with
	// 500 ms to wait: the level was 1 then.
	denied := redisscript.Answer{Code: redisscript.Denied, Remaining: 1, RetryAfterMicros: 500_000,
		ResetAfterMicros: 1_500_000, Capacity: 4, PermitsMicro: 2_000_000, PeriodSeconds: 1}
	for _, c := range []struct {
		maxAge, at int64
		n          int64
		deny       bool
		remaining  int64
		retry      time.Duration
	}{
		{maxAge: 1000 * ms, at: 1000 * ms, n: 2, deny: true, remaining: 1, retry: 500 * time.Millisecond},
		{maxAge: 1000 * ms, at: 1250 * ms, n: 2, deny: true, remaining: 1, retry: 250 * time.Millisecond},
		{maxAge: 1000 * ms, at: 1250 * ms, n: 1, deny: false}, // 1.5 tokens may cover it
		{maxAge: 1000 * ms, at: 1250 * ms, n: 4, deny: true, remaining: 1, retry: 1250 * time.Millisecond},
		{maxAge: 1000 * ms, at: 1499 * ms, n: 2, deny: true, remaining: 1, retry: time.Millisecond},
		{maxAge: 1000 * ms, at: 1500 * ms, n: 2, deny: false},
		{maxAge: 1000 * ms, at: 1500 * ms, n: 4, deny: true, remaining: 2, retry: time.Second},
		{maxAge: 1000 * ms, at: 1999 * ms, n: 4, deny: true, remaining: 2, retry: 500999 * time.Microsecond},
		{maxAge: 1000 * ms, at: 2000 * ms, n: 4, deny: false}, // past the cache's time
		{maxAge: 100 * ms, at: 1099 * ms, n: 2, deny: true, remaining: 1, retry: 401 * time.Millisecond},
		{maxAge: 100 * ms, at: 1100 * ms, n: 2, deny: false},
		{maxAge: 1000 * ms, at: 1000 * ms, n: 5, deny: false}, // over the capacity: Redis's to say
		{maxAge: 0, at: 1000 * ms, n: 2, deny: false},         // cache off
	} {
		var d denials
		d.maxAge = c.maxAge
		d.learn("k", 2, 1000*ms, claim{}, denied)
		res, ok, _ := d.answer("k", c.n, c.at)
		if ok != c.deny {
			t.Errorf("%+v: answered %v (%+v)", c, ok, res)
			continue
		}
		// Within the microsecond the entry keeps as slack.
		if ok && (res.Allowed || res.Remaining != c.remaining || res.Limit != 4 ||
			(res.RetryAfter-c.retry).Abs() > time.Microsecond) {
			t.Errorf("%+v: %+v", c, res)
		}
	}

	// Claims: at 1500 ms the bucket holds at most 2 tokens: two calls of 1
	// go to Redis, the third is denied while they are out.
	var d denials
	d.maxAge = int64(time.Second)
	d.learn("k", 2, 1000*ms, claim{}, denied)
	at := 1500 * ms
	_, ok1, c1 := d.answer("k", 1, at)
	_, ok2, c2 := d.answer("k", 1, at)
	res, ok3, _ := d.answer("k", 1, at)
	if ok1 || ok2 || c1.e == nil || c2.e == nil || !ok3 || res.Remaining != 0 {
		t.Fatalf("two calls of 1 on 2 tokens: denied %v %v, third denied %v (%+v)", ok1, ok2, ok3, res)
	}
	granted := redisscript.Answer{Code: redisscript.Allowed, Remaining: 1, Capacity: 4, PermitsMicro: 2_000_000, PeriodSeconds: 1}
	d.learn("k", 1, at, c1, granted) // taken
	d.release("k", c2)               // no answer: given back
	if _, ok, c := d.answer("k", 1, at); ok || c.e == nil {
		t.Fatalf("one token left after one grant and one release: denied")
	}
	if res, ok, _ := d.answer("k", 2, at); !ok || res.Remaining != 0 {
		t.Fatalf("a call of 2 on the one token left, one claimed: %v %+v", ok, res)
	}

	// Shadow and lease-mode denials are not kept; a grant with another
	// config drops the entry.
	d = denials{}
	d.maxAge = int64(time.Second)
	for _, a := range []redisscript.Answer{
		{Code: redisscript.WouldDeny, RetryAfterMicros: 500_000, Capacity: 4, PermitsMicro: 2_000_000, PeriodSeconds: 1},
		{Code: redisscript.Denied, RetryAfterMicros: 500_000, Capacity: 4, PermitsMicro: 2_000_000, PeriodSeconds: 1,
			LeaseMillis: 100},
	} {
		d.learn("k", 2, 0, claim{}, a)
		if res, ok, _ := d.answer("k", 2, 1); ok || d.n.Load() != 0 {
			t.Errorf("code %v, lease %d ms: cached (%+v)", a.Code, a.LeaseMillis, res)
		}
	}
	d.learn("k", 2, 0, claim{}, denied)
	d.learn("k", 1, 1, claim{}, redisscript.Answer{Code: redisscript.Allowed, Capacity: 8, PermitsMicro: 2_000_000, PeriodSeconds: 1})
	if _, ok, _ := d.answer("k", 2, 2); ok || d.n.Load() != 0 {
		t.Errorf("a grant with a new capacity left the denial cached")
	}
}

// TestDenialCacheBounded: the cache keeps at most maxDenials entries, and
// makes room by dropping expired ones.
func TestDenialCacheBounded(t *testing.T) {
	var d denials
	d.maxAge = int64(time.Second)
	denied := redisscript.Answer{Code: redisscript.Denied, RetryAfterMicros: 500_000, Capacity: 4,
		PermitsMicro: 2_000_000, PeriodSeconds: 1}
	for i := range 2 * maxDenials {
		d.learn(fmt.Sprint("k", i), 2, 0, claim{}, denied)
	}
	if n := d.n.Load(); n > maxDenials {
		t.Fatalf("%d entries, more than %d", n, maxDenials)
	}
	// Every entry expired at 1 s: new ones take their place.
	later := int64(1100 * time.Millisecond)
	kept := 0
	for i := range maxDenials {
		k := fmt.Sprint("new", i)
		d.learn(k, 2, later, claim{}, denied)
		if _, ok, _ := d.answer(k, 2, later); ok {
			kept++
		}
	}
	if kept < maxDenials/2 {
		t.Errorf("%d of %d new denials kept after the old ones expired", kept, maxDenials)
	}
	if n := d.n.Load(); n > maxDenials {
		t.Fatalf("%d entries, more than %d", n, maxDenials)
	}
}
