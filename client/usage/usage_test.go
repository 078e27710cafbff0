package usage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
	readusage "github.com/sluicehq/sluice/internal/usage"
)

// define creates bucket name the way the sync worker does.
func define(t testing.TB, rdb redis.UniversalClient, ks redisscript.Keyspace, name string, capacity, permitsMicro, period int64, apps ...string) {
	t.Helper()
	cfg := redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: capacity,
		PermitsMicro: permitsMicro, PeriodSeconds: period, Apps: apps}
	if out, err := redisscript.Apply(context.Background(), rdb, ks, cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("define %s: %v %v", name, out, err)
	}
}

// sums adds up the usage fields of every key matching pattern.
func sums(t *testing.T, rdb redis.UniversalClient, pattern string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		h, err := rdb.HGetAll(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for f, v := range h {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s %s = %q", iter.Val(), f, v)
			}
			out[f] += n
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCountsMatchDecisions has two apps' Limiters, eight goroutines each,
// take tokens from two buckets (one that runs dry, so there are denials)
// while the Recorders flush every 10 ms, and checks that the minute and
// hour hashes hold exactly the decisions the goroutines saw.
func TestCountsMatchDecisions(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	define(t, rdb, ks, "scarce", 150, 1_000_000, 60, "web", "batch") // 150 tokens, 1 per minute
	define(t, rdb, ks, "plenty", 1_000_000_000, 1_000_000_000_000, 1, "web", "batch")
	define(t, rdb, ks, "private", 10, 1_000_000, 1, "other")

	type key struct{ bucket, field string }
	var mu sync.Mutex
	want := map[key]int64{}
	var wg sync.WaitGroup
	var recs []*usage.Recorder
	for _, app := range []string{"web", "batch"} {
		rec, err := usage.NewRecorder(rdb, app, usage.WithKeyPrefix(prefix), usage.WithFlushInterval(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
		lim, err := client.New(rdb, app, client.WithKeyPrefix(prefix), client.WithObserver(rec.Observe),
			client.WithFailurePolicy(client.FailClosed), client.WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := map[key]int64{}
				for i := range 120 {
					bucket := []string{"scarce", "plenty", "private", "missing"}[(g+i)%4]
					res, err := lim.Acquire(context.Background(), bucket, 1)
					if usage.NearLimit(client.Decision{Bucket: bucket, Result: res, Err: err}) {
						local[key{bucket, redisscript.UsageNearLimitField(app)}]++
					}
					switch {
					case res.Fallback:
						t.Errorf("fallback answer: %+v %v", res, err)
					case err == nil && res.Allowed:
						local[key{bucket, redisscript.UsageAllowedField(app)}]++
					case err == nil:
						local[key{bucket, redisscript.UsageDeniedField(app)}]++
					case !errors.Is(err, client.ErrAppNotAllowed) && !errors.Is(err, client.ErrUnknownBucket):
						t.Errorf("acquire %s: %v", bucket, err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for k, v := range local {
					want[k] += v
				}
			}()
		}
	}
	wg.Wait()
	for _, rec := range recs {
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		if d := rec.Dropped(); d != 0 {
			t.Errorf("dropped %d counts", d)
		}
	}
	if want[key{"scarce", "web:d"}]+want[key{"scarce", "batch:d"}] == 0 {
		t.Fatal("the scarce bucket denied nothing: the test checks no denials")
	}

	for _, bucket := range []string{"scarce", "plenty", "private", "missing"} {
		wantB := map[string]int64{}
		for k, v := range want {
			if k.bucket == bucket {
				wantB[k.field] = v
			}
		}
		for _, kind := range []string{"m", "h"} {
			got := sums(t, rdb, fmt.Sprintf("%s{%s}:usage:%s:*", prefix, bucket, kind))
			if fmt.Sprint(got) != fmt.Sprint(wantB) {
				t.Errorf("%s, %s hashes: got %v, want %v", bucket, kind, got, wantB)
			}
		}
	}

	// The console's reader sees the same totals.
	s, err := readusage.NewReader(rdb, ks).Series(context.Background(), "scarce", readusage.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range s.Apps {
		if a.TotalAllowed != want[key{"scarce", a.App + ":a"}] || a.TotalDenied != want[key{"scarce", a.App + ":d"}] {
			t.Errorf("reader: %s %d/%d, want %d/%d", a.App, a.TotalAllowed, a.TotalDenied,
				want[key{"scarce", a.App + ":a"}], want[key{"scarce", a.App + ":d"}])
		}
	}
	if len(s.Apps) != 2 {
		t.Errorf("reader: apps %v, want web and batch", s.Apps)
	}
}

// TestNoLossAcrossMinutes adds counts for alternating minutes from many
// goroutines while flushes run, which exercises every path of moving a
// minute's counters aside, and checks that nothing is lost or doubled.
func TestNoLossAcrossMinutes(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	rec, err := usage.NewRecorder(rdb, "app", usage.WithKeyPrefix(prefix), usage.WithFlushInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Truncate(time.Minute).Add(-30 * time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				// Minutes move forward and sometimes back, as late callers do.
				at := base.Add(time.Duration(i/500+(i%7)/6) * time.Minute)
				rec.Add("b", at, (g+i)%3 != 0, 1)
			}
		}()
	}
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	ks := redisscript.Keyspace{Prefix: prefix}
	got := sums(t, rdb, prefix+"{b}:usage:m:*")
	if got["app:a"]+got["app:d"] != 8*3000 || got["app:d"] != 8000 {
		t.Errorf("minute hashes: %v, want 24000 in all, 8000 denied", got)
	}
	hours := sums(t, rdb, prefix+"{b}:usage:h:*")
	if fmt.Sprint(hours) != fmt.Sprint(got) {
		t.Errorf("hour hashes %v differ from minute hashes %v", hours, got)
	}
	// Each minute got what the goroutines added for it.
	first, err := rdb.HGetAll(context.Background(), ks.UsageMinute("b", base.Unix()/60)).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Minute 0 gets i in [0,500) with i%7 != 6: 429 of 500, per goroutine.
	if a, _ := strconv.Atoi(first["app:a"]); a == 0 {
		t.Errorf("first minute: %v", first)
	}
	if n := count(first); n != 8*429 {
		t.Errorf("first minute holds %d counts, want %d", n, 8*429)
	}
}

func count(h map[string]string) int {
	n := 0
	for _, v := range h {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

// TestRetention checks the TTL of the hashes, and that old minutes go.
func TestRetention(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	now := time.Now()

	def, err := usage.NewRecorder(rdb, "app", usage.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	def.Add("kept", now, true, 3)
	if err := def.Close(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{ks.UsageMinute("kept", now.Unix()/60), ks.UsageHour("kept", now.Unix()/3600)} {
		ttl, err := rdb.TTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 7*24*time.Hour || ttl > usage.DefaultRetention {
			t.Errorf("TTL of %s = %v, want more than 7 days and at most %v", k, ttl, usage.DefaultRetention)
		}
	}

	short, err := usage.NewRecorder(rdb, "app", usage.WithKeyPrefix(prefix), usage.WithRetention(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	old := now.Add(-90 * time.Minute)
	short.Add("brief", old, false, 2)
	if err := short.Close(); err != nil {
		t.Fatal(err)
	}
	minute := ks.UsageMinute("brief", old.Unix()/60)
	if v, err := rdb.HGet(ctx, minute, "app:d").Result(); err != nil || v != "2" {
		t.Fatalf("old minute %s: %q %v, want 2", minute, v, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := rdb.Exists(ctx, minute, ks.UsageHour("brief", old.Unix()/3600)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d usage hashes still there after their 1 s TTL", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCounted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		d           client.Decision
		allowed, ok bool
	}{
		{"allowed", client.Decision{Result: client.Result{Allowed: true}}, true, true},
		{"denied", client.Decision{Result: client.Result{RetryAfter: time.Second}}, false, true},
		{"over capacity", client.Decision{Err: client.ErrExceedsCapacity}, false, true},
		{"fallback allowed", client.Decision{Result: client.Result{Allowed: true, Fallback: true}}, false, false},
		{"fallback refused", client.Decision{Result: client.Result{Fallback: true}, Err: client.ErrUnavailable}, false, false},
		{"fallback over capacity", client.Decision{Result: client.Result{Fallback: true}, Err: client.ErrExceedsCapacity}, false, false},
		{"unknown bucket", client.Decision{Err: client.ErrUnknownBucket}, false, false},
		{"app not allowed", client.Decision{Err: client.ErrAppNotAllowed}, false, false},
		{"invalid n", client.Decision{Err: client.ErrInvalidN}, false, false},
		{"canceled", client.Decision{Err: context.Canceled}, false, false},
	} {
		allowed, ok := usage.Counted(tc.d)
		if allowed != tc.allowed || ok != tc.ok {
			t.Errorf("%s: Counted = %v %v, want %v %v", tc.name, allowed, ok, tc.allowed, tc.ok)
		}
	}
}

// TestFlushFailure checks that counts Redis did not take are dropped,
// reported, and that the next flushes carry on.
func TestFlushFailure(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer dead.Close()
	var logs strings.Builder
	rec, err := usage.NewRecorder(dead, "app", usage.WithFlushInterval(time.Hour),
		usage.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	rec.Add("b", time.Now(), true, 5)
	rec.Add("b", time.Now(), false, 2)
	if err := rec.Flush(context.Background()); err == nil {
		t.Fatal("flush to a dead server succeeded")
	}
	if d := rec.Dropped(); d != 7 {
		t.Errorf("Dropped = %d, want 7", d)
	}
	rec.Add("b", time.Now(), true, 1)
	_ = rec.Close()
	if d := rec.Dropped(); d != 8 {
		t.Errorf("Dropped after Close = %d, want 8", d)
	}
	if n := strings.Count(logs.String(), "not written"); n != 1 {
		t.Errorf("logged %d failures, want 1 per outage:\n%s", n, logs.String())
	}
}

func TestNewRecorderRejects(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for name, f := range map[string]func() (*usage.Recorder, error){
		"nil client": func() (*usage.Recorder, error) { return usage.NewRecorder(nil, "app") },
		"bad app":    func() (*usage.Recorder, error) { return usage.NewRecorder(rdb, "Bad App") },
		"interval":   func() (*usage.Recorder, error) { return usage.NewRecorder(rdb, "app", usage.WithFlushInterval(0)) },
		"retention": func() (*usage.Recorder, error) {
			return usage.NewRecorder(rdb, "app", usage.WithRetention(time.Millisecond))
		},
		"empty app":    func() (*usage.Recorder, error) { return usage.NewRecorder(rdb, "") },
		"app too long": func() (*usage.Recorder, error) { return usage.NewRecorder(rdb, strings.Repeat("a", 64)) },
	} {
		if rec, err := f(); err == nil {
			rec.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	// Invalid bucket names are ignored, never written.
	rec, err := usage.NewRecorder(rdb, "app")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	rec.Add("{x}", time.Now(), true, 1)
	rec.Add("b", time.Now(), true, 0)
	if err := rec.Flush(context.Background()); err != nil {
		t.Errorf("flush with nothing valid counted: %v", err)
	}
}

// TestActiveSet checks that a flush names its buckets in the set of each
// minute it wrote, with a TTL of about two hours, and no other bucket.
func TestActiveSet(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	now := time.Now()
	earlier := now.Add(-3 * time.Minute)

	rec, err := usage.NewRecorder(rdb, "app", usage.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	rec.Add("a", now, true, 1)
	rec.Add("b", now, false, 4)
	rec.Add("c", earlier, true, 2)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	for minute, want := range map[int64][]string{now.Unix() / 60: {"a", "b"}, earlier.Unix() / 60: {"c"}} {
		key := ks.UsageActive(minute)
		got, err := rdb.SMembers(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
		ttl, err := rdb.TTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= time.Hour || ttl > redisscript.UsageActiveTTLSeconds*time.Second {
			t.Errorf("TTL of %s = %v, want more than an hour and at most 2 h", key, ttl)
		}
	}
}
