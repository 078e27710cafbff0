package usage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// fixture is a test's key space with a Reader whose clock stands still.
type fixture struct {
	rdb *redis.Client
	ks  redisscript.Keyspace
	r   *Reader
	now time.Time
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	// 10:37:20 UTC: inside a 15-minute slot and an hour, to test alignment.
	now := time.Date(2026, 3, 4, 10, 37, 20, 0, time.UTC)
	r := NewReader(rdb, ks)
	r.now = func() time.Time { return now }
	return fixture{rdb: rdb, ks: ks, r: r, now: now}
}

// add writes counts as a Recorder would: the minute hash and its hour.
func (f fixture) add(t testing.TB, bucket, app string, at time.Time, allowed, denied int64) {
	t.Helper()
	ctx := context.Background()
	pipe := f.rdb.Pipeline()
	for _, k := range []string{f.ks.UsageMinute(bucket, at.Unix()/60), f.ks.UsageHour(bucket, at.Unix()/3600)} {
		if allowed != 0 {
			pipe.HIncrBy(ctx, k, redisscript.UsageAllowedField(app), allowed)
		}
		if denied != 0 {
			pipe.HIncrBy(ctx, k, redisscript.UsageDeniedField(app), denied)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSeriesHour(t *testing.T) {
	f := newFixture(t)
	f.add(t, "b", "web", f.now, 5, 1)                      // current minute: last point
	f.add(t, "b", "web", f.now.Add(-59*time.Minute), 7, 0) // first point
	f.add(t, "b", "web", f.now.Add(-60*time.Minute), 100, 100)
	f.add(t, "b", "batch", f.now.Add(-10*time.Minute), 1, 2)
	f.add(t, "b", "batch", f.now.Add(-10*time.Minute), 1, 0)
	f.add(t, "other", "web", f.now, 1000, 1000)
	// Junk a Recorder never writes is skipped.
	ctx := context.Background()
	f.rdb.HSet(ctx, f.ks.UsageMinute("b", f.now.Unix()/60), "web:x", 3, "Bad:a", 4, "web:d", "x")

	s, err := f.r.Series(ctx, "b", Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Times) != 60 || s.Step != time.Minute {
		t.Fatalf("%d points of %v, want 60 of a minute", len(s.Times), s.Step)
	}
	if want := time.Date(2026, 3, 4, 9, 38, 0, 0, time.UTC); !s.Times[0].Equal(want) {
		t.Errorf("first point %v, want %v", s.Times[0], want)
	}
	if want := time.Date(2026, 3, 4, 10, 37, 0, 0, time.UTC); !s.Times[59].Equal(want) {
		t.Errorf("last point %v, want %v", s.Times[59], want)
	}
	if len(s.Apps) != 2 || s.Apps[0].App != "web" || s.Apps[1].App != "batch" {
		t.Fatalf("apps %+v, want web then batch", s.Apps)
	}
	web, batch := s.Apps[0], s.Apps[1]
	if web.Allowed[59] != 5 || web.Denied[59] != 0 || web.Allowed[0] != 7 || web.TotalAllowed != 12 || web.TotalDenied != 0 {
		t.Errorf("web: %+v", web)
	}
	if batch.Allowed[49] != 2 || batch.Denied[49] != 2 || batch.TotalAllowed != 2 || batch.TotalDenied != 2 {
		t.Errorf("batch: %+v", batch)
	}
	if s.Allowed != 14 || s.Denied != 2 {
		t.Errorf("totals %d/%d, want 14/2", s.Allowed, s.Denied)
	}
}

func TestSeriesDayAndWeek(t *testing.T) {
	f := newFixture(t)
	f.add(t, "b", "web", f.now, 1, 0)                      // slot 10:00, the last
	f.add(t, "b", "web", f.now.Add(-7*time.Minute), 2, 0)  // 10:30: 10:00 too
	f.add(t, "b", "web", f.now.Add(-38*time.Minute), 4, 0) // 09:59: slot 09:00
	f.add(t, "b", "web", f.now.Add(-23*time.Hour), 8, 16)  // 11:37 yesterday: the first slot
	f.add(t, "b", "web", f.now.Add(-24*time.Hour), 32, 0)  // 10:37 yesterday: outside
	f.add(t, "b", "web", f.now.Add(-6*24*time.Hour-23*time.Hour), 64, 0)

	day, err := f.r.Series(context.Background(), "b", Day)
	if err != nil {
		t.Fatal(err)
	}
	// Hours: 25 reads of hour hashes, never 1,440 of minute hashes.
	if len(day.Times) != 24 || day.Step != time.Hour || day.Times[23] != time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC) {
		t.Fatalf("day: %d points of %v, last %v", len(day.Times), day.Step, day.Times[len(day.Times)-1])
	}
	w := day.Apps[0]
	if w.Allowed[23] != 3 || w.Allowed[22] != 4 || w.Allowed[0] != 8 || w.Denied[0] != 16 || w.TotalAllowed != 15 {
		t.Errorf("day: %v / %v", w.Allowed, w.Denied)
	}

	week, err := f.r.Series(context.Background(), "b", Week)
	if err != nil {
		t.Fatal(err)
	}
	if len(week.Times) != 168 || week.Times[167] != time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC) {
		t.Fatalf("week: %d points, last %v", len(week.Times), week.Times[len(week.Times)-1])
	}
	w = week.Apps[0]
	// The hour 10:00 today holds 1+2 (10:37, 10:30); 09:00 holds 4 (09:59).
	if w.Allowed[167] != 3 || w.Allowed[166] != 4 || w.Allowed[0] != 64 || w.TotalAllowed != 7+8+32+64 {
		t.Errorf("week: %v", w.Allowed)
	}
}

func TestSeriesEmptyAndInvalid(t *testing.T) {
	f := newFixture(t)
	s, err := f.r.Series(context.Background(), "nothing", Hour)
	if err != nil || len(s.Apps) != 0 || len(s.Times) != 60 {
		t.Errorf("empty: %+v %v", s, err)
	}
	for _, tc := range []struct {
		bucket string
		w      Window
	}{{"{b}", Hour}, {"", Hour}, {"b", 0}, {"b", 9}} {
		if _, err := f.r.Series(context.Background(), tc.bucket, tc.w); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Series(%q, %v): %v, want ErrInvalid", tc.bucket, tc.w, err)
		}
	}
}

