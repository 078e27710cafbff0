package conformance_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

func (s server) applyKeyed(t *testing.T, c redisscript.Config, force bool) redisscript.ApplyOutcome {
	t.Helper()
	out, err := redisscript.ApplyKeyed(context.Background(), s.rdb, s.ks, c, force)
	if err != nil {
		t.Fatalf("apply keyed %+v: %v", c, err)
	}
	return out
}

func (s server) acquireKey(t *testing.T, name, key, app string, n int64) redisscript.KeyedAnswer {
	t.Helper()
	a, err := redisscript.AcquireKey(context.Background(), s.rdb, s.ks, name, key, app, n)
	if err != nil {
		t.Fatalf("acquire %s[%q] %s %d: %v", name, key, app, n, err)
	}
	return a
}

func (s server) override(t *testing.T, o redisscript.Override) redisscript.OverrideOutcome {
	t.Helper()
	out, err := redisscript.ApplyOverride(context.Background(), s.rdb, s.ks, o, false)
	if err != nil {
		t.Fatalf("apply override %+v: %v", o, err)
	}
	return out
}

func (s server) deleteOverride(t *testing.T, o redisscript.Override) redisscript.OverrideOutcome {
	t.Helper()
	out, err := redisscript.DeleteOverride(context.Background(), s.rdb, s.ks, o)
	if err != nil {
		t.Fatalf("delete override %+v: %v", o, err)
	}
	return out
}

func ov(id, version int64, match, key string, capacity int64) redisscript.Override {
	return redisscript.Override{Bucket: "api", BucketID: 1, ID: id, Version: version, Match: match, Key: key,
		Capacity: capacity, PermitsMicro: 1_000_000, PeriodSeconds: 3600}
}

func TestKeyedAcquireAnswers(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		// 3 tokens per key, 1 per hour: nothing refills during the test.
		if out := s.applyKeyed(t, cfg("api", 3, 1_000_000, 3600, "a"), false); out != redisscript.Created {
			t.Fatalf("apply: %v", out)
		}
		for i := int64(2); i >= 0; i-- {
			if a := s.acquireKey(t, "api", "alice", "a", 1); a.Code != redisscript.Allowed || a.Remaining != i || a.Capacity != 3 {
				t.Fatalf("take: %+v; want allowed with %d left", a, i)
			}
		}
		a := s.acquireKey(t, "api", "alice", "a", 1)
		if a.Code != redisscript.Denied || a.RetryAfterMicros < 3_599_000_000 || a.RetryAfterMicros > 3_600_000_000 {
			t.Fatalf("empty key: %+v; want denied, retry in an hour", a)
		}
		// Another key has its own tokens.
		if a := s.acquireKey(t, "api", "bob", "a", 3); a.Code != redisscript.Allowed || a.Remaining != 0 {
			t.Fatalf("bob: %+v", a)
		}
		// The state expires when the key would be full again: 3 tokens
		// taken at 1 per hour is 3 hours, and a spread of at most a minute.
		k := s.ks.Keyed("api", "alice")
		ttl, err := s.rdb.PTTL(ctx, k.State).Result()
		if err != nil || ttl < 3*time.Hour-time.Minute || ttl > 3*time.Hour+time.Minute {
			t.Fatalf("PTTL = %v, %v; want about 3h", ttl, err)
		}
		// An expired key starts full.
		if err := s.rdb.Del(ctx, k.State).Err(); err != nil {
			t.Fatal(err)
		}
		if a := s.acquireKey(t, "api", "alice", "a", 3); a.Code != redisscript.Allowed {
			t.Fatalf("after expiry: %+v; want the full 3", a)
		}

		for _, tc := range []struct {
			name, bucket, key, app string
			n                      int64
			want                   redisscript.Code
		}{
			{"unknown bucket", "nope", "k", "a", 1, redisscript.UnknownBucket},
			{"app not allowed", "api", "k", "b", 1, redisscript.AppNotAllowed},
			{"app substring", "api", "k", ",a", 1, redisscript.AppNotAllowed},
			{"over capacity", "api", "k", "a", 4, redisscript.ExceedsCapacity},
			{"invalid n", "api", "k", "a", 0, redisscript.InvalidN},
			{"empty key", "api", "", "a", 1, redisscript.InvalidKey},
			{"long key", "api", strings.Repeat("k", 257), "a", 1, redisscript.InvalidKey},
		} {
			a, err := redisscript.AcquireKey(ctx, s.rdb, s.ks, tc.bucket, tc.key, tc.app, tc.n)
			if err != nil || a.Code != tc.want {
				t.Errorf("%s: %+v, %v; want code %d", tc.name, a, err, tc.want)
			}
		}
		// 256 bytes of anything are a key.
		if a := s.acquireKey(t, "api", strings.Repeat("\xff", 256), "a", 1); a.Code != redisscript.Allowed {
			t.Errorf("256-byte binary key: %+v", a)
		}
	})
}

