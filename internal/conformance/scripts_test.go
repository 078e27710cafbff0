package conformance_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// server is one Redis the conformance tests run on: the real redis-server
// of the test environment, or miniredis (the -dev Redis). Both must give
// the same answers.
type server struct {
	rdb redis.UniversalClient
	ks  redisscript.Keyspace
	// real is set for redis-server, whose Lua has the struct library
	// (the packed limit) and Redis functions.
	real bool
}

func servers(t *testing.T) map[string]func(t *testing.T) server {
	return map[string]func(t *testing.T) server{
		"redis": func(t *testing.T) server {
			rdb, prefix := testenv.Redis(t)
			return server{rdb: rdb, ks: redisscript.Keyspace{Prefix: prefix}, real: true}
		},
		"miniredis": func(t *testing.T) server {
			m := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
			t.Cleanup(func() { rdb.Close() })
			return server{rdb: rdb}
		},
	}
}

// each runs f on every server, in parallel.
func each(t *testing.T, f func(t *testing.T, s server)) {
	t.Parallel()
	for name, start := range servers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, start(t))
		})
	}
}

func (s server) nowMicros(t *testing.T) int64 {
	t.Helper()
	now, err := s.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now.UnixMicro()
}

// secondsSince is the time Redis's clock has moved on since micros, for
// bounds on what refilled while a test ran.
func (s server) secondsSince(t *testing.T, micros int64) float64 {
	t.Helper()
	return float64(s.nowMicros(t)-micros) / 1e6
}

