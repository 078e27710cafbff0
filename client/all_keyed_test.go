package client_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// "2 per user and 3 in all": a key of a keyed bucket and a plain bucket in
// one AcquireAll, granted together or not charged at all.
func TestAcquireAllKeyed(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.defineKeyed(t, "per-user", 2, slow, 3600, "svc")
	e.define(t, "global", 3, slow, 3600, "svc")
	e.override(t, "per-user", 1, redisscript.MatchExact, "vip", 5)
	var mu sync.Mutex
	var seen []client.Decision
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second),
		client.WithObserver(func(d client.Decision) { mu.Lock(); seen = append(seen, d); mu.Unlock() }))
	ctx := context.Background()
	both := func(user string, n int64) []client.Request {
		return []client.Request{{Bucket: "per-user", Key: user, N: n}, {Bucket: "global", N: 1}}
	}

	res, err := l.AcquireAll(ctx, both("alice", 1))
	if err != nil || !res.Allowed || res.Each[0].Remaining != 1 || res.Each[0].Limit != 2 || res.Each[1].Remaining != 2 {
		t.Fatalf("both granted: %+v %v", res, err)
	}
	mu.Lock()
	if len(seen) != 2 || seen[0].Key != "alice" || seen[0].Bucket != "per-user" || seen[1].Key != "" {
		t.Errorf("observed decisions: %+v", seen)
	}
	mu.Unlock()
	// alice's tokens are the ones AcquireKey sees.
	if r, err := l.AcquireKey(ctx, "per-user", "alice", 1); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("AcquireKey after the set: %+v %v", r, err)
	}
	// alice is out: the global bucket is not charged.
	res, err = l.AcquireAll(ctx, both("alice", 1))
	if err != nil || res.Allowed || res.Each[0].RetryAfter <= 0 || res.RetryAfter != res.Each[0].RetryAfter {
		t.Fatalf("key denies: %+v %v", res, err)
	}
	if got := e.tokensOf(t, "global"); got < 2 || got > 2.001 {
		t.Errorf("global holds %v, want 2: a denied set charged it", got)
	}
	// An exact override gives vip 5.
	res, err = l.AcquireAll(ctx, both("vip", 4))
	if err != nil || !res.Allowed || res.Each[0].Limit != 5 || res.Each[0].Remaining != 1 {
		t.Fatalf("override: %+v %v", res, err)
	}
	// global is at 1: a set taking 2 of it denies, and bob keeps his tokens.
	res, err = l.AcquireAll(ctx, []client.Request{{Bucket: "per-user", Key: "bob", N: 2}, {Bucket: "global", N: 2}})
	if err != nil || res.Allowed || res.Each[0].Allowed || res.Each[0].RetryAfter != 0 || res.Each[1].RetryAfter <= 0 {
		t.Fatalf("global denies: %+v %v", res, err)
	}
	if r, err := l.AcquireKey(ctx, "per-user", "bob", 2); err != nil || !r.Allowed {
		t.Fatalf("bob after a denied set: %+v %v, want his 2 tokens", r, err)
	}

	// Errors name the request, and are those of the single acquires.
	for _, tc := range []struct {
		name string
		reqs []client.Request
		want error
		text string
	}{
		{"keyed request on a plain bucket", []client.Request{{Bucket: "per-user", Key: "c", N: 1}, {Bucket: "global", Key: "c", N: 1}},
			client.ErrUnknownBucket, `request 1 (bucket "global")`},
		{"plain request on a keyed bucket", []client.Request{{Bucket: "global", N: 1}, {Bucket: "per-user", N: 1}},
			client.ErrUnknownBucket, `request 1 (bucket "per-user")`},
		{"key too long", []client.Request{{Bucket: "global", N: 1}, {Bucket: "per-user", Key: strings.Repeat("k", 257), N: 1}},
			client.ErrInvalidKey, `request 1`},
		{"over the key's capacity", []client.Request{{Bucket: "per-user", Key: "c", N: 3}}, client.ErrExceedsCapacity, `request 0`},
	} {
		_, err := l.AcquireAll(ctx, tc.reqs)
		if !errors.Is(err, tc.want) || !contains(err.Error(), tc.text) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if got := e.tokensOf(t, "global"); got < 1 || got > 1.001 {
		t.Errorf("global holds %v after refused sets, want 1", got)
	}
	if r, err := l.AcquireKey(ctx, "per-user", "c", 2); err != nil || !r.Allowed {
		t.Errorf("c after refused sets: %+v %v, want full", r, err)
	}
}