// A caller cannot point a key at state outside the group it names, and
// hostile key bytes never reach key names.
func TestKeyedKeysAreChecked(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		s.applyKeyed(t, cfg("api", 3, 1_000_000, 3600, "a"), false)
		good := s.ks.Keyed("api", "alice")
		var other redisscript.KeyedKeys
		for i := 0; other.Group == good.Group; i++ {
			other = s.ks.Keyed("api", fmt.Sprintf("mallory%d", i))
		}
		for name, keys := range map[string][]string{
			// A state of another bucket's group of the same number is not
			// refused: the script recomputes neither the tag nor the id
			// (docs/decisions.md); on Redis Cluster it is a cross-slot call.
			"state of another group": {good.Config, other.State},
			"no id":                  {good.Config, good.Config},
			"not base64url":          {good.Config, good.State[:len(good.State)-1] + "*"},
			"id too long":            {good.Config, good.State + "A"},
			"not a group":            {"x", "x0123456789abcdef"},
		} {
			a, err := redisscript.AcquireKeyRaw(ctx, s.rdb, keys, "a", "1", "alice")
			if err != nil || a.Code != redisscript.InvalidKey {
				t.Errorf("%s: %+v, %v; want invalid key", name, a, err)
			}
		}
		for _, key := range []string{"}", "{api:1}", "a\x00b", "*", "\r\n", "k" + strings.Repeat("}", 255)} {
			k := s.ks.Keyed("api", key)
			if strings.Count(k.State, "}") != 1 || len(k.State) != len(s.ks.StatePrefix("api", k.Group))+11 {
				t.Errorf("state key of %q = %q", key, k.State)
			}
			if a := s.acquireKey(t, "api", key, "a", 1); a.Code != redisscript.Allowed {
				t.Errorf("key %q: %+v", key, a)
			}
		}
	})
}

