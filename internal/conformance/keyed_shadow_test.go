package conformance_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// keyState is the raw state string of key in keyed bucket name ("" when
// the key has none).
func (s server) keyState(t *testing.T, name, key string) string {
	t.Helper()
	v, err := s.rdb.Get(context.Background(), s.ks.Keyed(name, key).State).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("get state of %q: %v", key, err)
	}
	return v
}

// A keyed bucket in shadow mode answers WouldDeny for every key where it
// would deny, and writes nothing; switching it off makes the same call a
// denial, and the switch alone (same version) is an update.
func TestKeyedShadowBucket(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		c := cfg("api", 2, 1_000_000, 3600, "svc")
		c.Shadow = true
		if out := s.applyKeyed(t, c, false); out != redisscript.Created {
			t.Fatalf("apply: %v", out)
		}
		if out := s.applyKeyed(t, c, false); out != redisscript.Unchanged {
			t.Fatalf("re-apply: %v, want unchanged", out)
		}
		st, err := redisscript.ReadGroup(context.Background(), s.rdb, s.ks, "api", 5)
		if err != nil || !st.Config.Shadow {
			t.Fatalf("read group: %+v %v; want shadow", st.Config, err)
		}
		if a := s.acquireKey(t, "api", "alice", "svc", 2); a.Code != redisscript.Allowed || a.Remaining != 0 {
			t.Fatalf("first acquire: %+v", a)
		}
		before := s.keyState(t, "api", "alice")
		for i := range 3 {
			a := s.acquireKey(t, "api", "alice", "svc", 1)
			if a.Code != redisscript.WouldDeny || a.Remaining != 0 || a.Capacity != 2 || a.Source != redisscript.FromBucket ||
				a.RetryAfterMicros <= 0 {
				t.Fatalf("acquire %d past empty: %+v, want would deny", i, a)
			}
		}
		if got := s.keyState(t, "api", "alice"); got != before {
			t.Fatalf("would-denies wrote %q, was %q", got, before)
		}
		// Another key is not touched by alice's would-denies.
		if a := s.acquireKey(t, "api", "bob", "svc", 2); a.Code != redisscript.Allowed {
			t.Fatalf("bob: %+v", a)
		}

		c.Shadow = false
		if out := s.applyKeyed(t, c, false); out != redisscript.Updated {
			t.Fatalf("shadow off at the same version: %v, want updated", out)
		}
		if a := s.acquireKey(t, "api", "alice", "svc", 1); a.Code != redisscript.Denied {
			t.Fatalf("shadow off: %+v, want denied", a)
		}
	})
}

// An override in shadow mode puts only its keys in shadow mode, with its
// own limit; the bucket's other keys are enforced. A bucket in shadow mode
// covers keys of an enforced override too. Shadow is part of the stored
// override: the same (id, version) with the switch flipped is an update.
func TestKeyedShadowOverride(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		c := cfg("api", 1, 1_000_000, 3600, "svc")
		if out := s.applyKeyed(t, c, false); out != redisscript.Created {
			t.Fatalf("apply: %v", out)
		}
		trial := ov(1, 1, redisscript.MatchPrefix, "trial:", 3)
		trial.Shadow = true
		if out := s.override(t, trial); out != redisscript.OverrideWritten {
			t.Fatalf("override: %v", out)
		}
		if out := s.override(t, trial); out != redisscript.OverrideUnchanged {
			t.Fatalf("override again: %v, want unchanged", out)
		}
		st, err := redisscript.ReadGroup(context.Background(), s.rdb, s.ks, "api", 0)
		if err != nil {
			t.Fatal(err)
		}
		so, ok := redisscript.ParseStoredOverride(st.Prefixes["trial:"])
		if !ok || !so.Shadow || !so.Same(trial) {
			t.Fatalf("stored %q: %+v %v", st.Prefixes["trial:"], so, ok)
		}

		if a := s.acquireKey(t, "api", "trial:1", "svc", 3); a.Code != redisscript.Allowed || a.Capacity != 3 ||
			a.Source != redisscript.FromPrefix {
			t.Fatalf("trial key: %+v", a)
		}
		if a := s.acquireKey(t, "api", "trial:1", "svc", 1); a.Code != redisscript.WouldDeny || a.Capacity != 3 ||
			a.Source != redisscript.FromPrefix {
			t.Fatalf("trial key past its limit: %+v, want would deny", a)
		}
		// A key the override does not match is enforced.
		if a := s.acquireKey(t, "api", "paid:1", "svc", 1); a.Code != redisscript.Allowed {
			t.Fatalf("paid key: %+v", a)
		}
		if a := s.acquireKey(t, "api", "paid:1", "svc", 1); a.Code != redisscript.Denied {
			t.Fatalf("paid key past the limit: %+v, want denied", a)
		}
		// A more specific enforced override wins over the shadow prefix.
		exact := ov(2, 1, redisscript.MatchExact, "trial:1", 3)
		if out := s.override(t, exact); out != redisscript.OverrideWritten {
			t.Fatalf("exact override: %v", out)
		}
		if a := s.acquireKey(t, "api", "trial:1", "svc", 1); a.Code != redisscript.Denied || a.Source != redisscript.FromExact {
			t.Fatalf("enforced exact override: %+v, want denied", a)
		}

		// The switch off at the same version: updated, and enforced.
		trial.Shadow = false
		if out := s.override(t, trial); out != redisscript.OverrideUpdated {
			t.Fatalf("shadow off: %v, want updated", out)
		}
		if a := s.acquireKey(t, "api", "trial:2", "svc", 3); a.Code != redisscript.Allowed {
			t.Fatalf("trial:2: %+v", a)
		}
		if a := s.acquireKey(t, "api", "trial:2", "svc", 1); a.Code != redisscript.Denied {
			t.Fatalf("trial:2 past its limit: %+v, want denied", a)
		}

		// The bucket in shadow mode covers every key, overrides included.
		c.Version, c.Shadow = 2, true
		if out := s.applyKeyed(t, c, false); out != redisscript.Updated {
			t.Fatalf("bucket shadow on: %v", out)
		}
		for _, key := range []string{"trial:1", "trial:2", "paid:1"} {
			if a := s.acquireKey(t, "api", key, "svc", 1); a.Code != redisscript.WouldDeny {
				t.Fatalf("%s in a shadow bucket: %+v, want would deny", key, a)
			}
		}
	})
}

