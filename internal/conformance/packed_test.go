package conformance_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// twinAnswers runs the same acquires on buckets a and b, whose states are
// set alike with ts in the future (no refill while the test runs), and
// fails where their answers differ.
func twinAnswers(t *testing.T, s server, a, b string, acquire func(name, n string) []int64) {
	t.Helper()
	now := s.nowMicros(t)
	s.setState(t, a, 9, now+3_600_000_000)
	s.setState(t, b, 9, now+3_600_000_000)
	for i, n := range []string{"1", "3", "4", "2", "1", "0", "11", "1"} {
		x, y := acquire(a, n), acquire(b, n)
		if len(x) != len(y) {
			t.Fatalf("call %d (n %s): %v against %v", i, n, x, y)
		}
		for j := range x {
			if x[j] != y[j] {
				t.Fatalf("call %d (n %s): %v against %v", i, n, x, y)
			}
		}
	}
}

// TestPackedLimit: the apply script writes the packed limit (on a server
// whose Lua has struct), the acquire answers the same from it as from the
// fields, a packed limit that does not hold is ignored, one that differs
// from the fields is reported and rewritten by the next apply.
func TestPackedLimit(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		limits := []redisscript.Config{
			{Name: "plain", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 60, Apps: []string{"a"}},
			{Name: "kept", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 500_000, PeriodSeconds: 3600, Apps: []string{"a"},
				Reserve: 3, LeaseMillis: 500},
			{Name: "shadow", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 60, Apps: []string{"a"},
				Shadow: true},
		}
		for _, c := range limits {
			if out := s.apply(t, c, false); out != redisscript.Created {
				t.Fatalf("apply %s: %v", c.Name, out)
			}
			p, ok := s.fields(t, c.Name)[redisscript.FieldPacked]
			switch {
			case s.real && len(p) != 64:
				t.Fatalf("%s: packed limit %q, want 64 bytes", c.Name, p)
			case !s.real && ok:
				t.Fatalf("%s: a packed limit without struct: %q", c.Name, p)
			}
			// The twin has only the fields.
			twin := c
			twin.Name = c.Name + "-fields"
			s.apply(t, twin, false)
			if err := s.rdb.HDel(ctx, s.ks.Bucket(twin.Name), redisscript.FieldPacked).Err(); err != nil {
				t.Fatal(err)
			}
			for _, proto := range []string{"1", "2", "3"} {
				twinAnswers(t, s, c.Name, twin.Name, func(name, n string) []int64 {
					v, err := redisscript.AcquireScript.Run(ctx, s.rdb, []string{s.ks.Bucket(name)}, "a", n,
						proto).Int64Slice()
					if err != nil {
						t.Fatal(err)
					}
					return v
				})
			}
			st, err := redisscript.Read(ctx, s.rdb, s.ks, c.Name)
			if err != nil || st.PackedDiffers {
				t.Fatalf("%s: read %+v, %v", c.Name, st, err)
			}
		}
		if !s.real {
			return
		}
		// A packed limit that is no limit is ignored: the fields decide.
		if err := s.rdb.HSet(ctx, s.ks.Bucket("plain"), redisscript.FieldPacked, "garbage").Err(); err != nil {
			t.Fatal(err)
		}
		if a := s.acquire(t, "plain", "a", 1); a.Capacity != 10 {
			t.Errorf("with a broken packed limit: %+v", a)
		}
		// Another bucket's packed limit decides, is reported, and the next
		// apply writes the right one back.
		big := redisscript.Config{Name: "big", ID: 1, Version: 1, Capacity: 1000, PermitsMicro: 1_000_000,
			PeriodSeconds: 1, Apps: []string{"a"}}
		s.apply(t, big, false)
		if err := s.rdb.HSet(ctx, s.ks.Bucket("plain"), redisscript.FieldPacked,
			s.fields(t, "big")[redisscript.FieldPacked]).Err(); err != nil {
			t.Fatal(err)
		}
		if a := s.acquire(t, "plain", "a", 1); a.Capacity != 1000 {
			t.Errorf("the acquire did not read the packed limit: %+v", a)
		}
		if st, err := redisscript.Read(ctx, s.rdb, s.ks, "plain"); err != nil || !st.PackedDiffers {
			t.Fatalf("read did not see the packed limit differ: %+v, %v", st, err)
		}
		if out := s.apply(t, limits[0], false); out != redisscript.Updated {
			t.Errorf("apply over a differing packed limit: %v, want updated", out)
		}
		if a := s.acquire(t, "plain", "a", 1); a.Capacity != 10 {
			t.Errorf("after the apply: %+v", a)
		}
		// A hash of an older writer (no packed limit) gets one at its next
		// apply of the same config.
		if err := s.rdb.HDel(ctx, s.ks.Bucket("plain"), redisscript.FieldPacked).Err(); err != nil {
			t.Fatal(err)
		}
		if out := s.apply(t, limits[0], false); out != redisscript.Updated {
			t.Errorf("apply over a hash without a packed limit: %v, want updated", out)
		}
		if p := s.fields(t, "plain")[redisscript.FieldPacked]; len(p) != 64 {
			t.Errorf("packed limit after the apply: %q", p)
		}
		if out := s.apply(t, limits[0], false); out != redisscript.Unchanged {
			t.Errorf("apply again: %v, want unchanged", out)
		}
	})
}

