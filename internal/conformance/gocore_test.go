package conformance_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

// TestGoCoreMatchesLua: for the same state, the Go core (the fallback's and
// memlimit's arithmetic) answers exactly what the acquire script answers,
// debts, fractions, reserves and critical requests included. The state's
// ts is ahead of Redis's clock, so no time passes for the script (a clock
// that went back adds nothing).
func TestGoCoreMatchesLua(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		rng := rand.New(rand.NewPCG(25, 1))
		periods := []int64{1, 60, 3600, 86400, 31536000}
		for i := range 200 {
			capacity := 1 + rng.Int64N(1000)
			pm := 1 + rng.Int64N(5_000_000)
			period := periods[rng.IntN(len(periods))]
			c := cfg("g", capacity, pm, period, "svc")
			c.Version = int64(i + 1)
			if i%2 == 1 {
				c.Reserve = rng.Int64N(capacity)
			}
			critical := i%4 == 3
			s.apply(t, c, false)
			// From -capacity (the deepest debt) to capacity, with fractions.
			held := (rng.Float64()*2 - 1) * float64(capacity)
			if i%5 == 0 {
				held = float64(rng.Int64N(2*capacity+1) - capacity) // whole counts too
			}
			n := 1 + rng.Int64N(capacity)
			s.setState(t, "g", held, s.nowMicros(t)+3_600_000_000)
			got, err := redisscript.AcquireCritical(context.Background(), s.rdb, s.ks, "g", "svc", n, critical)
			if err != nil {
				t.Fatal(err)
			}
			lim := tokens.Limit{Capacity: capacity, PermitsMicro: pm, Period: float64(period), Reserve: c.Reserve}
			want := redisscript.Answer{Code: redisscript.ExceedsCapacity, Capacity: capacity, PermitsMicro: pm, PeriodSeconds: period}
			if !lim.Exceeds(n, critical) {
				_, _, a := lim.Take(held, n, false, critical)
				want = redisscript.Answer{Code: redisscript.Code(a.Code), Remaining: a.Remaining, RetryAfterMicros: a.RetryMicros,
					ResetAfterMicros: a.ResetMicros, Capacity: capacity, PermitsMicro: pm, PeriodSeconds: period,
					HasShadow: true, HasReserve: true, Reserve: c.Reserve}
			}
			if got.Code == redisscript.ExceedsCapacity {
				got = redisscript.Answer{Code: got.Code, Capacity: got.Capacity, PermitsMicro: got.PermitsMicro,
					PeriodSeconds: got.PeriodSeconds}
			}
			if got != want {
				t.Fatalf("capacity %d, reserve %d, %d µpermits per %d s, %v tokens, n %d, critical %v: script %+v, Go core %+v",
					capacity, c.Reserve, pm, period, held, n, critical, got, want)
			}
		}
	})
}

// TestOverrideReserveMatchesGo: the reserve the keyed script gives an
// override's keys (its share of the bucket's reserve, computed exactly in
// doubles) is the Go core's ScaleReserve, up to the largest capacities,
// whose products pass 2^53.
func TestOverrideReserveMatchesGo(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(27, 1))
		caps := func() int64 {
			switch rng.IntN(3) {
			case 0:
				return 1 + rng.Int64N(100)
			case 1:
				return redisscript.MaxCapacity - rng.Int64N(1000)
			}
			return 1 + rng.Int64N(redisscript.MaxCapacity)
		}
		for i := range 60 {
			capacity := max(2, caps())
			c := cfg("k", capacity, 1_000_000, 1, "svc")
			c.Version, c.Reserve = int64(i+1), 1+rng.Int64N(capacity-1)
			if _, err := redisscript.ApplyKeyed(ctx, s.rdb, s.ks, c, false); err != nil {
				t.Fatal(err)
			}
			oc := caps()
			key := "key-" + string(rune('a'+i%26))
			if _, err := redisscript.ApplyOverride(ctx, s.rdb, s.ks, redisscript.Override{Bucket: "k", BucketID: 1, ID: int64(i + 1),
				Version: 1, Match: redisscript.MatchExact, Key: key, Capacity: oc, PermitsMicro: 1_000_000, PeriodSeconds: 1}, true); err != nil {
				t.Fatal(err)
			}
			a, err := redisscript.AcquireKeyCritical(ctx, s.rdb, s.ks, "k", key, "svc", 1, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := tokens.ScaleReserve(c.Reserve, capacity, oc); a.Source != redisscript.FromExact || !a.HasReserve ||
				a.Reserve != want {
				t.Fatalf("bucket %d, reserve %d, override %d: script %+v, want reserve %d", capacity, c.Reserve, oc, a, want)
			}
		}
	})
}