// setState writes the state as if the last acquire left tokens at ts, in
// the form the hash keeps it (binary on redis-server, decimal on
// miniredis, which has no struct library), which is how tests make time
// pass (or go backwards) without sleeping.
func (s server) setState(t *testing.T, name string, tokens float64, ts int64) {
	t.Helper()
	ctx, key := context.Background(), s.ks.Bucket(name)
	binary, err := s.rdb.HExists(ctx, key, redisscript.FieldState).Result()
	if err != nil {
		t.Fatal(err)
	}
	if binary {
		err = s.rdb.HSet(ctx, key, redisscript.FieldState, redisscript.EncodeState(tokens, ts)).Err()
	} else {
		err = s.rdb.HSet(ctx, key, redisscript.FieldTokens, strconv.FormatFloat(tokens, 'g', 17, 64),
			redisscript.FieldTS, strconv.FormatInt(ts, 10)).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// fields is the hash of bucket name; a state in the binary form is given
// as the decimal fields too, printed as the scripts print them.
func (s server) fields(t *testing.T, name string) map[string]string {
	t.Helper()
	h, err := s.rdb.HGetAll(context.Background(), s.ks.Bucket(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, binary := h[redisscript.FieldState]; binary {
		if tokens, ts, ok := redisscript.Stored(h); ok {
			h[redisscript.FieldTokens] = strconv.FormatFloat(tokens, 'g', 17, 64)
			h[redisscript.FieldTS] = strconv.FormatInt(ts, 10)
		}
	}
	return h
}

func (s server) apply(t *testing.T, cfg redisscript.Config, force bool) redisscript.ApplyOutcome {
	t.Helper()
	out, err := redisscript.Apply(context.Background(), s.rdb, s.ks, cfg, force)
	if err != nil {
		t.Fatalf("apply %+v: %v", cfg, err)
	}
	return out
}

func (s server) acquire(t *testing.T, name, app string, n int64) redisscript.Answer {
	t.Helper()
	a, err := redisscript.Acquire(context.Background(), s.rdb, s.ks, name, app, n)
	if err != nil {
		t.Fatalf("acquire %s %s %d: %v", name, app, n, err)
	}
	return a
}

func cfg(name string, capacity, permitsMicro, period int64, apps ...string) redisscript.Config {
	return redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: capacity, PermitsMicro: permitsMicro,
		PeriodSeconds: period, Apps: apps}
}

func TestAcquireAnswers(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		// 10 tokens, 1 per second, apps "a" and "abc".
		if out := s.apply(t, cfg("orders", 10, 1_000_000, 1, "a", "abc"), false); out != redisscript.Created {
			t.Fatalf("apply: %v", out)
		}
		now := s.nowMicros(t)
		s.setState(t, "orders", 6, now+3_600_000_000) // ts in the future: no refill during the test

		tests := []struct {
			name, bucket, app, n string
			want                 redisscript.Answer
		}{
			{"allowed", "orders", "a", "4",
				redisscript.Answer{Code: redisscript.Allowed, Remaining: 2, ResetAfterMicros: 8_000_000, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"denied", "orders", "abc", "5",
				redisscript.Answer{Code: redisscript.Denied, Remaining: 2, RetryAfterMicros: 3_000_000, ResetAfterMicros: 8_000_000, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"unknown bucket", "nope", "a", "1", redisscript.Answer{Code: redisscript.UnknownBucket}},
			{"app is a prefix of an allowed app", "orders", "ab", "1",
				redisscript.Answer{Code: redisscript.AppNotAllowed, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"app is a superstring", "orders", "abcd", "1",
				redisscript.Answer{Code: redisscript.AppNotAllowed, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"app spanning two entries", "orders", "a,abc", "1",
				redisscript.Answer{Code: redisscript.AppNotAllowed, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"empty app", "orders", "", "1",
				redisscript.Answer{Code: redisscript.AppNotAllowed, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"pattern app", "orders", "*", "1",
				redisscript.Answer{Code: redisscript.AppNotAllowed, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"n exceeds capacity", "orders", "a", "11",
				redisscript.Answer{Code: redisscript.ExceedsCapacity, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
			{"n at capacity is possible later", "orders", "a", "10",
				redisscript.Answer{Code: redisscript.Denied, Remaining: 2, RetryAfterMicros: 8_000_000, ResetAfterMicros: 8_000_000, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1}},
		}
		for _, bad := range []string{"0", "-1", "1.5", "abc", "1e3", "nan", "inf", "-inf", "", " 1", "1 ", "01", "+1",
			"0x10", "1000000001", "99999999999999999999", "1000000000000000000000000"} {
			tests = append(tests, struct {
				name, bucket, app, n string
				want                 redisscript.Answer
			}{"invalid n " + strconv.Quote(bad), "orders", "a", bad, redisscript.Answer{Code: redisscript.InvalidN}})
		}
		for _, tt := range tests {
			got, err := redisscript.AcquireRaw(context.Background(), s.rdb, s.ks, tt.bucket, tt.app, tt.n)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if got != tt.want {
				t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
			}
		}
		// Invalid n on an unknown bucket is still invalid n: arguments first.
		if got, _ := redisscript.AcquireRaw(context.Background(), s.rdb, s.ks, "nope", "a", "0"); got.Code != redisscript.InvalidN {
			t.Errorf("invalid n on unknown bucket: %+v", got)
		}
		// Nothing but the allowed call changed the state.
		if h := s.fields(t, "orders"); h[redisscript.FieldTokens] != "2" {
			t.Errorf("tokens = %q, want 2", h[redisscript.FieldTokens])
		}
		// n = 1e9 is valid; here it exceeds capacity.
		if got := s.acquire(t, "orders", "a", 1_000_000_000); got.Code != redisscript.ExceedsCapacity {
			t.Errorf("n=1e9: %+v", got)
		}
		// No key besides the bucket was created.
		if n, _ := s.rdb.Exists(context.Background(), s.ks.Bucket("nope")).Result(); n != 0 {
			t.Error("acquire on an unknown bucket created its hash")
		}
	})
}

func TestAcquireRefill(t *testing.T) {
	// Rates are per minute or hour, so that a stalled test (a loaded
	// machine) only shortens each expected wait by the time it ran, which
	// Redis's clock measures, and never changes an answer.
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("fast", 100, 2_000_000, 60, "svc"), false)  // 2 per minute
		s.apply(t, cfg("half", 5, 500_000, 60, "svc"), false)      // 0.5 per minute
		s.apply(t, cfg("slow", 10, 7_000_000, 3600, "svc"), false) // 7 per hour
		// waits checks a denial whose wait, when the state was written at
		// now, was want µs: refill since then shortens it by up to the time
		// that has passed.
		waits := func(what string, a redisscript.Answer, now, want int64) {
			t.Helper()
			ran := int64(s.secondsSince(t, now)*1e6) + 1
			if a.Code != redisscript.Denied || a.RetryAfterMicros > want || a.RetryAfterMicros < want-ran {
				t.Fatalf("%s: %+v, want denied with a wait from %d to %d µs", what, a, want-ran, want)
			}
		}

		// 150 s at 2/min refill 5 tokens onto 0.
		now := s.nowMicros(t)
		s.setState(t, "fast", 0, now-150_000_000)
		if a := s.acquire(t, "fast", "svc", 5); a.Code != redisscript.Allowed {
			t.Fatalf("after 150 s at 2/min: %+v", a)
		}
		waits("bucket should be empty", s.acquire(t, "fast", "svc", 1), now, 30_000_000)

		// Fractions are kept: 60 s at 0.5/min is half a token, not zero and not one.
		now = s.nowMicros(t)
		s.setState(t, "half", 0, now-60_000_000)
		waits("half a token", s.acquire(t, "half", "svc", 1), now, 60_000_000)
		// What is left is what refilled while the test ran: at most the
		// time since now was read, at 0.5/min.
		now = s.nowMicros(t)
		s.setState(t, "half", 0.5, now-60_000_000)
		if a := s.acquire(t, "half", "svc", 1); a.Code != redisscript.Allowed {
			t.Fatalf("0.5 + 0.5 tokens: %+v", a)
		}
		most := 0.5 / 60 * s.secondsSince(t, now)
		if tok, _ := strconv.ParseFloat(s.fields(t, "half")[redisscript.FieldTokens], 64); tok < 0 || tok > most {
			t.Fatalf("tokens after taking the whole one: %v, want 0 to %v", tok, most)
		}

		// 7/h: 3600/7 s for one token; 480 s leave 1/15 of one to wait for,
		// 34,285,714.3 µs, rounded up.
		now = s.nowMicros(t)
		s.setState(t, "slow", 0, now-480_000_000)
		waits("7/h after 480 s", s.acquire(t, "slow", "svc", 1), now, 34_285_715)

		// Never above capacity, however long it has been.
		now = s.nowMicros(t)
		s.setState(t, "fast", 0, now-3_600_000_000)
		if a := s.acquire(t, "fast", "svc", 1); a.Code != redisscript.Allowed || a.Remaining != 99 {
			t.Fatalf("after an hour: %+v", a)
		}
	})
}

func TestAcquireClockBackwards(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("b", 10, 1_000_000, 1, "svc"), false)
		future := s.nowMicros(t) + 10_000_000
		s.setState(t, "b", 3, future) // the last acquire saw a clock 10 s ahead
		if a := s.acquire(t, "b", "svc", 3); a.Code != redisscript.Allowed || a.Remaining != 0 {
			t.Fatalf("acquire with ts in the future: %+v", a)
		}
		h := s.fields(t, "b")
		if h[redisscript.FieldTS] != strconv.FormatInt(future, 10) {
			t.Errorf("ts moved backwards: %s, want %d", h[redisscript.FieldTS], future)
		}
		if h[redisscript.FieldTokens] != "0" {
			t.Errorf("tokens = %s, want 0 (no refill for negative time)", h[redisscript.FieldTokens])
		}
		if a := s.acquire(t, "b", "svc", 1); a.Code != redisscript.Denied || a.RetryAfterMicros != 1_000_000 {
			t.Fatalf("next acquire: %+v", a)
		}
	})
}

func TestAcquireDenyWritesNothing(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("d", 5, 1_000_000, 60, "svc"), false)
		if a := s.acquire(t, "d", "svc", 5); a.Code != redisscript.Allowed {
			t.Fatal(a)
		}
		before := s.fields(t, "d")
		if a := s.acquire(t, "d", "svc", 2); a.Code != redisscript.Denied {
			t.Fatal(a)
		}
		after := s.fields(t, "d")
		if before[redisscript.FieldTS] != after[redisscript.FieldTS] || before[redisscript.FieldTokens] != after[redisscript.FieldTokens] {
			t.Errorf("a denial wrote state: %v -> %v", before, after)
		}
	})
}

func TestAcquireLargeNumbers(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("big", 1_000_000_000, redisscript.MaxPermitsMicro, 1, "svc"), false)
		a := s.acquire(t, "big", "svc", 1)
		if a.Code != redisscript.Allowed || a.Remaining != 999_999_999 || a.Capacity != 1_000_000_000 || a.PermitsMicro != redisscript.MaxPermitsMicro {
			t.Fatalf("%+v", a)
		}
		if tok := s.fields(t, "big")[redisscript.FieldTokens]; tok != "999999999" {
			t.Errorf("tokens written as %q, want 999999999 (no exponent, no rounding)", tok)
		}
		// The slowest rate: a millionth of a permit per year. Durations are capped, never garbage.
		s.apply(t, redisscript.Config{Name: "glacial", ID: 1, Version: 1, Capacity: 1_000_000_000, PermitsMicro: 1,
			PeriodSeconds: redisscript.MaxPeriodSeconds, Apps: []string{"svc"}}, false)
		s.setState(t, "glacial", 0, s.nowMicros(t))
		a = s.acquire(t, "glacial", "svc", 1_000_000_000)
		if a.Code != redisscript.Denied || a.RetryAfterMicros != 1_000_000_000_000_000 || a.ResetAfterMicros != 1_000_000_000_000_000 {
			t.Fatalf("glacial: %+v", a)
		}
	})
}

