package conformance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

func keyEntry(bucket, key string, n int64) redisscript.Entry {
	return redisscript.Entry{Bucket: bucket, Key: key, N: n}
}

// keyedAndGlobal applies a keyed bucket "api" (2 per key) and a plain
// bucket "all" (10), both refilling one token an hour: counts are exact.
func keyedAndGlobal(t *testing.T, s server) {
	t.Helper()
	if out := s.applyKeyed(t, cfg("api", 2, 1_000_000, 3600, "svc"), false); out != redisscript.Created {
		t.Fatalf("apply keyed: %v", out)
	}
	s.apply(t, cfg("all", 10, 1_000_000, 3600, "svc"), false)
}

// A key of a keyed bucket and a plain bucket in one set: granted together,
// and when either denies neither is charged. The state written is the one
// the keyed acquire script reads, and it expires when the key is full.
func TestAcquireAllKeyedAndPlain(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		keyedAndGlobal(t, s)
		a := s.acquireAll(t, "svc", keyEntry("api", "alice", 1), entry("all", 1))
		if a.Code != redisscript.Allowed || a.Entries[0].Code != redisscript.Allowed || a.Entries[0].Remaining != 1 ||
			a.Entries[0].Capacity != 2 || a.Entries[1].Remaining != 9 {
			t.Fatalf("first set: %+v", a)
		}
		if got := s.tokens(t, "all"); got < 9 || got > 9.001 {
			t.Errorf("all holds %v, want 9", got)
		}
		ttl, err := s.rdb.PTTL(ctx, s.ks.Keyed("api", "alice").State).Result()
		// The hour until full, and a spread of at most a minute.
		if err != nil || ttl <= 3590*time.Second || ttl > 3660*time.Second {
			t.Errorf("PTTL of alice's state = %v, %v; want the hour until full", ttl, err)
		}
		// The keyed acquire script reads what the set wrote.
		if k := s.acquireKey(t, "api", "alice", "svc", 1); k.Code != redisscript.Allowed || k.Remaining != 0 {
			t.Fatalf("keyed acquire after the set: %+v", k)
		}

		// The key denies: the plain bucket is not charged.
		aliceBefore, allBefore := s.keyState(t, "api", "alice"), s.fields(t, "all")
		a = s.acquireAll(t, "svc", entry("all", 3), keyEntry("api", "alice", 1))
		if a.Code != redisscript.Denied || a.Entries[0].Code != redisscript.Allowed || a.Entries[1].Code != redisscript.Denied ||
			a.Entries[1].Remaining != 0 || a.Entries[1].RetryAfterMicros < 3_590_000_000 {
			t.Fatalf("key denies: %+v", a)
		}
		if got := s.fields(t, "all"); got[redisscript.FieldTokens] != allBefore[redisscript.FieldTokens] ||
			got[redisscript.FieldTS] != allBefore[redisscript.FieldTS] {
			t.Errorf("a denied set charged all: %v -> %v", allBefore, got)
		}
		if got := s.keyState(t, "api", "alice"); got != aliceBefore {
			t.Errorf("a denied set wrote alice: %q -> %q", aliceBefore, got)
		}

		// The plain bucket denies: the key is not charged.
		s.setState(t, "all", 0, s.nowMicros(t)+3_600_000_000)
		a = s.acquireAll(t, "svc", keyEntry("api", "bob", 2), entry("all", 1))
		if a.Code != redisscript.Denied || a.Entries[0].Code != redisscript.Allowed || a.Entries[1].Code != redisscript.Denied {
			t.Fatalf("plain denies: %+v", a)
		}
		if got := s.keyState(t, "api", "bob"); got != "" {
			t.Errorf("a denied set wrote bob's state %q", got)
		}
		if k := s.acquireKey(t, "api", "bob", "svc", 2); k.Code != redisscript.Allowed {
			t.Errorf("bob after the denied set: %+v, want full", k)
		}
	})
}

