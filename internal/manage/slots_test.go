package manage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestConcurrencyLiveState: a concurrency limit's live state counts the
// slots in use (read from Redis), its free slots standing for tokens.
func TestConcurrencyLiveState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	kind, slot := string(buckets.KindConcurrency), int64(60_000)
	fields := manage.BucketPatch{Name: ptr("exports"), OwnerApp: ptr("alpha"), Kind: &kind, MaxPermits: ptr(int64(3)),
		SlotMillis: &slot}
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	if b.SlotMillis != 60_000 {
		t.Fatalf("created: %+v", b)
	}
	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: b.Version, Capacity: 3, Apps: []string{"alpha"},
		Kind: redisscript.KindConcurrency, SlotMillis: b.SlotMillis}
	if _, err := redisscript.Apply(ctx, f.rdb, f.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if a, err := redisscript.RunSlot(ctx, f.rdb, f.ks, b.Name, "", "alpha", redisscript.SlotTake, id); err != nil || a.Code != redisscript.Allowed {
			t.Fatalf("take %s: %+v %v", id, a, err)
		}
	}
	_, st, err := f.svc.BucketState(ctx, olga, b.Name)
	if err != nil || !st.Slots || st.InUse != 2 || st.Tokens != 1 || st.NextExpiry.IsZero() || st.Sync != manage.InSync {
		t.Fatalf("live state: %+v %v, want 2 slots in use, 1 free", st, err)
	}
	if d := st.NextExpiry.Sub(st.RedisTime); d <= 0 || d > 60e9 {
		t.Errorf("the first slot expires %v after the read", d)
	}
}

// TestPreviewConcurrency: the preview of a concurrency limit plays the
// pattern against its slots, each call lasting the hold given.
func TestPreviewConcurrency(t *testing.T) {
	f := newFixture(t)
	pv, err := f.svc.PreviewLimit(manage.PreviewLimit{Kind: "concurrency", Capacity: "5", Steady: "10", Duration: "4",
		Hold: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Simulation.TotalAllowed != 10 || pv.Simulation.TotalDenied != 30 || !strings.Contains(pv.Summary, "5 calls in progress") {
		t.Errorf("preview: %+v", pv)
	}
	if pv.Rate.PerSecond() != 2.5 {
		t.Errorf("sustained: %v per second, want 5 slots / 2 s", pv.Rate.PerSecond())
	}
	_, err = f.svc.PreviewLimit(manage.PreviewLimit{Kind: "concurrency", Capacity: "0", Steady: "1", Duration: "4", Hold: "x"})
	if v := errs.Fields(err); v.For("max_permits") == "" || v.For("hold") == "" {
		t.Errorf("a bad limit and hold: %v", err)
	}
}