func TestApplyRules(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		c := cfg("x", 100, 10_000_000, 1, "svc") // 100 tokens, 10/s
		if out := s.apply(t, c, false); out != redisscript.Created {
			t.Fatalf("first apply: %v", out)
		}
		if h := s.fields(t, "x"); h[redisscript.FieldTokens] != "100" || h[redisscript.FieldApps] != ",svc," || h[redisscript.FieldPermits] != "10" {
			t.Fatalf("a new bucket starts full: %v", h)
		}
		if out := s.apply(t, c, false); out != redisscript.Unchanged {
			t.Fatalf("re-apply: %v", out)
		}

		// Version 2 lowers the rate; tokens accrued at the old rate are kept.
		now := s.nowMicros(t)
		s.setState(t, "x", 0, now-1_000_000) // 1 s at 10/s = 10 tokens
		c2 := c
		c2.Version, c2.PermitsMicro = 2, 1_000_000
		if out := s.apply(t, c2, false); out != redisscript.Updated {
			t.Fatalf("version 2: %v", out)
		}
		st, err := redisscript.Read(ctx, s.rdb, s.ks, "x")
		if err != nil {
			t.Fatal(err)
		}
		// 10 tokens, and at 10/s whatever accrued while the test ran.
		most := 10 + 10*s.secondsSince(t, now)
		if st.Stored < 10 || st.Stored > most || st.Config.PermitsMicro != 1_000_000 || st.Config.Version != 2 {
			t.Fatalf("after rate change: %+v", st)
		}

		// Version 3 shrinks capacity: tokens are clamped.
		s.setState(t, "x", 80, s.nowMicros(t))
		c3 := c2
		c3.Version, c3.Capacity = 3, 20
		if out := s.apply(t, c3, false); out != redisscript.Updated {
			t.Fatalf("version 3: %v", out)
		}
		if tok := s.fields(t, "x")[redisscript.FieldTokens]; tok != "20" {
			t.Fatalf("tokens after capacity 100 -> 20: %s", tok)
		}
		// Growing capacity does not add tokens.
		c4 := c3
		c4.Version, c4.Capacity = 4, 1000
		s.apply(t, c4, false)
		if st, _ := redisscript.Read(ctx, s.rdb, s.ks, "x"); st.Stored < 20 || st.Stored > 21 {
			t.Fatalf("tokens after capacity 20 -> 1000: %v", st.Stored)
		}

		// An older version is stale and changes nothing.
		if out := s.apply(t, c3, false); out != redisscript.Stale {
			t.Fatalf("older version: %v", out)
		}
		if h := s.fields(t, "x"); h[redisscript.FieldVersion] != "4" || h[redisscript.FieldCapacity] != "1000" {
			t.Fatalf("a stale apply wrote: %v", h)
		}
		// Force writes it (the reconcile knows better), keeping tokens.
		if out := s.apply(t, c3, true); out != redisscript.Updated {
			t.Fatalf("forced: %v", out)
		}
		if h := s.fields(t, "x"); h[redisscript.FieldVersion] != "3" || h[redisscript.FieldCapacity] != "20" {
			t.Fatalf("forced apply: %v", h)
		}

		// Delete; stale events of that incarnation cannot resurrect it.
		deleted, err := redisscript.Delete(ctx, s.rdb, s.ks, "x", 1, 5)
		if err != nil || !deleted {
			t.Fatalf("delete: %v %v", deleted, err)
		}
		if n, _ := s.rdb.Exists(ctx, s.ks.Bucket("x")).Result(); n != 0 {
			t.Fatal("hash survived delete")
		}
		ttl, _ := s.rdb.TTL(ctx, s.ks.Tombstone("x")).Result()
		if ttl < 6*24*time.Hour || ttl > 7*24*time.Hour {
			t.Fatalf("tombstone ttl %v", ttl)
		}
		for _, v := range []int64{1, 4, 9} {
			stale := c
			stale.Version = v
			if out := s.apply(t, stale, false); out != redisscript.Tombstoned {
				t.Fatalf("apply id 1 version %d after delete: %v", v, out)
			}
			if out := s.apply(t, stale, true); out != redisscript.Tombstoned {
				t.Fatalf("forced apply after delete: %v", out)
			}
		}
		if st, _ := redisscript.Read(ctx, s.rdb, s.ks, "x"); st.Exists {
			t.Fatalf("resurrected: %+v", st)
		}

		// A new incarnation (larger id) is created and starts full.
		reborn := cfg("x", 50, 1_000_000, 1, "svc")
		reborn.ID = 2
		if out := s.apply(t, reborn, false); out != redisscript.Created {
			t.Fatalf("new incarnation: %v", out)
		}
		if tok := s.fields(t, "x")[redisscript.FieldTokens]; tok != "50" {
			t.Fatalf("new incarnation tokens %s", tok)
		}
		// A late delete of the old incarnation leaves the new one alone but
		// keeps the larger tombstone.
		if deleted, err := redisscript.Delete(ctx, s.rdb, s.ks, "x", 1, 9); err != nil || deleted {
			t.Fatalf("late delete of id 1: %v %v", deleted, err)
		}
		if n, _ := s.rdb.Exists(ctx, s.ks.Bucket("x")).Result(); n != 1 {
			t.Fatal("late delete removed the new incarnation")
		}
		// The old incarnation's hash replaced by the new one: a stale event of id 1 is stale.
		if out := s.apply(t, c4, false); out != redisscript.Tombstoned {
			t.Fatalf("id 1 after id 2 created: %v", out)
		}
		// A hash holding an older incarnation is replaced, starting full.
		s.rdb.Del(ctx, s.ks.Tombstone("y"))
		old := cfg("y", 10, 1_000_000, 1, "svc")
		s.apply(t, old, false)
		s.setState(t, "y", 0, s.nowMicros(t))
		newer := old
		newer.ID, newer.Capacity = 7, 30
		if out := s.apply(t, newer, false); out != redisscript.Created {
			t.Fatalf("newer id over older hash: %v", out)
		}
		if tok := s.fields(t, "y")[redisscript.FieldTokens]; tok != "30" {
			t.Fatalf("newer incarnation starts full: %s", tok)
		}
		if out := s.apply(t, old, false); out != redisscript.Stale {
			t.Fatalf("older id over newer hash: %v", out)
		}
	})
}

func TestApplyRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	good := cfg("ok", 1, 1, 1, "svc")
	bad := []func(*redisscript.Config){
		func(c *redisscript.Config) { c.Name = "Bad Name" },
		func(c *redisscript.Config) { c.Name = "" },
		func(c *redisscript.Config) { c.ID = 0 },
		func(c *redisscript.Config) { c.ID = redisscript.MaxID + 1 },
		func(c *redisscript.Config) { c.Version = -1 },
		func(c *redisscript.Config) { c.Version = redisscript.MaxID + 1 },
		func(c *redisscript.Config) { c.Capacity = 0 },
		func(c *redisscript.Config) { c.Capacity = redisscript.MaxCapacity + 1 },
		func(c *redisscript.Config) { c.PermitsMicro = 0 },
		func(c *redisscript.Config) { c.PermitsMicro = redisscript.MaxPermitsMicro + 1 },
		func(c *redisscript.Config) { c.PeriodSeconds = 0 },
		func(c *redisscript.Config) { c.PeriodSeconds = redisscript.MaxPeriodSeconds + 1 },
		func(c *redisscript.Config) { c.Apps = nil },
		func(c *redisscript.Config) { c.Apps = []string{"a,b"} },
		func(c *redisscript.Config) { c.Apps = []string{""} },
	}
	for i, f := range bad {
		c := good
		f(&c)
		if _, err := redisscript.Apply(context.Background(), rdb, redisscript.Keyspace{}, c, false); !errors.Is(err, redisscript.ErrInvalidConfig) {
			t.Errorf("case %d (%+v): err = %v", i, c, err)
		}
	}
	for _, iv := range [][2]int64{{-1, 0}, {redisscript.MaxID + 1, 0}, {1, -1}, {1, redisscript.MaxID + 1}} {
		if _, err := redisscript.Delete(context.Background(), rdb, redisscript.Keyspace{}, "ok", iv[0], iv[1]); !errors.Is(err, redisscript.ErrInvalidConfig) {
			t.Errorf("delete id %d version %d: err = %v", iv[0], iv[1], err)
		}
	}
	if len(m.Keys()) != 0 {
		t.Errorf("invalid configs wrote keys: %v", m.Keys())
	}
	if _, err := redisscript.Apply(context.Background(), rdb, redisscript.Keyspace{}, good, false); err != nil {
		t.Fatal(err)
	}
	if !m.Exists("sluice:{ok}") {
		t.Errorf("zero keyspace key: %v", m.Keys())
	}
}