// A keyed bucket in shadow mode never holds back the set.
func TestAcquireAllKeyedShadow(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	cfg := redisscript.Config{Name: "per-user", ID: 1, Version: 1, Capacity: 1, PermitsMicro: slow, PeriodSeconds: 3600,
		Apps: []string{"svc"}, Shadow: true}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks(), cfg, false); err != nil {
		t.Fatal(err)
	}
	e.define(t, "global", 10, slow, 3600, "svc")
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	ctx := context.Background()
	reqs := []client.Request{{Bucket: "per-user", Key: "u", N: 1}, {Bucket: "global", N: 1}}
	for i := range 3 {
		res, err := l.AcquireAll(ctx, reqs)
		if err != nil || !res.Allowed || res.Each[0].WouldDeny != (i > 0) {
			t.Fatalf("set %d: %+v %v", i, res, err)
		}
	}
	if got := e.tokensOf(t, "global"); got < 7 || got > 7.001 {
		t.Errorf("global holds %v, want 7", got)
	}
}

// crc16 is Redis Cluster's key hash (XMODEM), for finding keys that share
// a slot.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// On Redis Cluster a keyed request goes with a plain bucket only when the
// key's group shares the bucket's slot; otherwise ErrCrossSlot names the
// requests and nothing is charged.
func TestClusterAcquireAllKeyed(t *testing.T) {
	cluster := testenv.StartCluster(t, 3)
	rdb := cluster.Client(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, redisscript.Config{Name: "per-user", ID: 1, Version: 1, Capacity: 2,
		PermitsMicro: slow, PeriodSeconds: 3600, Apps: []string{"svc"}}, false); err != nil {
		t.Fatal(err)
	}
	// A plain bucket in the slot of group 0's tag, and one elsewhere.
	want := crc16("per-user:0")
	near, far := "", ""
	for i := 0; near == "" || far == ""; i++ {
		name := "g-" + strconv.Itoa(i)
		if crc16(name) == want {
			near = name
		} else if far == "" {
			far = name
		}
	}
	key := ""
	for i := 0; key == ""; i++ {
		if k := "user-" + strconv.Itoa(i); ks.Keyed("per-user", k).Group == 0 {
			key = k
		}
	}
	for i, name := range []string{near, far} {
		if _, err := redisscript.Apply(ctx, rdb, ks, redisscript.Config{Name: name, ID: int64(i + 1), Version: 1, Capacity: 10,
			PermitsMicro: slow, PeriodSeconds: 3600, Apps: []string{"svc"}}, false); err != nil {
			t.Fatal(err)
		}
	}
	l, err := client.New(rdb, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	res, err := l.AcquireAll(ctx, []client.Request{{Bucket: "per-user", Key: key, N: 1}, {Bucket: near, N: 1}})
	if err != nil || !res.Allowed || res.Each[0].Remaining != 1 || res.Each[1].Remaining != 9 {
		t.Fatalf("one slot: %+v %v", res, err)
	}
	_, err = l.AcquireAll(ctx, []client.Request{{Bucket: "per-user", Key: key, N: 1}, {Bucket: far, N: 1}})
	if !errors.Is(err, client.ErrCrossSlot) || !contains(err.Error(), `request 1 (bucket "`+far+`")`) {
		t.Fatalf("cross slot: %v", err)
	}
	st, err := redisscript.Read(ctx, rdb, ks, far)
	if err != nil || st.Stored != 10 {
		t.Errorf("%s after a cross-slot set: %+v %v", far, st, err)
	}
	if r, err := l.AcquireKey(ctx, "per-user", key, 1); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Errorf("key after a cross-slot set: %+v %v, want 1 left before", r, err)
	}
}