// TestAcquireFunctionAnswersAsScript: FCALL of the acquire function
// answers exactly as EVALSHA of the acquire script, on twin buckets.
func TestAcquireFunctionAnswersAsScript(t *testing.T) {
	t.Parallel()
	s := servers(t)["redis"](t)
	ctx := context.Background()
	rdb := s.rdb.(*redis.Client)
	if err := rdb.FunctionLoadReplace(ctx, redisscript.Functions.Source).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []redisscript.Config{
		{Name: "f", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 500_000, PeriodSeconds: 3600, Apps: []string{"a"},
			Reserve: 2, LeaseMillis: 300},
		{Name: "f-shadow", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 60, Apps: []string{"a"},
			Shadow: true},
	} {
		s.apply(t, c, false)
		twin := c
		twin.Name += "-script"
		s.apply(t, twin, false)
		for _, args := range [][]any{{"a"}, {"a", "2"}, {"a", "3"}, {"a", "3", "1"}, {"b", "3"}} {
			twinAnswers(t, s, c.Name, twin.Name, func(name, n string) []int64 {
				argv := append([]any{args[0], n}, args[1:]...)
				key := []string{s.ks.Bucket(name)}
				var v []int64
				var err error
				if name == c.Name {
					v, err = rdb.FCall(ctx, redisscript.Functions.Function(redisscript.AcquireScript), key, argv...).Int64Slice()
				} else {
					v, err = redisscript.AcquireScript.Run(ctx, rdb, key, argv...).Int64Slice()
				}
				if err != nil {
					t.Fatal(err)
				}
				return v
			})
		}
	}
	// An unknown bucket, as the script answers it.
	v, err := rdb.FCall(ctx, redisscript.Functions.Function(redisscript.AcquireScript), []string{s.ks.Bucket("nope")}, "a", "1").Int64Slice()
	if err != nil || len(v) != 7 || v[0] != int64(redisscript.UnknownBucket) {
		t.Errorf("unknown bucket: %v, %v", v, err)
	}
}

// TestQuotaStoredPeriod: a grant stores the end of its period with the
// count, and an apply that changes the table forgets it, so the next
// acquire finds its period in the new table (where this count is of
// another period, 0).
func TestQuotaStoredPeriod(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		now := s.nowMicros(t) / 1_000_000
		q := redisscript.Config{Name: "q", ID: 1, Version: 1, Capacity: 10, Apps: []string{"a"},
			Kind: redisscript.KindQuota, Bounds: []int64{now - 100, now + 100_000}}
		s.apply(t, q, false)
		if a := s.acquire(t, "q", "a", 2); a.Code != redisscript.Allowed || a.Remaining != 8 {
			t.Fatalf("first acquire: %+v", a)
		}
		h := s.fields(t, "q")
		if h[redisscript.FieldPeriodEnd] != strconv.FormatInt(now+100_000, 10) ||
			h[redisscript.FieldPeriodStart] != strconv.FormatInt(now-100, 10) {
			t.Fatalf("stored period %s..%s", h[redisscript.FieldPeriodStart], h[redisscript.FieldPeriodEnd])
		}
		if a := s.acquire(t, "q", "a", 1); a.Remaining != 7 {
			t.Fatalf("second acquire: %+v", a)
		}
		// The same instant falls in a period of the new table that starts
		// later: the count of the old one is not this period's.
		q.Version, q.Bounds = 2, []int64{now - 50, now + 100_000}
		if out := s.apply(t, q, false); out != redisscript.Updated {
			t.Fatalf("apply: %v", out)
		}
		if a := s.acquire(t, "q", "a", 1); a.Code != redisscript.Allowed || a.Remaining != 9 {
			t.Fatalf("after the new table: %+v, want 9 left of a new count", a)
		}
		// An update that keeps the table keeps the count.
		q.Version, q.Capacity = 3, 20
		s.apply(t, q, false)
		if a := s.acquire(t, "q", "a", 1); a.Remaining != 18 {
			t.Fatalf("after a new capacity: %+v, want 18 left", a)
		}
	})
}