func TestRead(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		st, err := redisscript.Read(ctx, s.rdb, s.ks, "absent")
		if err != nil || st.Exists {
			t.Fatalf("absent: %+v %v", st, err)
		}
		c := cfg("r", 10, 500_000, 1, "a", "b")
		c.ID, c.Version = 42, 3
		s.apply(t, c, false)
		now := s.nowMicros(t)
		s.setState(t, "r", 1, now-2_000_000) // +1 token at 0.5/s
		st, err = redisscript.Read(ctx, s.rdb, s.ks, "r")
		if err != nil || !st.Exists {
			t.Fatalf("read: %+v %v", st, err)
		}
		if st.Config.Name != "r" || st.Config.ID != 42 || st.Config.Version != 3 || st.Config.Capacity != 10 ||
			st.Config.PermitsMicro != 500_000 || st.Config.PeriodSeconds != 1 || strings.Join(st.Config.Apps, ",") != "a,b" {
			t.Errorf("config %+v", st.Config)
		}
		// Tokens: 1 stored plus 2 s and however long the test took, at 0.5/s.
		if st.Stored != 1 || st.Tokens < 2-1e-9 || st.Tokens > 2+0.5*float64(st.Now.UnixMicro()-now)/1e6+1e-9 ||
			st.Refilled.UnixMicro() != now-2_000_000 || st.Now.UnixMicro() < now {
			t.Errorf("state %+v", st)
		}
	})
}

