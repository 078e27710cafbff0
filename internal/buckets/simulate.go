package buckets

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
)

// Limits of a Pattern: a preview runs while a form is being filled in, so
// its cost is bounded (at most MaxSteady x MaxSimulated steady requests;
// bursts cost one step each, whatever their size).
const (
	MaxSteady    = 1000
	MaxBurst     = 1_000_000
	MaxSimulated = 10 * time.Minute
)

// Pattern is a traffic pattern to try against a limit before saving it:
// Steady requests per second, evenly spaced, plus a burst of Burst
// requests at once every Every, from the start, for Duration. Each request
// asks for one token.
type Pattern struct {
	Steady   float64
	Burst    int64
	Every    time.Duration
	Duration time.Duration
}

// Validate checks p against the limits above. The error is a
// *errs.Validation on the fields "steady", "burst", "every" and
// "duration".
func (p Pattern) Validate() error {
	v := &errs.Validation{}
	if math.IsNaN(p.Steady) || p.Steady < 0 || p.Steady > MaxSteady {
		v.Add("steady", fmt.Sprintf("must be from 0 to %d requests per second", MaxSteady))
	}
	if p.Burst < 0 || p.Burst > MaxBurst {
		v.Add("burst", fmt.Sprintf("must be from 0 to %d requests", MaxBurst))
	}
	if p.Burst > 0 && (p.Every < time.Second || p.Every%time.Second != 0) {
		v.Add("every", "must be a whole number of seconds, at least 1")
	}
	if p.Duration < time.Second || p.Duration > MaxSimulated || p.Duration%time.Second != 0 {
		v.Add("duration", "must be a whole number of seconds from 1 second to 10 minutes")
	}
	if v.Err() == nil && p.Steady == 0 && p.Burst == 0 {
		v.Add("steady", "give a steady rate, a burst, or both")
	}
	return v.Err()
}

// Simulation is what a bucket would have answered to a Pattern, per
// second of it.
type Simulation struct {
	// Step is the span of each count (a second).
	Step time.Duration
	// Allowed and Denied hold one count per Step, from the start.
	Allowed, Denied []int64
	// TotalAllowed and TotalDenied are their sums.
	TotalAllowed, TotalDenied int64
}

// Simulate plays p against a bucket of capacity and rate r that starts
// full and keeps reserve tokens for critical requests, as the acquire
// script would answer requests not marked critical (refill by elapsed
// time x rate, never above capacity; a request of one token is allowed
// when one whole token is there above the reserve). It is pure and
// deterministic. An invalid capacity, reserve, rate or pattern gives an
// error matching errs.ErrInvalid.
func Simulate(capacity, reserve int64, r Rate, p Pattern) (Simulation, error) {
	v := &errs.Validation{}
	if capacity < 1 || capacity > MaxCapacity {
		v.Add("max_permits", fmt.Sprintf("must be between 1 and %d", MaxCapacity))
	} else if pr := ReserveProblem(reserve, capacity); pr != "" {
		v.Add("reserve", pr)
	}
	if err := r.Validate(); err != nil {
		v.Add("rate", errs.Fields(err).For("rate"))
	}
	if err := p.Validate(); err != nil {
		v.Fields = append(v.Fields, errs.Fields(err).Fields...)
	}
	if err := v.Err(); err != nil {
		return Simulation{}, err
	}

	perSec := r.PerSecond()
	capF := float64(capacity)
	tokens, last := capF, 0.0
	return play(p, func(at float64, n int64) int64 {
		tokens = math.Min(capF, tokens+(at-last)*perSec)
		last = at
		got := min(n, int64(math.Floor(tokens-float64(reserve)+1e-9)))
		got = max(got, 0)
		tokens = math.Max(tokens-float64(got), 0)
		return got
	}), nil
}

// play runs a simulation of p, a valid pattern: allow answers each
// arrival (seconds from the start, and how many arrive at once) with how
// many of them are allowed, and play counts them per second and in total.
// The limit's own state is allow's.
func play(p Pattern, allow func(at float64, n int64) int64) Simulation {
	steps := int(p.Duration / time.Second)
	sim := Simulation{Step: time.Second, Allowed: make([]int64, steps), Denied: make([]int64, steps)}
	playPattern(p, func(at float64, n int64) {
		got := allow(at, n)
		i := min(int(at), steps-1)
		sim.Allowed[i] += got
		sim.Denied[i] += n - got
		sim.TotalAllowed += got
		sim.TotalDenied += n - got
	})
	return sim
}

