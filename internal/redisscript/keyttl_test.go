package redisscript_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// Keys written together with the same wait until full must not expire in
// the same second: each state lives its wait plus a spread that depends
// only on its name, at most the wait and at most a minute.
func TestKeyStateTTLSpread(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{Prefix: prefix}
	// 100 per key, 1 per second: taking 60 leaves a wait of 60 s.
	cfg := redisscript.Config{Name: "spread", ID: 1, Version: 1, Capacity: 100, PermitsMicro: 1_000_000,
		PeriodSeconds: 1, Apps: []string{"app"}}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	const keys = 2000
	states := make([]string, keys)
	for i := range keys {
		key := "user-" + strconv.Itoa(i)
		k := ks.Keyed(cfg.Name, key)
		states[i] = k.State
		a, err := redisscript.AcquireKeyRaw(ctx, rdb, []string{k.Config, k.State}, "app", "60", key)
		if err != nil || a.Code != redisscript.Allowed {
			t.Fatalf("acquire %s: %+v, %v", key, a, err)
		}
	}
	pipe := rdb.Pipeline()
	ttls := make([]*redis.DurationCmd, keys)
	for i, s := range states {
		ttls[i] = pipe.PTTL(ctx, s)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	seconds := map[int64]bool{}
	for i, c := range ttls {
		ttl := c.Val()
		const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		s := states[i]
		h := 16*strings.IndexByte(b64, s[len(s)-2]) + strings.IndexByte(b64, s[len(s)-1])/4
		spread := time.Duration(h*60_000/1024) * time.Millisecond
		// The wait is 60 s less the time since the acquire; the test
		// may have stalled since, but never more than the wait.
		if wait := ttl - spread; wait <= 0 || wait > 60*time.Second {
			t.Errorf("%s: PTTL %v, spread %v: the wait left is %v, want 0..60s", states[i], ttl, spread, wait)
		}
		seconds[int64(spread/time.Second)] = true
	}
	// 2000 names over 60 seconds: every second gets some.
	if len(seconds) < 55 {
		t.Errorf("expiries spread over %d distinct seconds, want at least 55 of 60", len(seconds))
	}
}

// ReadKeyState reads the state the script writes, and the decimal form of
// older releases.
func TestReadKeyState(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "read", ID: 4097, Version: 1, Capacity: 10, PermitsMicro: 1_000_000,
		PeriodSeconds: 1, Apps: []string{"app"}}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	if a, err := redisscript.AcquireKey(ctx, rdb, ks, cfg.Name, "alice", "app", 3); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	st, err := redisscript.ReadKeyState(ctx, rdb, ks, cfg.Name, "alice")
	if err != nil || !st.Exists || st.ID != cfg.ID {
		t.Fatalf("state: %+v, %v", st, err)
	}
	// 3 tokens at 1 per second: full 3 s after the acquire.
	if wait := st.FullAt.Sub(st.Now); wait <= 2*time.Second || wait > 3*time.Second {
		t.Errorf("full in %v, want 3 s less the time since the acquire", wait)
	}
	if got := st.Tokens(cfg.ID, 10, 1); got < 7 || got > 8 {
		t.Errorf("tokens %v, want 7 and a bit", got)
	}
	k := ks.Keyed(cfg.Name, "bob")
	full := st.Now.Add(time.Minute).UnixMicro()
	if err := rdb.Set(ctx, k.State, "4097 "+strconv.FormatInt(full, 10)+".5", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	old, err := redisscript.ReadKeyState(ctx, rdb, ks, cfg.Name, "bob")
	if err != nil || !old.Exists || old.ID != cfg.ID || old.FullAt.UnixMicro() != full+1 {
		t.Fatalf("decimal state: %+v, %v", old, err)
	}
}

// ReadKeyState reads a keyed quota's state too, with its group's table:
// the count of the period containing Redis's clock, 0 for a state of
// another period or incarnation, and no period outside the table.
func TestReadKeyStateOfAQuota(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{Prefix: prefix}
	bounds := quota.Table(quota.Day, time.UTC, time.Now())
	cfg := redisscript.Config{Name: "daily", ID: 77, Version: 1, Capacity: 100, Apps: []string{"app"},
		Kind: redisscript.KindQuota, Bounds: bounds}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	if a, err := redisscript.AcquireKey(ctx, rdb, ks, cfg.Name, "alice", "app", 5); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	st, err := redisscript.ReadKeyState(ctx, rdb, ks, cfg.Name, "alice")
	if err != nil || !st.Exists || st.ID != cfg.ID || st.QuotaUsed != 5 || len(st.Bounds) != len(bounds) {
		t.Fatalf("state: %+v, %v", st, err)
	}
	used, start, end, ok := st.Quota(cfg.ID)
	s, e, _ := quota.Find(bounds, st.Now.UnixMicro())
	if !ok || used != 5 || start.Unix() != s || end.Unix() != e || st.QuotaStart != s {
		t.Fatalf("quota: used %d of [%v, %v) ok %v; want 5 of [%d, %d)", used, start, end, ok, s, e)
	}
	if used, _, _, ok := st.Quota(cfg.ID + 1); !ok || used != 0 {
		t.Errorf("another incarnation's count: %d %v, want 0", used, ok)
	}
	old := st
	old.QuotaStart = s - 86400
	if used, _, _, _ := old.Quota(cfg.ID); used != 0 {
		t.Errorf("the previous period's count: %d, want 0", used)
	}
	none, err := redisscript.ReadKeyState(ctx, rdb, ks, cfg.Name, "bob")
	if used, _, end, ok := none.Quota(cfg.ID); err != nil || none.Exists || !ok || used != 0 || end.Unix() != e {
		t.Errorf("an unused key: %+v, %v", none, err)
	}
	out := st
	out.Now = time.Unix(bounds[len(bounds)-1]+1, 0)
	if _, _, _, ok := out.Quota(cfg.ID); ok {
		t.Error("a clock outside the table found a period")
	}
}
