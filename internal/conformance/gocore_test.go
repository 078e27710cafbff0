package conformance_test

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

// TestGoCoreMatchesLua: for the same state, the Go core (the fallback's and
// memlimit's arithmetic) answers exactly what the acquire script answers,
// debts and fractions included. The state's ts is ahead of Redis's clock,
// so no time passes for the script (a clock that went back adds nothing).
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
			s.apply(t, c, false)
			// From -capacity (the deepest debt) to capacity, with fractions.
			held := (rng.Float64()*2 - 1) * float64(capacity)
			if i%5 == 0 {
				held = float64(rng.Int64N(2*capacity+1) - capacity) // whole counts too
			}
			n := 1 + rng.Int64N(capacity)
			s.setState(t, "g", held, s.nowMicros(t)+3_600_000_000)
			got := s.acquire(t, "g", "svc", n)
			lim := tokens.Limit{Capacity: capacity, PermitsMicro: pm, Period: float64(period)}
			_, _, a := lim.Take(held, n, false)
			want := redisscript.Answer{Code: redisscript.Code(a.Code), Remaining: a.Remaining, RetryAfterMicros: a.RetryMicros,
				ResetAfterMicros: a.ResetMicros, Capacity: capacity, PermitsMicro: pm, PeriodSeconds: period}
			if got != want {
				t.Fatalf("capacity %d, %d µpermits per %d s, %v tokens, n %d: script %+v, Go core %+v",
					capacity, pm, period, held, n, got, want)
			}
		}
	})
}
