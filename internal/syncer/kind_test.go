package syncer

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// A limit's kind reaches its hash (plain and keyed), without a rate, a
// token acquire never treats it as a bucket, and a hash whose kind differs
// from MySQL is repaired by the reconcile.
func TestKindSynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})

	c := &buckets.Bucket{Name: "inflight", OwnerApp: ownerApp, Kind: buckets.KindConcurrency, MaxPermits: 20}
	q := &buckets.Bucket{Name: "monthly", OwnerApp: ownerApp, Kind: buckets.KindQuota, MaxPermits: 10000, Keyed: true}
	for _, b := range []*buckets.Bucket{c, q} {
		if err := e.store.Create(ctx, actor, b); err != nil {
			t.Fatal(err)
		}
	}
	o := &buckets.Override{Bucket: "monthly", Kind: buckets.KindQuota, Match: buckets.MatchExact, Key: "big", MaxPermits: 50000}
	if err := e.store.CreateOverride(ctx, actor, o); err != nil {
		t.Fatal(err)
	}
	syncOnce(t, w)
	st := e.read(t, "inflight")
	if !st.Exists || st.Config.Kind != redisscript.KindConcurrency || st.Config.PermitsMicro != 0 || st.Config.Capacity != 20 {
		t.Fatalf("concurrency hash: %+v", st)
	}
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "inflight", ownerApp, 1); err == nil && a.Code == redisscript.Allowed {
		t.Fatalf("a token acquire on a concurrency limit was allowed: %+v", a)
	}
	gs, err := redisscript.ReadGroupConfigs(ctx, e.rdb, e.ks, "monthly")
	if err != nil {
		t.Fatal(err)
	}
	for g := range gs.Exists {
		if !gs.Exists[g] || gs.Configs[g].Kind != redisscript.KindQuota {
			t.Fatalf("group %d of the quota: %v %+v", g, gs.Exists[g], gs.Configs[g])
		}
	}

	if err := e.rdb.HSet(ctx, e.ks.Bucket("inflight"), redisscript.FieldKind, redisscript.KindBucket).Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := w.Reconcile(ctx)
	if err != nil || rep.Differing < 1 {
		t.Fatalf("reconcile: %+v %v, want the kind repaired", rep, err)
	}
	if st := e.read(t, "inflight"); st.Config.Kind != redisscript.KindConcurrency {
		t.Fatalf("after reconcile: %+v", st.Config)
	}
}