func TestKeyedOverrides(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.applyKeyed(t, cfg("api", 1, 1_000_000, 3600, "a"), false)
		limit := func(key string) int64 {
			t.Helper()
			return s.acquireKey(t, "api", key, "a", 1).Capacity
		}
		source := func(key string) redisscript.Source {
			t.Helper()
			return s.acquireKey(t, "api", key, "a", 1).Source
		}
		// Default 1; prefix "t" 10; prefix "tenant:" 20; exact "tenant:acme" 30.
		for _, o := range []redisscript.Override{
			ov(1, 1, redisscript.MatchPrefix, "t", 10),
			ov(2, 1, redisscript.MatchPrefix, "tenant:", 20),
			ov(3, 1, redisscript.MatchExact, "tenant:acme", 30),
		} {
			if out := s.override(t, o); out != redisscript.OverrideWritten {
				t.Fatalf("override %+v: %v", o, out)
			}
		}
		for key, want := range map[string]int64{"tenant:acme": 30, "tenant:acme2": 20, "tenant:": 20, "tenan": 10, "x": 1, "": 0} {
			if key == "" {
				continue
			}
			if got := limit(key); got != want {
				t.Errorf("limit of %q = %d; want %d", key, got, want)
			}
		}
		for key, want := range map[string]redisscript.Source{"tenant:acme": redisscript.FromExact,
			"tenant:b": redisscript.FromPrefix, "x": redisscript.FromBucket} {
			if got := source(key); got != want {
				t.Errorf("source of %q = %d; want %d", key, got, want)
			}
		}
		// Same again: unchanged; an older version: stale.
		if out := s.override(t, ov(2, 1, redisscript.MatchPrefix, "tenant:", 20)); out != redisscript.OverrideUnchanged {
			t.Errorf("replay: %v", out)
		}
		if out := s.override(t, ov(2, 2, redisscript.MatchPrefix, "tenant:", 25)); out != redisscript.OverrideUpdated {
			t.Errorf("update: %v", out)
		}
		if out := s.override(t, ov(2, 1, redisscript.MatchPrefix, "tenant:", 20)); out != redisscript.OverrideStale {
			t.Errorf("older version: %v", out)
		}
		if got := limit("tenant:x"); got != 25 {
			t.Errorf("after update: %d", got)
		}
		// Deleting the exact override returns its key to the longest prefix;
		// a late write of the deleted override is refused.
		if out := s.deleteOverride(t, ov(3, 2, redisscript.MatchExact, "tenant:acme", 0)); out != redisscript.OverrideWritten {
			t.Errorf("delete: %v", out)
		}
		if out := s.override(t, ov(3, 1, redisscript.MatchExact, "tenant:acme", 30)); out != redisscript.OverrideStale {
			t.Errorf("resurrection: %v", out)
		}
		if got := limit("tenant:acme"); got != 25 {
			t.Errorf("after delete: %d", got)
		}
		// A new override of the same key (a larger id) is written.
		if out := s.override(t, ov(9, 1, redisscript.MatchExact, "tenant:acme", 40)); out != redisscript.OverrideWritten {
			t.Errorf("re-created: %v", out)
		}
		// Deleting prefixes updates the lengths the script tries.
		s.deleteOverride(t, ov(2, 3, redisscript.MatchPrefix, "tenant:", 0))
		if got := limit("tenant:x"); got != 10 {
			t.Errorf("after deleting tenant: %d", got)
		}
		s.deleteOverride(t, ov(1, 2, redisscript.MatchPrefix, "t", 0))
		if got := limit("tenant:x"); got != 1 {
			t.Errorf("after deleting t: %d", got)
		}
		for g := range redisscript.KeyGroups {
			st, err := redisscript.ReadGroup(context.Background(), s.rdb, s.ks, "api", g)
			if err != nil || st.Lens != "" || st.WantLens() != "" {
				t.Fatalf("group %d lens %q (want %q), %v; want none", g, st.Lens, st.WantLens(), err)
			}
		}
		if got := limit("tenant:acme"); got != 40 {
			t.Errorf("exact after prefixes gone: %d", got)
		}
		// Overrides of another incarnation, or of a deleted bucket, are refused.
		o := ov(10, 1, redisscript.MatchExact, "k", 5)
		o.BucketID = 2
		if out := s.override(t, o); out != redisscript.OverrideNoBucket {
			t.Errorf("override of a newer incarnation before its config: %v", out)
		}
		if _, err := redisscript.DeleteKeyed(context.Background(), s.rdb, s.ks, "api", 1, 2); err != nil {
			t.Fatal(err)
		}
		if out := s.override(t, ov(11, 1, redisscript.MatchExact, "k", 5)); out != redisscript.OverrideTombstoned {
			t.Errorf("override of a deleted bucket: %v", out)
		}
		if a := s.acquireKey(t, "api", "tenant:acme", "a", 1); a.Code != redisscript.UnknownBucket {
			t.Errorf("acquire after delete: %+v", a)
		}
	})
}

