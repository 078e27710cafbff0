package syncer

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// redisMicros is Redis's clock in microseconds.
func redisMicros(t *testing.T, e *env) int64 {
	t.Helper()
	now, err := e.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

// checkReset checks that an answer given between Redis times t0 and t1
// (µs) reports the monthly period of Berlin containing them: its length
// and the time until it ends.
func checkReset(t *testing.T, what string, a redisscript.Answer, t0, t1 int64) {
	t.Helper()
	berlin, err := quota.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start := quota.Month.Start(time.UnixMicro(t0), berlin)
	end := quota.Month.Next(start, berlin)
	if !end.After(time.UnixMicro(t1)) {
		t.Skip("a month of Berlin ended during the call")
	}
	e := end.UnixMicro()
	if a.Code != redisscript.Allowed || a.Capacity != 10_000 || a.Remaining != 10_000-3 || a.PermitsMicro != 0 ||
		a.PeriodSeconds != end.Unix()-start.Unix() || a.ResetAfterMicros < e-t1 || a.ResetAfterMicros > e-t0 {
		t.Fatalf("%s: %+v; want 9997 left of 10000, a period of %d s resetting %d..%d µs from now (%s)",
			what, a, end.Unix()-start.Unix(), e-t1, e-t0, end)
	}
}

// TestQuotaSyncedAnswersWithReset creates monthly quotas of Berlin in
// MySQL, plain and keyed; once synced they answer in Redis with the
// time until the 1st of next month at 00:00 in Berlin.
func TestQuotaSyncedAnswersWithReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})
	plain := &buckets.Bucket{Name: "monthly", OwnerApp: ownerApp, Kind: buckets.KindQuota, MaxPermits: 10_000,
		QuotaPeriod: quota.Month, TimeZone: "Europe/Berlin"}
	keyed := &buckets.Bucket{Name: "per-key", OwnerApp: ownerApp, Kind: buckets.KindQuota, MaxPermits: 10_000,
		QuotaPeriod: quota.Month, TimeZone: "Europe/Berlin", Keyed: true}
	for _, b := range []*buckets.Bucket{plain, keyed} {
		if err := e.store.Create(ctx, actor, b); err != nil {
			t.Fatal(err)
		}
	}
	syncOnce(t, w)

	t0 := redisMicros(t, e)
	a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "monthly", ownerApp, 3)
	if err != nil {
		t.Fatal(err)
	}
	t1 := redisMicros(t, e)
	checkReset(t, "plain quota", a, t0, t1)

	t0 = redisMicros(t, e)
	ka, err := redisscript.AcquireKey(ctx, e.rdb, e.ks, "per-key", "api-key-1", ownerApp, 3)
	if err != nil {
		t.Fatal(err)
	}
	t1 = redisMicros(t, e)
	checkReset(t, "keyed quota", ka.Answer, t0, t1)

	st := e.read(t, "monthly")
	if st.Used != 3 || st.PeriodEnd.IsZero() {
		t.Fatalf("read: used %d, period %s..%s; want 3 used", st.Used, st.PeriodStart, st.PeriodEnd)
	}
}

// TestReconcileRenewsQuotaTables writes tables about to run out (computed
// 47 hours ago: they reach about an hour past now) into an hourly quota's
// hash and a keyed one's groups; the reconcile renews them, keeping the
// count, and a table written in the current hour is left alone.
func TestReconcileRenewsQuotaTables(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})
	plain := &buckets.Bucket{Name: "hourly", OwnerApp: ownerApp, Kind: buckets.KindQuota, MaxPermits: 100,
		QuotaPeriod: quota.Hour, TimeZone: "UTC"}
	keyed := &buckets.Bucket{Name: "hourly-keyed", OwnerApp: ownerApp, Kind: buckets.KindQuota, MaxPermits: 100,
		QuotaPeriod: quota.Hour, TimeZone: "UTC", Keyed: true}
	for _, b := range []*buckets.Bucket{plain, keyed} {
		if err := e.store.Create(ctx, actor, b); err != nil {
			t.Fatal(err)
		}
	}
	syncOnce(t, w)
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "hourly", ownerApp, 5); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}

	old := time.Now().Add(-47 * time.Hour)
	stale := quota.Table(quota.Hour, time.UTC, old)
	for _, b := range []*buckets.Bucket{plain, keyed} {
		cfg := ConfigOf(b)
		cfg.Bounds = stale
		apply := redisscript.Apply
		if b.Keyed {
			apply = func(ctx context.Context, _ redis.Scripter, ks redisscript.Keyspace, c redisscript.Config, f bool) (redisscript.ApplyOutcome, error) {
				return redisscript.ApplyKeyed(ctx, e.rdb, ks, c, f)
			}
		}
		if out, err := apply(ctx, e.rdb, e.ks, cfg, false); err != nil || out != redisscript.Updated {
			t.Fatalf("write a stale table into %s: %v %v", b.Name, out, err)
		}
	}
	if st := e.read(t, "hourly"); !slices.Equal(st.Config.Bounds, stale) {
		t.Fatalf("the stale table was not written: %v", st.Config.Bounds)
	}

	hour := time.Now().Truncate(time.Hour)
	rep, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tables != 2 || rep.Repaired() != 0 {
		t.Fatalf("reconcile: %+v; want the 2 tables renewed and nothing repaired", rep)
	}
	now := time.Now()
	st := e.read(t, "hourly")
	b := st.Config.Bounds
	if len(b) < 2 || b[len(b)-1] < now.Add(quota.Ahead-time.Hour).Unix() || b[1] > now.Unix() {
		t.Fatalf("renewed table %v does not reach %s past now", b, quota.Ahead)
	}
	if st.Used != 5 || st.Config.Version != plain.Version {
		t.Fatalf("renewing the table changed the count or version: used %d, version %d", st.Used, st.Config.Version)
	}
	for g := range redisscript.KeyGroups {
		gs, err := redisscript.ReadGroup(ctx, e.rdb, e.ks, "hourly-keyed", g)
		if err != nil {
			t.Fatal(err)
		}
		if gb := gs.Config.Bounds; len(gb) < 2 || gb[len(gb)-1] < now.Add(quota.Ahead-time.Hour).Unix() {
			t.Fatalf("group %d kept table %v", g, gb)
		}
	}

	again, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if time.Now().Truncate(time.Hour).Equal(hour) && again.Tables != 0 {
		t.Fatalf("second reconcile in the same hour: %+v; want no table written", again)
	}
}

func TestTableCurrent(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 30, 0, 0, time.UTC)
	want := quota.Table(quota.Hour, time.UTC, at)
	for _, tc := range []struct {
		name   string
		stored []int64
		ok     bool
	}{
		{"same", want, true},
		{"written earlier this hour", quota.Table(quota.Hour, time.UTC, at.Add(-20*time.Minute)), true},
		{"written by a clock ahead", quota.Table(quota.Hour, time.UTC, at.Add(time.Hour)), true},
		{"written an hour ago", quota.Table(quota.Hour, time.UTC, at.Add(-time.Hour)), false},
		{"none", nil, false},
		{"another period", quota.Table(quota.Day, time.UTC, at), false},
		{"another zone", quota.Table(quota.Hour, time.FixedZone("half", 1800), at), false},
	} {
		if got := tableCurrent(tc.stored, want); got != tc.ok {
			t.Errorf("%s: tableCurrent = %v; want %v", tc.name, got, tc.ok)
		}
	}
	if !tableCurrent(nil, nil) || tableCurrent(want, nil) {
		t.Error("a limit without a table must have none")
	}
}
