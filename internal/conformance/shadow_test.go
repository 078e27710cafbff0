package conformance_test

import (
	"context"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// A bucket in shadow mode drained past empty keeps answering WouldDeny,
// takes nothing and writes nothing; a new version without shadow mode
// makes it deny, and one with shadow mode brings the would-denies back.
func TestShadowBucket(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		c := cfg("trial", 3, 1_000_000, 3600, "svc") // one token an hour: no refill during the test
		c.Shadow = true
		if out := s.apply(t, c, false); out != redisscript.Created {
			t.Fatalf("apply: %v", out)
		}
		if got := s.fields(t, "trial")[redisscript.FieldShadow]; got != "1" {
			t.Fatalf("shadow field %q, want 1", got)
		}
		st, err := redisscript.Read(context.Background(), s.rdb, s.ks, "trial")
		if err != nil || !st.Config.Shadow {
			t.Fatalf("read: %+v %v; want shadow", st.Config, err)
		}
		if out := s.apply(t, c, false); out != redisscript.Unchanged {
			t.Fatalf("re-apply: %v, want unchanged", out)
		}

		if a := s.acquire(t, "trial", "svc", 3); a.Code != redisscript.Allowed || a.Remaining != 0 {
			t.Fatalf("first acquire: %+v", a)
		}
		drained := s.fields(t, "trial")
		for i := 0; i < 5; i++ {
			a := s.acquire(t, "trial", "svc", 2)
			if a.Code != redisscript.WouldDeny || a.Remaining != 0 || a.Capacity != 3 || a.PeriodSeconds != 3600 {
				t.Fatalf("acquire %d past empty: %+v, want would deny", i, a)
			}
			// Two tokens at one an hour: about two hours, less what refilled.
			if a.RetryAfterMicros <= 7_100_000_000 || a.RetryAfterMicros > 7_200_000_000 {
				t.Fatalf("retry_us %d, want about 2 h", a.RetryAfterMicros)
			}
		}
		if got := s.fields(t, "trial"); !maps.Equal(got, drained) {
			t.Fatalf("would-denies wrote: %v, was %v", got, drained)
		}
		if got := s.tokens(t, "trial"); got < 0 || got > 0.01 {
			t.Fatalf("tokens %v, want about 0 and never below", got)
		}

		// Shadow mode off: the same call is denied.
		c.Version, c.Shadow = 2, false
		if out := s.apply(t, c, false); out != redisscript.Updated {
			t.Fatalf("apply shadow off: %v", out)
		}
		if a := s.acquire(t, "trial", "svc", 2); a.Code != redisscript.Denied || a.Remaining != 0 {
			t.Fatalf("shadow off: %+v, want denied", a)
		}
		if st, _ := redisscript.Read(context.Background(), s.rdb, s.ks, "trial"); st.Config.Shadow {
			t.Fatalf("read after shadow off: %+v", st.Config)
		}
		// Only the shadow flag differs from the stored config: not unchanged.
		c.Shadow = true
		if out := s.apply(t, c, false); out != redisscript.Updated {
			t.Fatalf("apply shadow on at the same version: %v, want updated", out)
		}
		if a := s.acquire(t, "trial", "svc", 2); a.Code != redisscript.WouldDeny {
			t.Fatalf("shadow on again: %+v", a)
		}
	})
}

// A bucket in lease mode and shadow mode answers WouldDeny with the
// lease time of protocol 2.
func TestShadowBucketProtocol2(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		c := cfg("trial", 1, 1, 3600, "svc")
		c.Shadow, c.LeaseMillis = true, 100
		s.apply(t, c, false)
		s.acquire(t, "trial", "svc", 1)
		v, err := s.rdb.Eval(context.Background(), redisscript.AcquireScript.Source(), []string{s.ks.Bucket("trial")}, "svc", "1", "2").Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		if a, err := redisscript.AnswerOf(v); err != nil || a.Code != redisscript.WouldDeny || a.LeaseMillis != 100 {
			t.Fatalf("%+v %v", a, err)
		}
	})
}