// TestPatternMatchesOnlyHashes scans a real server with Pattern.
func TestPatternMatchesOnlyHashes(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		s.apply(t, cfg("p1", 1, 1, 1, "svc"), false)
		s.apply(t, cfg("p2", 1, 1, 1, "svc"), false)
		if _, err := redisscript.Delete(ctx, s.rdb, s.ks, "p2", 1, 2); err != nil {
			t.Fatal(err)
		}
		s.apply(t, cfg("p3", 1, 1, 1, "svc"), false)
		keys, _, err := s.rdb.Scan(ctx, 0, s.ks.Pattern(), 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, k := range keys {
			n, ok := s.ks.NameOf(k)
			if !ok {
				t.Errorf("pattern matched %q", k)
			}
			names = append(names, n)
		}
		if len(names) != 2 {
			t.Errorf("scan found %v", keys)
		}
	})
}

// FuzzAcquireArgs sends arbitrary app and n arguments to the acquire
// script on miniredis: it must always answer one of its codes, never an
// error, and accept n only in its canonical form.
func FuzzAcquireArgs(f *testing.F) {
	for _, s := range [][2]string{{"svc", "1"}, {"svc", "1.5"}, {"", "0"}, {"s,vc", "1e3"}, {"*", "-1"},
		{"svc", "1000000000"}, {"svc\x00", "nan"}, {",svc,", "007"}} {
		f.Add(s[0], s[1])
	}
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	if _, err := redisscript.Apply(context.Background(), rdb, redisscript.Keyspace{}, cfg("f", 1_000_000_000, 1_000_000, 1, "svc"), false); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, app, n string) {
		a, err := redisscript.AcquireRaw(context.Background(), rdb, redisscript.Keyspace{}, "f", app, n)
		if err != nil {
			t.Fatalf("app %q n %q: %v", app, n, err)
		}
		v, perr := strconv.ParseInt(n, 10, 64)
		canonical := perr == nil && v >= 1 && v <= redisscript.MaxN && strconv.FormatInt(v, 10) == n
		if (a.Code == redisscript.InvalidN) == canonical {
			t.Fatalf("app %q n %q: %+v", app, n, a)
		}
		if canonical && app == "svc" && a.Code != redisscript.Allowed && a.Code != redisscript.Denied {
			t.Fatalf("app %q n %q: %+v", app, n, a)
		}
		if canonical && app != "svc" && a.Code != redisscript.AppNotAllowed {
			t.Fatalf("app %q n %q matched: %+v", app, n, a)
		}
	})
}