// A deleted override's tombstone is purged once it is older than the
// cutoff, and only then; a live override is never purged.
func TestKeyedOverrideTombstonePurge(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		s.applyKeyed(t, cfg("api", 1, 1_000_000, 3600, "a"), false)
		g := redisscript.GroupOf("k")
		purge := func(o redisscript.Override, cutoff time.Time) bool {
			t.Helper()
			purged, err := redisscript.PurgeOverrideTombstone(ctx, s.rdb, s.ks, o, g, cutoff)
			if err != nil {
				t.Fatalf("purge %+v: %v", o, err)
			}
			return purged
		}
		field := func() bool {
			t.Helper()
			n, err := s.rdb.HExists(ctx, s.ks.KeyGroup("api", g), "e:k").Result()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		live := ov(1, 1, redisscript.MatchExact, "k", 5)
		s.override(t, live)
		if purge(live, time.Now().Add(time.Hour)) || !field() {
			t.Fatal("a live override was purged")
		}
		s.deleteOverride(t, ov(1, 2, redisscript.MatchExact, "k", 0))
		if purge(live, time.Now().Add(-time.Hour)) || !field() {
			t.Fatal("a tombstone newer than the cutoff was purged")
		}
		if !purge(live, time.Now().Add(time.Hour)) || field() {
			t.Fatal("a tombstone older than the cutoff was kept")
		}
	})
}

// A smaller override limit takes effect at once; the key's debt is capped
// at the new capacity; a recreated bucket ignores old key states.
func TestKeyedConfigChanges(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		c := cfg("api", 10, 1_000_000, 3600, "a")
		s.applyKeyed(t, c, false)
		if a := s.acquireKey(t, "api", "k", "a", 10); a.Code != redisscript.Allowed {
			t.Fatalf("take 10: %+v", a)
		}
		// Same id, older version: stale; a newer version updates.
		c.Version = 0
		if out := s.applyKeyed(t, c, false); out != redisscript.Stale {
			t.Errorf("older version: %v", out)
		}
		c.Version, c.Capacity = 2, 2
		if out := s.applyKeyed(t, c, false); out != redisscript.Updated {
			t.Errorf("update: %v", out)
		}
		if out := s.applyKeyed(t, c, false); out != redisscript.Unchanged {
			t.Errorf("replay: %v", out)
		}
		a := s.acquireKey(t, "api", "k", "a", 1)
		if a.Code != redisscript.Denied || a.Capacity != 2 || a.RetryAfterMicros > 3_600_000_000 {
			t.Fatalf("after shrinking: %+v; want denied, one token in at most an hour", a)
		}
		// Deleted and created again (a larger id): the key starts full.
		if _, err := redisscript.DeleteKeyed(context.Background(), s.rdb, s.ks, "api", 1, 3); err != nil {
			t.Fatal(err)
		}
		if out := s.applyKeyed(t, c, false); out != redisscript.Tombstoned {
			t.Errorf("stale apply after delete: %v", out)
		}
		c.ID, c.Version = 2, 1
		if out := s.applyKeyed(t, c, false); out != redisscript.Created {
			t.Errorf("new incarnation: %v", out)
		}
		if a := s.acquireKey(t, "api", "k", "a", 2); a.Code != redisscript.Allowed {
			t.Errorf("new incarnation must start full: %+v", a)
		}
	})
}

// Extreme limits: the slowest rate and the largest capacity give state
// and expiry times far beyond any clock, which must still be written and
// read back.
func TestKeyedExtremeLimits(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.applyKeyed(t, cfg("api", redisscript.MaxCapacity, 1, redisscript.MaxPeriodSeconds, "a"), false)
		for _, n := range []int64{redisscript.MaxCapacity - 1, 1} {
			if a := s.acquireKey(t, "api", "k", "a", n); a.Code != redisscript.Allowed || a.ResetAfterMicros != 1e15 {
				t.Fatalf("take %d: %+v", n, a)
			}
		}
		if a := s.acquireKey(t, "api", "k", "a", 1); a.Code != redisscript.Denied || a.RetryAfterMicros != 1e15 {
			t.Fatalf("empty: %+v", a)
		}
		ttl, err := s.rdb.PTTL(context.Background(), s.ks.Keyed("api", "k").State).Result()
		if err != nil || ttl < 365*24*time.Hour {
			t.Fatalf("PTTL = %v, %v; want the capped years", ttl, err)
		}
	})
}

