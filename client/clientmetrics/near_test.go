package clientmetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/clientmetrics"
	"github.com/sluicehq/sluice/client/memlimit"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

func nearLimit(t *testing.T, reg *prometheus.Registry, app, bucket string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_client_near_limit_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["app"] == app && labels["bucket"] == bucket {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// observedLimiter is a Limiter of app "web" on rdb whose decisions the
// metrics in the returned registry count; it closes with the test.
func observedLimiter(t *testing.T, rdb redis.UniversalClient, prefix string) (*client.Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := clientmetrics.New(reg, "web")
	if err != nil {
		t.Fatal(err)
	}
	lim, err := client.New(rdb, "web", client.WithKeyPrefix(prefix), client.WithObserver(m.Observe),
		client.WithTimeout(5*time.Second), client.WithFailurePolicy(client.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	return lim, reg
}

// TestNearLimit counts acquires on real Redis after which 80% or more of
// the bucket was in use.
func TestNearLimit(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "b", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1, PeriodSeconds: 3600,
		Apps: []string{"web"}}
	if _, err := redisscript.Apply(context.Background(), rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	lim, reg := observedLimiter(t, rdb, prefix)
	ctx := context.Background()
	for i := 1; i <= 7; i++ {
		res, err := lim.Acquire(ctx, "b", 1)
		if err != nil || !res.Allowed {
			t.Fatal(res, err)
		}
		if got, want := res.Used(), float64(i)/10; got < want-1e-9 || got > want+1e-9 {
			t.Fatalf("acquire %d: used %v, want %v", i, got, want)
		}
	}
	if got := nearLimit(t, reg, "web", "b"); got != 0 {
		t.Fatalf("near limit after 70%%: %v", got)
	}
	for range 4 { // 80%, 90%, 100%, then a denial of an empty bucket
		lim.Allow(ctx, "b")
	}
	if got := nearLimit(t, reg, "web", "b"); got != 4 {
		t.Errorf("near limit = %v, want 4", got)
	}
}

func TestNearLimitThreshold(t *testing.T) {
	if _, err := clientmetrics.New(prometheus.NewRegistry(), "web", clientmetrics.WithNearLimit(1.5)); err == nil {
		t.Error("near limit 1.5 accepted")
	}
	reg := prometheus.NewRegistry()
	m, err := clientmetrics.New(reg, "web", clientmetrics.WithNearLimit(0.5))
	if err != nil {
		t.Fatal(err)
	}
	lim := memlimit.New("web", memlimit.WithObserver(m.Observe))
	if err := lim.Define("b", memlimit.Bucket{Capacity: 4, Permits: 1, Per: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		lim.Allow(context.Background(), "b") // 25%, 50%, 75%
	}
	if got := nearLimit(t, reg, "web", "b"); got != 2 {
		t.Errorf("near limit at 50%% = %v, want 2", got)
	}
	// Fallback answers and unknown limits are not counted.
	m.Observe(client.Decision{Bucket: "b", Result: client.Result{Allowed: true, Fallback: true, Limit: 4}})
	m.Observe(client.Decision{Bucket: "b", Result: client.Result{Allowed: true}})
	if got := nearLimit(t, reg, "web", "b"); got != 2 {
		t.Errorf("near limit counted a fallback or unknown limit: %v", got)
	}
}

// TestSlotTakesCounted: slot takes of a concurrency limit on real Redis
// are decisions of that limit, near the limit from 80% of its slots in
// use; a take on a token bucket is a wrong kind.
func TestSlotTakesCounted(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	for _, cfg := range []redisscript.Config{
		{Name: "jobs", ID: 1, Version: 1, Capacity: 5, Apps: []string{"web"}, Kind: redisscript.KindConcurrency, SlotMillis: 600_000},
		{Name: "tb", ID: 2, Version: 1, Capacity: 10, PermitsMicro: 1, PeriodSeconds: 3600, Apps: []string{"web"}},
	} {
		if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	lim, reg := observedLimiter(t, rdb, prefix)
	for i := 1; i <= 6; i++ { // 20% ... 100% in use, then a denial
		s, err := lim.TakeSlot(ctx, "jobs")
		if err != nil || s.Allowed != (i <= 5) {
			t.Fatalf("take %d: %+v %v", i, s.SlotResult, err)
		}
	}
	if _, err := lim.TakeSlot(ctx, "tb"); err != client.ErrWrongKind {
		t.Fatalf("take of a token bucket: %v", err)
	}
	for result, want := range map[string]float64{clientmetrics.ResultAllowed: 5, clientmetrics.ResultDenied: 1} {
		if got := decisions(t, reg, "web", "jobs", result); got != want {
			t.Errorf("%s = %v, want %v", result, got, want)
		}
	}
	if got := decisions(t, reg, "web", "tb", clientmetrics.ResultWrongKind); got != 1 {
		t.Errorf("wrong kind = %v, want 1", got)
	}
	if got := nearLimit(t, reg, "web", "jobs"); got != 3 { // 4 and 5 of 5 in use, and the denial
		t.Errorf("near limit = %v, want 3", got)
	}
}