func TestParseWindow(t *testing.T) {
	for s, want := range map[string]Window{"": Hour, "hour": Hour, "day": Day, "week": Week} {
		if w, err := ParseWindow(s); err != nil || w != want {
			t.Errorf("ParseWindow(%q) = %v %v", s, w, err)
		}
		if s != "" && want.String() != s {
			t.Errorf("%v.String() = %q", want, want.String())
		}
	}
	if _, err := ParseWindow("month"); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("ParseWindow(month): %v", err)
	}
}

func TestTopDenied(t *testing.T) {
	f := newFixture(t)
	f.add(t, "a", "web", f.now, 10, 5)
	f.add(t, "a", "batch", f.now.Add(-59*time.Minute), 0, 5) // still in the last hour
	f.add(t, "b", "web", f.now.Add(-20*time.Minute), 1, 20)
	f.add(t, "c", "web", f.now.Add(-60*time.Minute), 0, 99) // just outside the last hour
	f.add(t, "c", "web", f.now, 3, 0)
	f.add(t, "d", "web", f.now, 50, 10)
	f.add(t, "e", "web", f.now, 60, 10)
	ctx := context.Background()

	got, err := f.r.TopDenied(ctx, []string{"a", "b", "c", "d", "e", "zz", "a"}, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Total{{"b", 1, 20}, {"e", 60, 10}, {"d", 50, 10}, {"a", 10, 10}}
	if !slices.Equal(got, want) {
		t.Errorf("last hour: %v, want %v", got, want)
	}
	got, err = f.r.TopDenied(ctx, []string{"a", "b", "c", "d", "e"}, time.Hour, 2)
	if err != nil || !slices.Equal(got, want[:2]) {
		t.Errorf("limit 2: %v %v", got, err)
	}
	// Over 3 hours the hour hashes are read: c's denials of 09:37 count.
	got, err = f.r.TopDenied(ctx, []string{"c"}, 6*time.Hour, 10)
	if err != nil || !slices.Equal(got, []Total{{"c", 3, 99}}) {
		t.Errorf("6 hours: %v %v", got, err)
	}
	got, err = f.r.TopDenied(ctx, nil, time.Hour, 10)
	if err != nil || len(got) != 0 {
		t.Errorf("no names: %v %v", got, err)
	}
	for _, tc := range []struct {
		names []string
		since time.Duration
	}{{[]string{"a"}, time.Second}, {[]string{"a"}, 8 * 24 * time.Hour}, {[]string{"a", "B"}, time.Hour}} {
		if _, err := f.r.TopDenied(ctx, tc.names, tc.since, 1); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("TopDenied(%v, %v): %v, want ErrInvalid", tc.names, tc.since, err)
		}
	}
}

func TestUnavailable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	r := NewReader(rdb, redisscript.Keyspace{})
	if _, err := r.Series(context.Background(), "b", Hour); !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("Series: %v, want ErrUnavailable", err)
	}
	if _, err := r.TopDenied(context.Background(), []string{"b"}, time.Hour, 1); !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("TopDenied: %v, want ErrUnavailable", err)
	}
}