// Tokens come back at the configured rate: over a stretch measured by
// Redis's clock, no more than capacity + rate x T are admitted.
func TestKeyedRefill(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.applyKeyed(t, cfg("api", 5, 50_000_000, 1, "a"), false) // 50/s
		start := s.nowMicros(t)
		admitted := 0
		for time.Since(time.UnixMicro(start)) < 300*time.Millisecond {
			if a := s.acquireKey(t, "api", "k", "a", 1); a.Code == redisscript.Allowed {
				admitted++
			}
		}
		elapsed := s.secondsSince(t, start)
		bound := 5 + 50*elapsed
		// The floor is the full bucket plus one refilled token: a stalled
		// scheduler can leave the loop few calls, so a tighter floor would
		// measure the machine, not the script.
		if float64(admitted) > bound || admitted < 6 {
			t.Fatalf("admitted %d in %.3fs; bound %.1f, floor 6", admitted, elapsed, bound)
		}
	})
}

// Bytes per active key, as MEMORY USAGE reports them, with the default
// prefix and a bucket name of up to 15 characters.
func TestKeyedBytesPerKey(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	s := server{rdb: rdb}
	for _, name := range []string{"api", "login-attempts1"} {
		// 10 per hour: a key lives 6 minutes after one call, longer than
		// the loop below takes on a loaded machine (it checks that every
		// key is still there).
		s.applyKeyed(t, cfg(name, 100, 10_000_000, 3600, "a"), false)
		before, err := rdb.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		const keys = 20000
		var total int64
		memBefore := usedMemory(t, rdb)
		for i := range keys {
			key := fmt.Sprintf("user-%d@example.com", i)
			s.acquireKey(t, name, key, "a", 1)
			n, err := rdb.MemoryUsage(ctx, s.ks.Keyed(name, key).State).Result()
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		after, _ := rdb.DBSize(ctx).Result()
		if after-before != keys {
			t.Fatalf("%d keys made %d Redis keys", keys, after-before)
		}
		per := float64(total) / keys
		t.Logf("bucket %q: %.1f bytes per active key (MEMORY USAGE); used_memory grew %.0f bytes per key", name, per,
			float64(usedMemory(t, rdb)-memBefore)/keys)
		if per > 120 {
			t.Errorf("bucket %q: %.1f bytes per key; want at most 120", name, per)
		}
	}
}

func usedMemory(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no used_memory in INFO")
	return 0
}

// A key's state expires by itself once its bucket is full again, and the
// key then starts full: no state is kept for idle keys.
func TestKeyedStateExpires(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s := server{rdb: rdb, ks: redisscript.Keyspace{Prefix: prefix}}
	ctx := context.Background()
	s.applyKeyed(t, cfg("api", 2, 20_000_000, 1, "a"), false) // 2 per key, 20/s: full 100 ms after emptying
	for range 2 {
		if a := s.acquireKey(t, "api", "k", "a", 1); a.Code != redisscript.Allowed {
			t.Fatalf("take: %+v", a)
		}
	}
	state := s.ks.Keyed("api", "k").State
	ttl, err := rdb.PTTL(ctx, state).Result()
	// The 100 ms to refill, and a spread of at most as much.
	if err != nil || ttl <= 0 || ttl > 200*time.Millisecond {
		t.Fatalf("PTTL = %v, %v; want at most the 100 ms to refill and its spread", ttl, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rdb.Exists(ctx, state).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the state of an idle key never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a := s.acquireKey(t, "api", "k", "a", 2); a.Code != redisscript.Allowed {
		t.Fatalf("after expiry the key must be full: %+v", a)
	}
}
