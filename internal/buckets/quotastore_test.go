package buckets_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// TestQuotaStoreRoundTrip stores a quota's period and zone, reads them
// back, and changes them.
func TestQuotaStoreRoundTrip(t *testing.T) {
	_, s := setup(t)
	b := &buckets.Bucket{Name: "monthly", OwnerApp: "shop", Kind: buckets.KindQuota, MaxPermits: 10_000,
		QuotaPeriod: quota.Month, TimeZone: "Europe/Berlin"}
	create(t, s, b)
	got, err := s.Get(ctx, "monthly")
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != buckets.KindQuota || got.QuotaPeriod != quota.Month || got.TimeZone != "Europe/Berlin" || !got.Rate.IsZero() {
		t.Fatalf("stored quota %+v", got)
	}
	got.QuotaPeriod, got.TimeZone = quota.Day, ""
	if err := s.Update(ctx, bob, got); err != nil {
		t.Fatal(err)
	}
	again, err := s.Get(ctx, "monthly")
	if err != nil {
		t.Fatal(err)
	}
	if again.QuotaPeriod != quota.Day || again.TimeZone != "UTC" || again.Version != 2 {
		t.Fatalf("updated quota %+v; want a daily quota in UTC at version 2", again)
	}
	plain := create(t, s, newBucket(t, "plain"))
	if p, _ := s.Get(ctx, plain.Name); p.QuotaPeriod != "" || p.TimeZone != "" {
		t.Fatalf("a token bucket stored a calendar: %+v", p)
	}
}