func (s server) lease(t *testing.T, name, app string, want, back int64) redisscript.LeaseAnswer {
	t.Helper()
	a, err := redisscript.Lease(context.Background(), s.rdb, s.ks, name, app, want, back)
	if err != nil {
		t.Fatalf("lease %s %s %d %d: %v", name, app, want, back, err)
	}
	return a
}

// TestLease: a lease takes up to the tokens asked for from the same bucket
// as acquire, gives returned tokens back (never above capacity), and
// grants nothing to a bucket not in lease mode.
func TestLease(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		c := cfg("leased", 100, 1, 86400, "svc") // refills 1 token a day: none while the test runs
		c.LeaseMillis = 100
		s.apply(t, c, false)
		a := s.lease(t, "leased", "svc", 30, 0)
		if a.Code != redisscript.Allowed || a.Granted != 30 || a.Remaining != 70 || a.LeaseMillis != 100 || a.Capacity != 100 {
			t.Fatalf("first lease: %+v", a)
		}
		if got := s.acquire(t, "leased", "svc", 70); got.Code != redisscript.Allowed || got.Remaining != 0 {
			t.Fatalf("acquire after the lease: %+v", got)
		}
		a = s.lease(t, "leased", "svc", 10, 0)
		if a.Code != redisscript.Denied || a.Granted != 0 || a.RetryAfterMicros <= 0 {
			t.Fatalf("lease of an empty bucket: %+v", a)
		}
		// Give back 20 of the 30 and ask for 50: the 20 are all there is.
		a = s.lease(t, "leased", "svc", 50, 20)
		if a.Code != redisscript.Allowed || a.Granted != 20 || a.Remaining != 0 {
			t.Fatalf("lease with 20 given back: %+v", a)
		}
		// Giving back more than fits is cut at capacity.
		a = s.lease(t, "leased", "svc", 0, 500)
		if a.Code != redisscript.Denied || a.Granted != 0 || a.Remaining != 100 || a.RetryAfterMicros != 0 {
			t.Fatalf("give back only: %+v", a)
		}
		// Asking for more than capacity is cut to it.
		if a = s.lease(t, "leased", "svc", 1000, 0); a.Granted != 100 {
			t.Fatalf("lease above capacity: %+v", a)
		}
		if a = s.lease(t, "leased", "other", 1, 0); a.Code != redisscript.AppNotAllowed {
			t.Fatalf("lease by another app: %+v", a)
		}
		if a = s.lease(t, "nope", "svc", 1, 0); a.Code != redisscript.UnknownBucket {
			t.Fatalf("lease of an unknown bucket: %+v", a)
		}
		for _, bad := range [][2]string{{"-1", "0"}, {"1", "1.5"}, {"01", "0"}, {"1000000001", "0"}, {"1e3", "0"}} {
			v, err := s.rdb.EvalSha(context.Background(), redisscript.LeaseScript.SHA(), []string{s.ks.Bucket("leased")},
				"svc", bad[0], bad[1]).Int64Slice()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
				v, err = s.rdb.Eval(context.Background(), redisscript.LeaseScript.Source(), []string{s.ks.Bucket("leased")},
					"svc", bad[0], bad[1]).Int64Slice()
			}
			if err != nil || len(v) != 8 || v[0] != int64(redisscript.InvalidN) {
				t.Errorf("lease want %q back %q: %v %v, want invalid", bad[0], bad[1], v, err)
			}
		}
		// Lease mode off: returned tokens are taken back, nothing is granted.
		c.Version, c.LeaseMillis = 2, 0
		s.apply(t, c, false)
		if a = s.lease(t, "leased", "svc", 10, 0); a.Code != redisscript.Denied || a.Granted != 0 || a.LeaseMillis != 0 {
			t.Fatalf("lease of a bucket not in lease mode: %+v", a)
		}
		// Acquire with protocol 2 reports the lease time.
		c.Version, c.LeaseMillis = 3, 250
		s.apply(t, c, false)
		v, err := s.rdb.Eval(context.Background(), redisscript.AcquireScript.Source(), []string{s.ks.Bucket("leased")}, "svc", "1", "2").Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := redisscript.AnswerOf(v); err != nil || got.LeaseMillis != 250 {
			t.Fatalf("acquire, protocol 2: %+v %v", got, err)
		}
		if got := s.acquire(t, "leased", "svc", 1); got.LeaseMillis != 0 {
			t.Fatalf("acquire, protocol 1, must not carry the lease: %+v", got)
		}
	})
}