// playPattern calls take for every arrival of p, in time order (seconds
// from the start, and how many arrive at once); at equal times the burst
// goes first.
func playPattern(p Pattern, take func(at float64, n int64)) {
	end := p.Duration.Seconds()
	gap := math.Inf(1)
	if p.Steady > 0 {
		gap = 1 / p.Steady
	}
	nextBurst := math.Inf(1)
	if p.Burst > 0 {
		nextBurst = 0
	}
	k := 0 // steady requests so far
	for {
		nextSteady := float64(k) * gap
		if p.Steady == 0 {
			nextSteady = math.Inf(1)
		}
		if nextBurst >= end && nextSteady >= end {
			break
		}
		if nextBurst <= nextSteady {
			take(nextBurst, p.Burst)
			nextBurst += p.Every.Seconds()
			continue
		}
		take(nextSteady, 1)
		k++
	}
}

// ParsePattern reads a Pattern from a form: steady requests per second
// ("" or a decimal), a burst size and its interval in seconds ("" or
// whole numbers), and the span in seconds ("" is a minute). Errors are a
// *errs.Validation on the fields "steady", "burst", "every", "duration",
// and the result is validated as Simulate would.
func ParsePattern(steady, burst, every, duration string) (Pattern, error) {
	v := &errs.Validation{}
	var p Pattern
	num := func(field, s string, whole bool) float64 {
		s = strings.TrimSpace(s)
		if s == "" {
			return 0
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || whole && f != math.Trunc(f) || len(s) > 20 {
			if whole {
				v.Add(field, "must be a whole number")
			} else {
				v.Add(field, "must be a number")
			}
			return 0
		}
		return f
	}
	p.Steady = num("steady", steady, false)
	b := num("burst", burst, true)
	e := num("every", every, true)
	d := num("duration", duration, true)
	if err := v.Err(); err != nil {
		return Pattern{}, err
	}
	if d == 0 {
		d = 60
	}
	// Out-of-range values are left to Validate, clamped so that the
	// conversions below cannot overflow.
	p.Burst = int64(min(b, MaxBurst+1))
	p.Every = time.Duration(min(e, 1e6)) * time.Second
	p.Duration = time.Duration(min(d, 1e6)) * time.Second
	if err := p.Validate(); err != nil {
		return Pattern{}, err
	}
	return p, nil
}

// MaxHold bounds how long each call of a concurrency preview lasts.
const MaxHold = time.Hour

// SimulateSlots plays p against a concurrency limit of limit slots whose
// calls each last hold: a call is allowed when fewer than limit calls
// started before it are still in progress (a call that ends at the
// instant another arrives has given its slot back), as the slot script
// would answer with every slot released when its call ends. It is pure
// and deterministic. An invalid limit, hold or pattern gives an error
// matching errs.ErrInvalid (fields max_permits, hold and the pattern's).
func SimulateSlots(limit int64, hold time.Duration, p Pattern) (Simulation, error) {
	v := &errs.Validation{}
	if limit < 1 || limit > MaxCapacity {
		v.Add("max_permits", fmt.Sprintf("must be between 1 and %d", MaxCapacity))
	}
	if hold <= 0 || hold > MaxHold {
		v.Add("hold", "must be more than 0 and at most an hour")
	}
	if err := p.Validate(); err != nil {
		v.Fields = append(v.Fields, errs.Fields(err).Fields...)
	}
	if err := v.Err(); err != nil {
		return Simulation{}, err
	}
	// The calls in progress, by when they end, grouped by arrival (a
	// burst's calls end together): the order they were allowed is the
	// order they end, since every call lasts hold. One group per arrival
	// bounds the memory whatever the limit and the bursts.
	type group struct {
		end float64
		n   int64
	}
	h := hold.Seconds()
	var running []group
	var inUse int64
	return play(p, func(at float64, n int64) int64 {
		for len(running) > 0 && running[0].end <= at {
			inUse -= running[0].n
			running = running[1:]
		}
		got := max(0, min(n, limit-inUse))
		if got > 0 {
			running = append(running, group{at + h, got})
			inUse += got
		}
		return got
	}), nil
}