// BenchmarkTopDenied reads the last hour of 1000 buckets, a tenth of them busy.
func BenchmarkTopDenied(b *testing.B) {
	f := newFixture(b)
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("bucket-%04d", i)
		if i%10 == 0 {
			for m := range 60 {
				f.add(b, names[i], "web", f.now.Add(-time.Duration(m)*time.Minute), 100, int64(i))
			}
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		top, err := f.r.TopDenied(ctx, names, time.Hour, 20)
		if err != nil || len(top) != 20 || top[0].Bucket != "bucket-0990" {
			b.Fatalf("%v %v", top, err)
		}
	}
}

// BenchmarkSeries reads one busy bucket's hour, day (1440 minute hashes)
// and week (168 hour hashes).
func BenchmarkSeries(b *testing.B) {
	f := newFixture(b)
	for m := range 24 * 60 {
		at := f.now.Add(-time.Duration(m) * time.Minute)
		f.add(b, "busy", "web", at, 100, 3)
		f.add(b, "busy", "batch", at, 10, 0)
	}
	for _, w := range []Window{Hour, Day, Week} {
		b.Run(w.String(), func(b *testing.B) {
			for b.Loop() {
				s, err := f.r.Series(context.Background(), "busy", w)
				if err != nil || len(s.Apps) != 2 {
					b.Fatalf("%v %v", s.Apps, err)
				}
			}
		})
	}
}

// A bucket in shadow mode: would-deny counts are read apart, per app and
// in total, never above the allowed ones, and near-limit counts are not
// drawn as an outcome of their own.
func TestSeriesWouldDeny(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.add(t, "b", "web", f.now, 10, 0)
	f.add(t, "b", "web", f.now.Add(-time.Minute), 4, 0)
	k := f.ks.UsageMinute("b", f.now.Unix()/60)
	f.rdb.HSet(ctx, k, redisscript.UsageWouldDenyField("web"), 3, redisscript.UsageNearLimitField("web"), 6)
	// More would-deny than allowed (a damaged hash) counts as all allowed.
	f.rdb.HSet(ctx, f.ks.UsageMinute("b", f.now.Unix()/60-1), redisscript.UsageWouldDenyField("web"), 9)
	// An app with only a near-limit count has nothing to draw.
	f.rdb.HSet(ctx, k, redisscript.UsageNearLimitField("batch"), 2)

	s, err := f.r.Series(ctx, "b", Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Apps) != 1 || s.Apps[0].App != "web" {
		t.Fatalf("apps %+v, want web alone", s.Apps)
	}
	web := s.Apps[0]
	if web.WouldDeny[59] != 3 || web.WouldDeny[58] != 4 || web.TotalWouldDeny != 7 || web.TotalAllowed != 14 {
		t.Errorf("web: would deny %v (total %d), allowed %d", web.WouldDeny[58:], web.TotalWouldDeny, web.TotalAllowed)
	}
	if s.WouldDeny != 7 || s.Allowed != 14 || s.Denied != 0 {
		t.Errorf("totals %d allowed, %d denied, %d would deny; want 14, 0, 7", s.Allowed, s.Denied, s.WouldDeny)
	}
}

// Calls the failure policy answered are read apart, per app and in total,
// outside allowed and denied; an app with nothing else (its Redis calls all
// failed) is still listed, busiest first.
func TestSeriesFallback(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.add(t, "b", "web", f.now, 10, 2)
	m := f.ks.UsageMinute("b", f.now.Unix()/60)
	old := f.ks.UsageMinute("b", f.now.Unix()/60-2)
	f.rdb.HSet(ctx, m, redisscript.UsageFallbackRefusedField("web"), 5)
	f.rdb.HSet(ctx, old, redisscript.UsageFallbackAllowedField("web"), 1)
	f.rdb.HSet(ctx, m, redisscript.UsageFallbackRefusedField("batch"), 30, redisscript.UsageFallbackAllowedField("batch"), 4)

	s, err := f.r.Series(ctx, "b", Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Apps) != 2 || s.Apps[0].App != "batch" || s.Apps[1].App != "web" {
		t.Fatalf("apps %+v, want batch then web", s.Apps)
	}
	batch, web := s.Apps[0], s.Apps[1]
	if batch.FallbackRefused[59] != 30 || batch.FallbackAllowed[59] != 4 || batch.TotalAllowed != 0 || batch.Fallbacks() != 34 {
		t.Errorf("batch: %+v", batch)
	}
	if web.FallbackRefused[59] != 5 || web.FallbackAllowed[57] != 1 || web.TotalFallbackRefused != 5 ||
		web.TotalFallbackAllowed != 1 || web.TotalAllowed != 10 || web.TotalDenied != 2 {
		t.Errorf("web: %+v", web)
	}
	if s.Allowed != 10 || s.Denied != 2 || s.FallbackAllowed != 5 || s.FallbackRefused != 35 || s.Fallbacks() != 40 {
		t.Errorf("totals: %d allowed, %d denied, %d and %d by the failure policy; want 10, 2, 5, 35",
			s.Allowed, s.Denied, s.FallbackAllowed, s.FallbackRefused)
	}
}
