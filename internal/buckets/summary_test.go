package buckets

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
)

// summaryCases: the form script (web/static/app.js) is checked against
// Summary in a browser test of package web.
var summaryCases = []struct {
	Capacity int64
	Rate     string
	Want     string
}{
	{10, "5/s", "bursts of up to 10, then 5 per second: 300 per minute sustained"},
	{1, "0.5/s", "bursts of up to 1, then 0.5 per second: 30 per minute sustained"},
	{1000000, "100/min", "bursts of up to 1,000,000, then 100 per minute: 6,000 per hour sustained"},
	{7, "7 per 90s", "bursts of up to 7, then 7 per 90 seconds: 280 per hour sustained"},
	{5, "3 per 2 hours", "bursts of up to 5, then 3 per 2 hours: 36 per day sustained"},
	{10000, "10000/day", "bursts of up to 10,000, then 10000 per day: 70,000 per week sustained"},
	{2, "1 per 30 days", "bursts of up to 2, then 1 per 30 days: 12.166667 per year sustained"},
	{3, "0.000001/s", "bursts of up to 3, then 0.000001 per second: 0.00006 per minute sustained"},
	{1000000000, "1000000000/s", "bursts of up to 1,000,000,000, then 1000000000 per second: 60,000,000,000 per minute sustained"},
	{3, "1/7s", "bursts of up to 3, then 1 per 7 seconds: 8.571429 per minute sustained"},
	{1, "999999999.999999/365d", "bursts of up to 1, then 999999999.999999 per 365 days: 999,999,999.999999 per year sustained"},
}

func TestSummary(t *testing.T) {
	for _, tc := range summaryCases {
		r, err := ParseRate(tc.Rate)
		if err != nil {
			t.Fatalf("%s: %v", tc.Rate, err)
		}
		if got := Summary(tc.Capacity, r); got != tc.Want {
			t.Errorf("Summary(%d, %s) = %q, want %q", tc.Capacity, tc.Rate, got, tc.Want)
		}
	}
	r, _ := ParseRate("1/s")
	for _, c := range []int64{0, -1, MaxCapacity + 1} {
		if got := Summary(c, r); got != "" {
			t.Errorf("Summary(%d, 1/s) = %q, want empty", c, got)
		}
	}
	if got := Summary(1, Rate{}); got != "" {
		t.Errorf("Summary with no rate = %q", got)
	}
}

