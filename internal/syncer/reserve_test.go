package syncer

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// The reserve of a plain bucket and of a keyed one reaches Redis with its
// events and is repaired by the reconcile, like every other setting; the
// keys of an override keep the bucket's share of its capacity.
func TestReserveSynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})

	b := &buckets.Bucket{Name: "pay", OwnerApp: ownerApp, MaxPermits: 5, Rate: mustRate(t, "1/day"), Reserve: 2}
	if err := e.store.Create(ctx, actor, b); err != nil {
		t.Fatal(err)
	}
	k := e.createKeyed(t, "api", 10, "1/day")
	k.Reserve = 5
	if err := e.store.Update(ctx, actor, k); err != nil {
		t.Fatal(err)
	}
	e.createOverride(t, "api", buckets.MatchExact, "vip", 4)
	syncOnce(t, w)
	if st := e.read(t, "pay"); st.Config.Reserve != 2 {
		t.Fatalf("after create: %+v, want reserve 2", st.Config)
	}
	// 3 go to any request, the last 2 to critical ones only.
	if a, err := redisscript.AcquireCritical(ctx, e.rdb, e.ks, "pay", ownerApp, 3, false); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("3 not critical: %+v %v", a, err)
	}
	if a, err := redisscript.AcquireCritical(ctx, e.rdb, e.ks, "pay", ownerApp, 1, false); err != nil || a.Code != redisscript.Denied {
		t.Fatalf("a fourth not critical: %+v %v", a, err)
	}
	if a, err := redisscript.AcquireCritical(ctx, e.rdb, e.ks, "pay", ownerApp, 2, true); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("2 critical: %+v %v", a, err)
	}
	for key, want := range map[string]int64{"plain": 5, "vip": 2} {
		a, err := redisscript.AcquireKeyCritical(ctx, e.rdb, e.ks, "api", key, ownerApp, 1, false)
		if err != nil || !a.HasReserve || a.Reserve != want {
			t.Fatalf("key %q: %+v %v, want reserve %d", key, a, err, want)
		}
	}

	// A reserve lost in Redis is repaired by the reconcile.
	if err := e.rdb.HSet(ctx, e.ks.Bucket("pay"), redisscript.FieldReserve, "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, e.ks.KeyGroup("api", 3), redisscript.FieldReserve, "0").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := w.Reconcile(ctx)
	if err != nil || rep.Differing != 2 {
		t.Fatalf("reconcile: %+v %v, want 2 differing", rep, err)
	}
	if st := e.read(t, "pay"); st.Config.Reserve != 2 {
		t.Fatalf("after reconcile: %+v, want reserve 2", st.Config)
	}
	if d := e.keyedDiff(t, "api"); len(d) > 0 {
		t.Fatalf("keyed bucket after reconcile: %v", d)
	}
	st, err := redisscript.ReadGroup(ctx, e.rdb, e.ks, "api", 3)
	if err != nil || st.Config.Reserve != 5 {
		t.Fatalf("group 3 after reconcile: %+v %v", st.Config, err)
	}
}