// Entries of one key add up, as entries of one bucket do.
func TestAcquireAllSameKeyTwice(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		keyedAndGlobal(t, s)
		a := s.acquireAll(t, "svc", keyEntry("api", "k", 1), keyEntry("api", "k", 1), keyEntry("api", "other", 2))
		if a.Code != redisscript.Allowed || a.Entries[0].Remaining != 1 || a.Entries[1].Remaining != 0 || a.Entries[2].Remaining != 0 {
			t.Fatalf("%+v", a)
		}
		if k := s.acquireKey(t, "api", "k", "svc", 1); k.Code != redisscript.Denied {
			t.Fatalf("k after both entries: %+v, want denied", k)
		}
		if a := s.acquireAll(t, "svc", keyEntry("api", "x", 2), keyEntry("api", "x", 1)); a.Code != redisscript.ExceedsCapacity ||
			a.Entries[1].Code != redisscript.ExceedsCapacity {
			t.Fatalf("together over capacity: %+v", a)
		}
		if got := s.keyState(t, "api", "x"); got != "" {
			t.Errorf("a refused set wrote x: %q", got)
		}
	})
}

// Exact and prefix overrides apply to keyed entries as they do to a keyed
// acquire, shadow mode of the bucket and of an override too.
func TestAcquireAllKeyedOverridesAndShadow(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		keyedAndGlobal(t, s)
		s.override(t, ov(1, 1, redisscript.MatchExact, "vip", 5))
		s.override(t, ov(2, 1, redisscript.MatchPrefix, "trial:", 1))
		a := s.acquireAll(t, "svc", keyEntry("api", "vip", 4), entry("all", 1))
		if a.Code != redisscript.Allowed || a.Entries[0].Capacity != 5 || a.Entries[0].Remaining != 1 {
			t.Fatalf("exact override: %+v", a)
		}
		a = s.acquireAll(t, "svc", entry("all", 1), keyEntry("api", "trial:7", 2))
		if a.Code != redisscript.ExceedsCapacity || a.Entries[1].Code != redisscript.ExceedsCapacity || a.Entries[1].Capacity != 1 {
			t.Fatalf("prefix override: %+v", a)
		}
		if got := s.tokens(t, "all"); got < 9 || got > 9.001 {
			t.Errorf("all holds %v after a refused set, want 9", got)
		}

		// A shadow override: its keys never hold back the set.
		shadow := ov(3, 1, redisscript.MatchPrefix, "try:", 1)
		shadow.Shadow = true
		s.override(t, shadow)
		if a := s.acquireAll(t, "svc", keyEntry("api", "try:1", 1)); a.Code != redisscript.Allowed {
			t.Fatalf("shadow override, first: %+v", a)
		}
		before := s.keyState(t, "api", "try:1")
		a = s.acquireAll(t, "svc", keyEntry("api", "try:1", 1), entry("all", 2))
		if a.Code != redisscript.Allowed || a.Entries[0].Code != redisscript.WouldDeny || a.Entries[0].Capacity != 1 {
			t.Fatalf("shadow override, past its limit: %+v", a)
		}
		if got := s.keyState(t, "api", "try:1"); got != before {
			t.Errorf("a would-deny wrote the key: %q -> %q", before, got)
		}
		if got := s.tokens(t, "all"); got < 7 || got > 7.001 {
			t.Errorf("all holds %v, want 7", got)
		}

		// The bucket's shadow mode covers every key.
		c := cfg("api", 2, 1_000_000, 3600, "svc")
		c.Shadow = true
		s.applyKeyed(t, c, false)
		s.acquireKey(t, "api", "carol", "svc", 2)
		a = s.acquireAll(t, "svc", keyEntry("api", "carol", 1), entry("all", 1))
		if a.Code != redisscript.Allowed || a.Entries[0].Code != redisscript.WouldDeny {
			t.Fatalf("shadow bucket: %+v", a)
		}
	})
}

