package manage_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// TestKeyStateByKind: a key of a keyed concurrency limit has its slots in
// use and first expiry; a key of a keyed quota its count this period and
// the reset; both read from Redis, under the limit that applies to the
// key (an override's count, with no rate).
func TestKeyStateByKind(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")

	slots, lease := string(buckets.KindConcurrency), int64(60_000)
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: manage.BucketPatch{Name: ptr("exports"),
		OwnerApp: ptr("alpha"), Kind: &slots, MaxPermits: ptr(int64(3)), SlotMillis: &lease, Keyed: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: b.Version, Capacity: 3, Apps: []string{"alpha"},
		Kind: redisscript.KindConcurrency, SlotMillis: lease}
	if _, err := redisscript.ApplyKeyed(ctx, f.rdb, f.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	if a, err := redisscript.RunSlot(ctx, f.rdb, f.ks, b.Name, "alice", "alpha", redisscript.SlotTake, "s1"); err != nil ||
		a.Code != redisscript.Allowed {
		t.Fatalf("take: %+v %v", a, err)
	}
	if _, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: b.Name, Fields: manage.OverridePatch{
		Match: ptr("exact"), Key: ptr("alice"), MaxPermits: ptr(int64(8)), Rate: ptr("")}}); err != nil {
		t.Fatal(err)
	}
	_, st, err := f.svc.KeyState(ctx, olga, b.Name, "alice")
	if err != nil || st.Kind != buckets.KindConcurrency || st.InUse != 1 || st.MaxPermits != 8 || st.Override == nil {
		t.Fatalf("alice: %+v %v", st, err)
	}
	if d := st.NextExpiry.Sub(st.RedisTime); d <= 0 || d > time.Minute {
		t.Errorf("alice's slot expires %v after the read, want within the lease of 1 min", d)
	}
	// Readers of tokens (the JSON API) see what the key may still take.
	if st.Tokens != 7 || st.Full || !st.FullAt.Equal(st.NextExpiry) {
		t.Errorf("alice's tokens %v, full %v at %v; want 7 free slots, all back at the slot's expiry", st.Tokens, st.Full, st.FullAt)
	}
	if _, st, err = f.svc.KeyState(ctx, olga, b.Name, "bob"); err != nil || st.InUse != 0 || !st.NextExpiry.IsZero() || st.MaxPermits != 3 ||
		st.Tokens != 3 || !st.Full {
		t.Fatalf("bob: %+v %v", st, err)
	}

	kind, period, zone := string(buckets.KindQuota), string(quota.Day), "UTC"
	q, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: manage.BucketPatch{Name: ptr("daily"),
		OwnerApp: ptr("alpha"), Kind: &kind, MaxPermits: ptr(int64(100)), QuotaPeriod: &period, TimeZone: &zone, Keyed: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	bounds := quota.Table(quota.Day, time.UTC, time.Now())
	cfg = redisscript.Config{Name: q.Name, ID: q.ID, Version: q.Version, Capacity: 100, Apps: []string{"alpha"},
		Kind: redisscript.KindQuota, Bounds: bounds}
	if _, err := redisscript.ApplyKeyed(ctx, f.rdb, f.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	if a, err := redisscript.AcquireKey(ctx, f.rdb, f.ks, q.Name, "alice", "alpha", 4); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	_, st, err = f.svc.KeyState(ctx, olga, q.Name, "alice")
	if err != nil || st.Kind != buckets.KindQuota || st.Used != 4 || st.MaxPermits != 100 || st.Tokens != 96 || st.Full {
		t.Fatalf("alice's quota: %+v %v", st, err)
	}
	s, e, _ := quota.Find(bounds, st.RedisTime.UnixMicro())
	if st.PeriodStart.Unix() != s || st.PeriodEnd.Unix() != e || !st.FullAt.Equal(st.PeriodEnd) {
		t.Errorf("period [%v, %v), want [%d, %d)", st.PeriodStart, st.PeriodEnd, s, e)
	}
	if _, st, err = f.svc.KeyState(ctx, olga, q.Name, "bob"); err != nil || st.Used != 0 || st.PeriodEnd.Unix() != e || !st.Full {
		t.Fatalf("bob's quota: %+v %v", st, err)
	}
}