// Protocol 2 of the keyed acquire: a last argument "2" adds a ninth
// integer to every answer, the shadow mode of the limit that applied (the
// bucket's, or a shadow override's for its keys), grants included; 0 for
// refusals without a limit. Without it the answer is eight integers, and
// both parse; several acquires in one call answer nine integers each.
func TestKeyedAcquireProtocol2Shadow(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		c := cfg("api", 2, 1_000_000, 3600, "svc")
		if out := s.applyKeyed(t, c, false); out != redisscript.Created {
			t.Fatalf("apply: %v", out)
		}
		s.override(t, redisscript.Override{Bucket: "api", BucketID: c.ID, ID: 1, Version: 1, Match: redisscript.MatchPrefix,
			Key: "try:", Capacity: 2, PermitsMicro: 1_000_000, PeriodSeconds: 3600, Shadow: true})
		run := func(app string, nk ...string) []int64 {
			t.Helper()
			var keys []string
			args := []any{app}
			for i := 0; i+1 < len(nk); i += 2 {
				k := s.ks.Keyed("api", nk[i+1])
				keys = append(keys, k.Config, k.State)
				args = append(args, nk[i], nk[i+1])
			}
			if len(nk)%2 == 1 {
				args = append(args, nk[len(nk)-1])
			}
			v, err := redisscript.KeyedAcquireScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		// A grant of the shadow override's key says shadow; the enforced
		// key's grant does not.
		v := run("svc", "1", "try:1", "1", "paid:1", "2")
		if len(v) != 18 || v[0] != 1 || v[7] != int64(redisscript.FromPrefix) || v[8] != 1 ||
			v[9] != 1 || v[16] != int64(redisscript.FromBucket) || v[17] != 0 {
			t.Fatalf("two acquires, protocol 2: %v", v)
		}
		for i, want := range []bool{true, false} {
			a, err := redisscript.KeyedAnswerOf(v[9*i : 9*i+9])
			if err != nil || !a.HasShadow || a.Shadow != want {
				t.Fatalf("answer %d: %+v %v, want shadow %v", i, a, err, want)
			}
		}
		// Without protocol 2: eight integers, no shadow told.
		v = run("svc", "1", "try:1")
		if a, err := redisscript.KeyedAnswerOf(v); len(v) != 8 || err != nil || a.Code != redisscript.Allowed || a.HasShadow {
			t.Fatalf("protocol 1: %v %+v %v", v, a, err)
		}
		// A refusal without a limit carries 0, and tells no shadow mode.
		v = run("other", "1", "try:1", "2")
		if a, err := redisscript.KeyedAnswerOf(v); len(v) != 9 || v[8] != 0 || err != nil || a.Code != redisscript.AppNotAllowed || a.HasShadow {
			t.Fatalf("app not allowed, protocol 2: %v %+v %v", v, a, err)
		}
		// The bucket in shadow mode: every key's grant says so.
		c.Version, c.Shadow = 2, true
		if out := s.applyKeyed(t, c, false); out != redisscript.Updated {
			t.Fatalf("shadow on: %v", out)
		}
		v = run("svc", "1", "paid:2", "2")
		if len(v) != 9 || v[0] != 1 || v[8] != 1 {
			t.Fatalf("grant in a shadow bucket, protocol 2: %v", v)
		}
	})
}
