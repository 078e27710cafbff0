package manage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// TestBucketReserve: the reserve is set at creation, changed by a patch,
// kept below the capacity (also when the capacity is lowered), reset by a
// full replace, and previewed with what it does.
func TestBucketReserve(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	fields := bucketFields("alpha-api", "alpha", 10, "1/s")
	fields.Reserve = ptr(int64(4))
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: fields})
	if err != nil || b.Reserve != 4 {
		t.Fatalf("created: %+v %v", b, err)
	}
	ch, err := f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{Reserve: ptr(int64(4))}})
	if err != nil || ch.Changed {
		t.Fatalf("the same reserve: %+v %v", ch, err)
	}
	ch, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{Reserve: ptr(int64(2))}})
	if err != nil || !ch.Changed || ch.Bucket.Reserve != 2 || ch.Bucket.Version != 2 {
		t.Fatalf("reserve 2: %+v %v", ch.Bucket, err)
	}
	// A capacity at or below the reserve is refused, naming the reserve.
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name,
		Fields: manage.BucketPatch{MaxPermits: ptr(int64(2))}})
	if msg := errs.Fields(err).For("reserve"); !strings.Contains(msg, "less than max_permits (2)") {
		t.Fatalf("capacity 2 under a reserve of 2: %v", err)
	}
	if stored, err := f.buckets.Get(ctx, b.Name); err != nil || stored.MaxPermits != 10 || stored.Reserve != 2 {
		t.Fatalf("a refused change was saved: %+v %v", stored, err)
	}
	// A full replace without a reserve has none.
	ch, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Replace: true,
		Fields: manage.BucketPatch{MaxPermits: ptr(int64(10)), Rate: ptr("1/s")}})
	if err != nil || ch.Bucket.Reserve != 0 {
		t.Fatalf("replace: %+v %v", ch.Bucket, err)
	}
	bad := bucketFields("alpha-bad", "alpha", 10, "1/s")
	bad.Reserve = ptr(int64(-1))
	if _, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bad}); errs.Fields(err).For("reserve") == "" {
		t.Fatalf("create with reserve -1: %v", err)
	}

	pv, err := f.svc.PreviewLimit(manage.PreviewLimit{Capacity: "20", Rate: "1/s", Reserve: "5", Burst: "25", Every: "10",
		Duration: "30"})
	if err != nil || pv.Reserve != 5 || pv.Simulation.TotalAllowed != 35 || !strings.HasPrefix(pv.ReserveSummary, "keeps 5 of its 20") {
		t.Fatalf("preview with a reserve: %+v %v", pv, err)
	}
	if _, err := f.svc.PreviewLimit(manage.PreviewLimit{Capacity: "20", Rate: "1/s", Reserve: "20"}); errs.Fields(err).For("reserve") == "" {
		t.Fatalf("preview with the whole capacity reserved: %v", err)
	}
}