func TestSimulate(t *testing.T) {
	rate := func(s string) Rate {
		r, err := ParseRate(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// 10 requests per second against 10 tokens and 5/s: the first
	// second drains the full bucket partly, then 5 per second get through.
	sim, err := Simulate(10, 0, rate("5/s"), Pattern{Steady: 10, Duration: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(sim.Allowed) != 60 || sim.Step != time.Second {
		t.Fatalf("%d points of %v", len(sim.Allowed), sim.Step)
	}
	if sim.TotalAllowed+sim.TotalDenied != 600 {
		t.Errorf("%d requests in all, want 600", sim.TotalAllowed+sim.TotalDenied)
	}
	// Admitted is at most capacity + rate x elapsed, and within one of it
	// (the last refill before the end may not make a whole token).
	if bound := int64(10 + 5*60); sim.TotalAllowed > bound || sim.TotalAllowed < bound-6 {
		t.Errorf("allowed %d, want about %d and never more", sim.TotalAllowed, bound)
	}
	if sim.Allowed[0] != 10 || sim.Denied[0] != 0 || sim.Allowed[30] != 5 || sim.Denied[30] != 5 {
		t.Errorf("second 0: %d/%d, second 30: %d/%d; want 10/0 and 5/5",
			sim.Allowed[0], sim.Denied[0], sim.Allowed[30], sim.Denied[30])
	}

	// Bursts of 25 every 10 s against 20 tokens and 1/s: the first burst
	// gets 20, each next one the 10 refilled.
	sim, err = Simulate(20, 0, rate("1/s"), Pattern{Burst: 25, Every: 10 * time.Second, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sim.Allowed[0] != 20 || sim.Denied[0] != 5 || sim.Allowed[10] != 10 || sim.Denied[10] != 15 || sim.Allowed[20] != 10 {
		t.Errorf("bursts: %v / %v", sim.Allowed, sim.Denied)
	}
	if sim.TotalAllowed != 40 || sim.TotalDenied != 35 {
		t.Errorf("bursts total %d/%d, want 40/35", sim.TotalAllowed, sim.TotalDenied)
	}

	// Under the limit nothing is denied; a huge burst costs one step.
	sim, err = Simulate(MaxCapacity, 0, rate("1000000/s"), Pattern{Steady: MaxSteady, Burst: MaxBurst, Every: time.Second, Duration: MaxSimulated})
	if err != nil {
		t.Fatal(err)
	}
	if sim.TotalDenied != 0 || sim.TotalAllowed != int64(MaxSteady*600+MaxBurst*600) {
		t.Errorf("big pattern: %d allowed, %d denied", sim.TotalAllowed, sim.TotalDenied)
	}
}

func TestSimulateRejects(t *testing.T) {
	r, _ := ParseRate("1/s")
	ok := Pattern{Steady: 1, Duration: time.Minute}
	for name, tc := range map[string]struct {
		cap  int64
		r    Rate
		p    Pattern
		want string
	}{
		"capacity":  {0, r, ok, "max_permits"},
		"rate":      {1, Rate{}, ok, "rate"},
		"steady":    {1, r, Pattern{Steady: MaxSteady + 1, Duration: time.Minute}, "steady"},
		"negative":  {1, r, Pattern{Steady: -1, Duration: time.Minute}, "steady"},
		"nothing":   {1, r, Pattern{Duration: time.Minute}, "steady"},
		"burst":     {1, r, Pattern{Burst: MaxBurst + 1, Every: time.Second, Duration: time.Minute}, "burst"},
		"every":     {1, r, Pattern{Burst: 5, Duration: time.Minute}, "every"},
		"fraction":  {1, r, Pattern{Burst: 5, Every: 1500 * time.Millisecond, Duration: time.Minute}, "every"},
		"long":      {1, r, Pattern{Steady: 1, Duration: time.Hour}, "duration"},
		"zero time": {1, r, Pattern{Steady: 1}, "duration"},
	} {
		_, err := Simulate(tc.cap, 0, tc.r, tc.p)
		if !errors.Is(err, errs.ErrInvalid) || errs.Fields(err).For(tc.want) == "" {
			t.Errorf("%s: %v, want a reason for %s", name, err, tc.want)
		}
	}
}

func TestParsePattern(t *testing.T) {
	p, err := ParsePattern(" 2.5 ", "20", "15", "")
	if err != nil || p != (Pattern{Steady: 2.5, Burst: 20, Every: 15 * time.Second, Duration: time.Minute}) {
		t.Fatalf("ParsePattern = %+v, %v", p, err)
	}
	if p, err := ParsePattern("", "5", "2", "120"); err != nil || p.Steady != 0 || p.Duration != 2*time.Minute {
		t.Fatalf("bursts only: %+v, %v", p, err)
	}
	for _, tc := range []struct{ steady, burst, every, duration, field string }{
		{"x", "", "", "", "steady"},
		{"NaN", "", "", "", "steady"},
		{"Inf", "", "", "", "steady"},
		{"-1", "", "", "", "steady"},
		{"1", "2.5", "3", "", "burst"},
		{"1", "1e300", "3", "", "burst"},
		{"1", "5", "", "", "every"},
		{"1", "5", "0.5", "", "every"},
		{"1", "", "", "601", "duration"},
		{"1", "", "", "9999999999999999999", "duration"},
		{"", "", "", "", "steady"},
		{"1001", "", "", "", "steady"},
	} {
		_, err := ParsePattern(tc.steady, tc.burst, tc.every, tc.duration)
		if !errors.Is(err, errs.ErrInvalid) || errs.Fields(err).For(tc.field) == "" {
			t.Errorf("ParsePattern(%q, %q, %q, %q) = %v, want a reason for %s", tc.steady, tc.burst, tc.every, tc.duration, err, tc.field)
		}
	}
}

func FuzzSimulate(f *testing.F) {
	f.Add(int64(10), "5/s", "10", "20", "15", "60")
	f.Add(int64(1), "0.000001/s", "1000", "1000000", "1", "600")
	f.Fuzz(func(t *testing.T, capacity int64, rate, steady, burst, every, duration string) {
		r, err := ParseRate(rate)
		if err != nil {
			return
		}
		p, err := ParsePattern(steady, burst, every, duration)
		if err != nil {
			return
		}
		if p.Steady*p.Duration.Seconds() > 20_000 {
			return // bounded, but slow under the fuzzer
		}
		sim, err := Simulate(capacity, 0, r, p)
		if err != nil {
			return
		}
		// Never more admitted than capacity + rate x span.
		bound := float64(capacity) + r.PerSecond()*p.Duration.Seconds()
		if float64(sim.TotalAllowed) > bound+1e-6*bound+1 {
			t.Fatalf("allowed %d > bound %v for %+v", sim.TotalAllowed, bound, p)
		}
	})
}