// A bad key, a keyed entry on a plain bucket, a plain entry on a keyed
// bucket, and an app the keyed bucket does not serve: the entry answers as
// the single acquire would, and nothing is charged.
func TestAcquireAllKeyedErrors(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		keyedAndGlobal(t, s)
		if out := s.applyKeyed(t, cfg("billing", 2, 1_000_000, 3600, "other"), false); out != redisscript.Created {
			t.Fatalf("apply billing: %v", out)
		}
		long := strings.Repeat("k", redisscript.MaxKeyLength+1)
		for _, tc := range []struct {
			name    string
			entries []redisscript.Entry
			want    redisscript.Code
			at      int
		}{
			{"key too long", []redisscript.Entry{entry("all", 1), keyEntry("api", long, 1)}, redisscript.InvalidKey, 1},
			{"keyed entry on a plain bucket", []redisscript.Entry{keyEntry("api", "a", 1), keyEntry("all", "a", 1)}, redisscript.UnknownBucket, 1},
			{"plain entry on a keyed bucket", []redisscript.Entry{entry("all", 1), entry("api", 1)}, redisscript.UnknownBucket, 1},
			{"app not allowed", []redisscript.Entry{entry("all", 1), keyEntry("billing", "a", 1)}, redisscript.AppNotAllowed, 1},
			{"n over the key's capacity", []redisscript.Entry{keyEntry("api", "a", 3)}, redisscript.ExceedsCapacity, 0},
			{"invalid n", []redisscript.Entry{keyEntry("api", "a", 1), keyEntry("api", "a", 0)}, redisscript.InvalidN, 1},
		} {
			a := s.acquireAll(t, "svc", tc.entries...)
			if a.Code != tc.want || a.Entries[tc.at].Code != tc.want {
				t.Errorf("%s: %+v", tc.name, a)
			}
		}
		if got := s.tokens(t, "all"); got != 10 {
			// never written: no set was granted
			t.Errorf("all holds %v", got)
		}
		if got := s.keyState(t, "api", "a"); got != "" {
			t.Errorf("a refused set wrote key a: %q", got)
		}

		// Keys the caller got wrong: a state key of another group, or not
		// followed by 16 hex digits.
		ctx := context.Background()
		kk := s.ks.Keyed("api", "a")
		other := ""
		for i := 0; other == ""; i++ {
			if ok := s.ks.Keyed("api", strings.Repeat("o", i+1)); ok.Group != kk.Group {
				other = ok.State
			}
		}
		for _, keys := range [][]string{
			{kk.Config, other},
			{kk.Config, kk.Config + "0123456789ABCDEF"},
			{kk.Config, kk.State + "0"},
		} {
			v, err := s.rdb.Eval(ctx, redisscript.AcquireAllScript.Source(), keys, "svc", "1", redisscript.EntryKey, "a", "1").Int64Slice()
			if err != nil || v[0] != int64(redisscript.InvalidKey) {
				t.Errorf("keys %v: %v %v, want invalid key", keys, v, err)
			}
		}
	})
}

func TestAllAnswerOfInvalidKey(t *testing.T) {
	v := []int64{-5, 1, 0, 0, 0, 10, 1_000_000, 1, -5, 0, 0, 0, 0, 0, 0}
	a, err := redisscript.AllAnswerOf(v, 2)
	if err != nil || a.Code != redisscript.InvalidKey || a.Entries[1].Code != redisscript.InvalidKey || a.Entries[0].Code != redisscript.Allowed {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := redisscript.AllAnswerOf([]int64{-6, 1, 0, 0, 0, 10, 1_000_000, 1}, 1); err == nil {
		t.Error("code -6 accepted")
	}
}

// On a real Redis the state of a key taken through a set expires when the
// key is full again.
func TestAcquireAllKeyStateExpires(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s := server{rdb: rdb, ks: redisscript.Keyspace{Prefix: prefix}}
	ctx := context.Background()
	s.applyKeyed(t, cfg("api", 2, 20_000_000, 1, "a"), false) // 20/s: full 100 ms after emptying
	if a := s.acquireAll(t, "a", keyEntry("api", "k", 2)); a.Code != redisscript.Allowed {
		t.Fatalf("take: %+v", a)
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
}
