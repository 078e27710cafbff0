package clientmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/clientmetrics"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

func decisions(t *testing.T, reg *prometheus.Registry, app, bucket, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_client_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["app"] == app && labels["bucket"] == bucket && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func observations(t *testing.T, reg *prometheus.Registry, source string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_client_acquire_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == source {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestLimiterMetrics runs a real Limiter on the test Redis, then kills
// its connection to see the fallback results and gauge.
func TestLimiterMetrics(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "b", ID: 1, Version: 1, Capacity: 3, PermitsMicro: 1_000_000, PeriodSeconds: 3600, Apps: []string{"web"}}
	if _, err := redisscript.Apply(context.Background(), rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := clientmetrics.New(reg, "web")
	if err != nil {
		t.Fatal(err)
	}
	lim, err := client.New(rdb, "web", client.WithKeyPrefix(prefix), client.WithObserver(m.Observe),
		client.WithTimeout(5*time.Second), client.WithFailurePolicy(client.FailOpen), client.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	ctx := context.Background()
	for range 5 {
		lim.Allow(ctx, "b")
	}
	_, _ = lim.Acquire(ctx, "nope", 1)
	_, _ = lim.Acquire(ctx, "b", 0)
	_, _ = lim.Acquire(ctx, "b", 10)
	_, _ = lim.Acquire(ctx, "{bad}", 1)
	for result, want := range map[string]float64{"allowed": 3, "denied": 2, "invalid_n": 1, "exceeds_capacity": 1} {
		if got := decisions(t, reg, "web", "b", result); got != want {
			t.Errorf("b %s = %v, want %v", result, got, want)
		}
	}
	if got := decisions(t, reg, "web", "nope", "unknown_bucket"); got != 1 {
		t.Errorf("nope unknown_bucket = %v", got)
	}
	if got := decisions(t, reg, "web", clientmetrics.BucketInvalid, "unknown_bucket"); got != 1 {
		t.Errorf("invalid name = %v", got)
	}
	const gauge = `
# HELP sluice_client_fallback 1 while the app's Limiter answers by its failure policy (Redis unreachable), else 0.
# TYPE sluice_client_fallback gauge
sluice_client_fallback{app="web"} %d
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(gauge, 0)), "sluice_client_fallback"); err != nil {
		t.Error(err)
	}
	if n := observations(t, reg, "redis"); n != 9 {
		t.Errorf("%d latencies from redis, want 9", n)
	}

	// A Limiter whose Redis is gone answers by policy.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer dead.Close()
	lim2, err := client.New(dead, "web", client.WithObserver(m.Observe), client.WithFailurePolicy(client.FailOpen),
		client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer lim2.Close()
	for range 3 {
		if res, err := lim2.Acquire(ctx, "b", 1); err != nil || !res.Fallback {
			t.Fatalf("dead redis: %+v %v", res, err)
		}
	}
	if got := decisions(t, reg, "web", "b", "fallback_allowed"); got != 3 {
		t.Errorf("fallback_allowed = %v, want 3", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(gauge, 1)), "sluice_client_fallback"); err != nil {
		t.Error(err)
	}
	// A Redis answer turns the gauge off again.
	lim.Allow(ctx, "b")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(gauge, 0)), "sluice_client_fallback"); err != nil {
		t.Error(err)
	}
	if n := observations(t, reg, "policy"); n != 3 {
		t.Errorf("%d latencies from the policy, want 3", n)
	}
}

func TestResults(t *testing.T) {
	fb := client.Result{Fallback: true}
	for want, d := range map[string]client.Decision{
		clientmetrics.ResultAllowed:         {Result: client.Result{Allowed: true}},
		clientmetrics.ResultWouldDeny:       {Result: client.Result{Allowed: true, WouldDeny: true}},
		clientmetrics.ResultDenied:          {},
		clientmetrics.ResultFallbackAllowed: {Result: client.Result{Allowed: true, Fallback: true}},
		clientmetrics.ResultFallbackDenied:  {Result: fb},
		clientmetrics.ResultUnavailable:     {Result: fb, Err: client.ErrUnavailable},
		clientmetrics.ResultUnknownBucket:   {Err: client.ErrUnknownBucket},
		clientmetrics.ResultAppNotAllowed:   {Err: client.ErrAppNotAllowed},
		clientmetrics.ResultExceedsCapacity: {Err: client.ErrExceedsCapacity},
		clientmetrics.ResultInvalidN:        {Err: client.ErrInvalidN},
		clientmetrics.ResultCanceled:        {Err: fmt.Errorf("wait: %w", context.DeadlineExceeded)},
		clientmetrics.ResultClosed:          {Err: client.ErrClosed},
		clientmetrics.ResultError:           {Err: errors.New("boom")},
		clientmetrics.ResultWrongKind:       {Err: client.ErrWrongKind, Slot: true},
	} {
		if got := clientmetrics.ResultOf(d); got != want {
			t.Errorf("ResultOf(%+v) = %q, want %q", d, got, want)
		}
	}
}

// TestBucketLabelLimit checks that unbounded bucket names cannot grow the
// series past the limit, and that two apps share one registry.
func TestBucketLabelLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := clientmetrics.New(reg, "a", clientmetrics.WithMaxBuckets(3))
	if err != nil {
		t.Fatal(err)
	}
	b, err := clientmetrics.New(reg, "b")
	if err != nil {
		t.Fatalf("second app on one registry: %v", err)
	}
	for i := range 10 {
		a.Observe(client.Decision{Bucket: fmt.Sprintf("n%d", i), Result: client.Result{Allowed: true}})
	}
	b.Observe(client.Decision{Bucket: "n9", Result: client.Result{Allowed: true}})
	if got := decisions(t, reg, "a", clientmetrics.BucketOther, "allowed"); got != 7 {
		t.Errorf("other = %v, want 7", got)
	}
	if got := decisions(t, reg, "a", "n2", "allowed"); got != 1 {
		t.Errorf("n2 = %v, want 1", got)
	}
	if got := decisions(t, reg, "b", "n9", "allowed"); got != 1 {
		t.Errorf("b n9 = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(reg, "sluice_client_decisions_total"); n != 5 {
		t.Errorf("%d decision series, want 5", n)
	}
	for name, f := range map[string]func() error{
		"nil registerer": func() error { _, err := clientmetrics.New(nil, "a"); return err },
		"bad app":        func() error { _, err := clientmetrics.New(reg, "A,b"); return err },
		"negative max":   func() error { _, err := clientmetrics.New(reg, "a", clientmetrics.WithMaxBuckets(-1)); return err },
	} {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	m, err := clientmetrics.New(prometheus.NewRegistry(), "svc")
	if err != nil {
		b.Fatal(err)
	}
	d := client.Decision{Bucket: "bench", N: 1, Result: client.Result{Allowed: true}, Latency: 30 * time.Microsecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe(d)
		}
	})
}

// TestWatch exports the Limiter's breaker openings and time in fallback:
// 0 on a healthy Redis, one opening once Redis is gone for good.
func TestWatch(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	cfg := redisscript.Config{Name: "w", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1,
		Apps: []string{"web"}}
	if _, err := redisscript.Apply(ctx, rdb, redisscript.Keyspace{}, cfg, false); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := clientmetrics.New(reg, "web")
	if err != nil {
		t.Fatal(err)
	}
	// A timeout a loaded machine cannot reach: the first acquire must be
	// answered by Redis, and a killed one refuses at once.
	l, err := client.New(rdb, "web", client.WithObserver(m.Observe), client.WithLogger(slog.New(slog.DiscardHandler)),
		client.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := m.Watch(l); err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(l); err == nil {
		t.Error("a second Limiter of the same app was watched")
	}
	if _, err := l.Acquire(ctx, "w", 1); err != nil {
		t.Fatal(err)
	}
	expect := func(openings float64) {
		t.Helper()
		want := fmt.Sprintf(`
# HELP sluice_client_breaker_openings_total Times the circuit breaker opened because Redis stopped answering.
# TYPE sluice_client_breaker_openings_total counter
sluice_client_breaker_openings_total{app="web"} %v
`, openings)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_client_breaker_openings_total"); err != nil {
			t.Error(err)
		}
	}
	expect(0)
	srv.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().BreakerOpenings == 0 && time.Now().Before(deadline) {
		l.Acquire(ctx, "w", 1)
		time.Sleep(time.Millisecond)
	}
	expect(1)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var fallback float64
	for _, mf := range mfs {
		if mf.GetName() == "sluice_client_fallback_seconds_total" {
			fallback = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if fallback <= 0 {
		t.Errorf("fallback seconds %v after Redis went away", fallback)
	}
}
