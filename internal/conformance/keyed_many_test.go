package conformance_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// Several acquires in one call of the keyed acquire script answer what
// each would answer alone, in order: a key taken twice sees its first
// acquire's write, refused acquires (invalid n or key, unknown bucket, app
// not allowed) take nothing and hold back no other, and keys of different
// groups and buckets mix (on a single node, where keys of any slot may).
func TestKeyedAcquireMany(t *testing.T) {
	each(t, func(t *testing.T, s server) { keyedAcquireMany(t, s) })
}

func keyedAcquireMany(t *testing.T, s server) {
	ctx := context.Background()
	s.applyKeyed(t, cfg("api", 2, 1_000_000, 3600, "svc"), false)
	s.applyKeyed(t, cfg("other", 5, 1_000_000, 3600, "billing"), false)
	vip := ov(1, 1, redisscript.MatchExact, "vip", 3)
	s.override(t, vip)

	var keys []string
	var nk []string
	add := func(bucket, key, n string) {
		k := s.ks.Keyed(bucket, key)
		if key == "" {
			k = s.ks.Keyed(bucket, "x")
		}
		keys = append(keys, k.Config, k.State)
		nk = append(nk, n, key)
	}
	add("api", "alice", "1")
	add("api", "bob", "2")
	add("api", "alice", "1")
	add("api", "alice", "1") // alice has none left
	add("api", "carol", "0") // invalid n
	add("api", "", "1")      // invalid key
	add("missing", "alice", "1")
	add("other", "alice", "1") // not this app's
	add("api", "vip", "3")
	add("api", "bob", "1")
	got, err := redisscript.AcquireKeysRaw(ctx, s.rdb, keys, "svc", nk...)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		code      redisscript.Code
		remaining int64
		capacity  int64
		source    int64
	}{
		{redisscript.Allowed, 1, 2, 0}, {redisscript.Allowed, 0, 2, 0}, {redisscript.Allowed, 0, 2, 0},
		{redisscript.Denied, 0, 2, 0}, {redisscript.InvalidN, 0, 0, 0}, {redisscript.InvalidKey, 0, 0, 0},
		{redisscript.UnknownBucket, 0, 0, 0}, {redisscript.AppNotAllowed, 0, 5, 0},
		{redisscript.Allowed, 0, 3, 1}, {redisscript.Denied, 0, 2, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
	for i, w := range want {
		a := got[i]
		if redisscript.Code(a[0]) != w.code || a[1] != w.remaining || a[4] != w.capacity || a[7] != w.source {
			t.Errorf("acquire %d: %v, want code %d remaining %d capacity %d source %d", i, a, w.code, w.remaining,
				w.capacity, w.source)
		}
	}
	// What the call wrote is what single calls see.
	if a := s.acquireKey(t, "api", "alice", "svc", 1); a.Code != redisscript.Denied {
		t.Errorf("alice after the call: %+v", a)
	}
	if a := s.acquireKey(t, "api", "carol", "svc", 2); a.Code != redisscript.Allowed || a.Remaining != 0 {
		t.Errorf("carol, untouched by the invalid acquire: %+v", a)
	}
	if a := s.acquireKey(t, "other", "alice", "billing", 5); a.Code != redisscript.Allowed {
		t.Errorf("other's alice, untouched by the refused acquire: %+v", a)
	}
}

// An acquire sent alone answers, integer for integer under every protocol
// and flag, what it answers as the first of several: the script takes a
// shorter path for one acquire, and that path must decide the same way.
func TestKeyedAcquireAloneAsInMany(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		api := cfg("api", 10, 1_000_000, 3600, "svc")
		api.Reserve = 3
		s.applyKeyed(t, api, false)
		s.applyKeyed(t, cfg("other", 5, 1_000_000, 3600, "billing"), false)
		s.override(t, ov(1, 1, redisscript.MatchExact, "vip", 4))
		s.override(t, ov(2, 1, redisscript.MatchPrefix, "team:", 20))
		other := s.ks.Keyed("api", "zed")
		type acquire struct{ bucket, key, n string }
		acquires := []acquire{{"api", "alice", "1"}, {"api", "alice", "7"}, {"api", "alice", "8"},
			{"api", "alice", "11"}, {"api", "alice", "0"}, {"api", "alice", "x"}, {"api", "", "1"},
			{"api", "vip", "2"}, {"api", "team:a", "18"}, {"missing", "alice", "1"}, {"other", "alice", "1"}}
		tails := [][]any{{}, {"2"}, {"3"}, {"3", "1"}, {"3", "0"}, {"2", "1"}, {"9"}}
		for _, a := range acquires {
			k := s.ks.Keyed(a.bucket, a.key)
			if a.key == "" {
				k = s.ks.Keyed(a.bucket, "x")
			}
			for _, tail := range tails {
				alone, err := redisscript.KeyedAcquireScript.Run(ctx, s.rdb, []string{k.Config, k.State},
					append([]any{"svc", a.n, a.key}, tail...)...).Int64Slice()
				if err != nil {
					t.Fatalf("%+v %v alone: %v", a, tail, err)
				}
				s.rdb.Del(ctx, k.State, other.State)
				if len(tail) == 2 {
					tail = []any{tail[0], tail[1].(string) + "0"}
				}
				many, err := redisscript.KeyedAcquireScript.Run(ctx, s.rdb, []string{k.Config, k.State, other.Config, other.State},
					append([]any{"svc", a.n, a.key, "1", "zed"}, tail...)...).Int64Slice()
				if err != nil {
					t.Fatalf("%+v %v with another: %v", a, tail, err)
				}
				s.rdb.Del(ctx, k.State, other.State)
				if len(many) != 2*len(alone) || !slices.Equal(alone, many[:len(alone)]) {
					t.Errorf("%+v %v: alone %v, first of two %v", a, tail, alone, many)
				}
			}
		}
	})
}
