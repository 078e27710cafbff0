package buckets

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		micro   int64
		period  time.Duration
		canon   string
		human   string
		permits string
	}{
		{"0.5/s", 500_000, time.Second, "0.5/s", "0.5 per second", "0.5"},
		{"100/min", 100_000_000, time.Minute, "100/min", "100 per minute", "100"},
		{"10000/day", 10_000_000_000, 24 * time.Hour, "10000/day", "10000 per day", "10000"},
		{"7 per 90s", 7_000_000, 90 * time.Second, "7/90s", "7 per 90 seconds", "7"},
		{"100 per minute", 100_000_000, time.Minute, "100/min", "100 per minute", "100"},
		{"0.5 per second", 500_000, time.Second, "0.5/s", "0.5 per second", "0.5"},
		{"5/h", 5_000_000, time.Hour, "5/h", "5 per hour", "5"},
		{"3 per 2h", 3_000_000, 2 * time.Hour, "3/2h", "3 per 2 hours", "3"},
		{"3 per 2 hours", 3_000_000, 2 * time.Hour, "3/2h", "3 per 2 hours", "3"},
		{"  1 / 120 SECONDS ", 1_000_000, 2 * time.Minute, "1/2min", "1 per 2 minutes", "1"},
		{"1/2day", 1_000_000, 48 * time.Hour, "1/2day", "1 per 2 days", "1"},
		{"1/365d", 1_000_000, 365 * 24 * time.Hour, "1/365day", "1 per 365 days", "1"},
		{"2.50/m", 2_500_000, time.Minute, "2.5/min", "2.5 per minute", "2.5"},
		{"0.000001/s", 1, time.Second, "0.000001/s", "0.000001 per second", "0.000001"},
		{"1.1000000/s", 1_100_000, time.Second, "1.1/s", "1.1 per second", "1.1"},
		{"1000000000/s", 1_000_000_000_000_000, time.Second, "1000000000/s", "1000000000 per second", "1000000000"},
		{".5/sec", 500_000, time.Second, "0.5/s", "0.5 per second", "0.5"},
		{"007/1s", 7_000_000, time.Second, "7/s", "7 per second", "7"},
		{"1/86399s", 1_000_000, 86399 * time.Second, "1/86399s", "1 per 86399 seconds", "1"},
		{"1/3600 s", 1_000_000, time.Hour, "1/h", "1 per hour", "1"},
		{"4\tper\tday", 4_000_000, 24 * time.Hour, "4/day", "4 per day", "4"},
		{"1/1hr", 1_000_000, time.Hour, "1/h", "1 per hour", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRate(tt.in)
			if err != nil {
				t.Fatalf("ParseRate(%q): %v", tt.in, err)
			}
			if r.PermitsMicro != tt.micro || r.Period != tt.period {
				t.Fatalf("ParseRate(%q) = %+v; want %d per %v", tt.in, r, tt.micro, tt.period)
			}
			if got := r.String(); got != tt.canon {
				t.Errorf("String = %q; want %q", got, tt.canon)
			}
			if got := r.Human(); got != tt.human {
				t.Errorf("Human = %q; want %q", got, tt.human)
			}
			if got := r.Permits(); got != tt.permits {
				t.Errorf("Permits = %q; want %q", got, tt.permits)
			}
			back, err := ParseRate(r.String())
			if err != nil || back != r {
				t.Errorf("ParseRate(String()) = %+v, %v; want %+v", back, err, r)
			}
			back, err = ParseRate(r.Human())
			if err != nil || back != r {
				t.Errorf("ParseRate(Human()) = %+v, %v; want %+v", back, err, r)
			}
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	for _, in := range []string{
		"", "   ", "5", "5/", "/s", "0/s", "0.0/s", "-1/s", "+1/s", "1e3/s", "1,000/s",
		"0.0000001/s", "1.2345678/s", "1000000000.000001/s", "2000000000/s", "99999999999999999999/s",
		"1/0s", "1/ms", "1/week", "1/366day", "1/31536001s", "1/99999999999day", "1/s/s", "1 per", "per s",
		"1 pers", "1/1.5s", "1/-5s", ".", "./s", "1..2/s", "1.2.3/s", "NaN/s", "Inf/s", "1/ 2 3s",
		"1/\x00s", "½/s", "1/s\n1/s", "ten/s",
	} {
		r, err := ParseRate(in)
		if err == nil {
			t.Errorf("ParseRate(%q) = %+v; want an error", in, r)
			continue
		}
		if !errors.Is(err, errs.ErrInvalid) || errs.Fields(err).For("rate") == "" {
			t.Errorf("ParseRate(%q) error %v is not a validation error on rate", in, err)
		}
	}
}

func TestRateValidate(t *testing.T) {
	for _, r := range []Rate{
		{},
		{PermitsMicro: 1},
		{Period: time.Second},
		{PermitsMicro: -1, Period: time.Second},
		{PermitsMicro: MaxPermitsMicro + 1, Period: time.Second},
		{PermitsMicro: 1, Period: time.Second / 2},
		{PermitsMicro: 1, Period: 1500 * time.Millisecond},
		{PermitsMicro: 1, Period: MaxPeriod + time.Second},
	} {
		if err := r.Validate(); errs.Fields(err).For("rate") == "" {
			t.Errorf("Validate(%+v) = %v; want a rate error", r, err)
		}
	}
	if err := (Rate{PermitsMicro: MaxPermitsMicro, Period: MaxPeriod}).Validate(); err != nil {
		t.Errorf("largest rate: %v", err)
	}
}

func TestRatePerSecond(t *testing.T) {
	for in, want := range map[string]float64{"0.5/s": 0.5, "120/min": 2, "7/90s": 7.0 / 90, "86400/day": 1} {
		r, err := ParseRate(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.PerSecond(); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s PerSecond = %v; want %v", in, got, want)
		}
	}
	if (Rate{}).PerSecond() != 0 || (Rate{}).String() != "" || (Rate{}).Human() != "" {
		t.Error("zero Rate must format as empty and 0 per second")
	}
}

func TestRateText(t *testing.T) {
	var r Rate
	if err := r.UnmarshalText([]byte("7 per 90s")); err != nil {
		t.Fatal(err)
	}
	text, err := r.MarshalText()
	if err != nil || string(text) != "7/90s" {
		t.Fatalf("MarshalText = %q, %v", text, err)
	}
	if err := r.UnmarshalText([]byte("nope")); err == nil {
		t.Fatal("UnmarshalText accepted garbage")
	}
	if r.String() != "7/90s" {
		t.Fatalf("failed UnmarshalText changed the rate to %v", r)
	}
}

// FuzzParseRate: no input panics, and every accepted rate is valid and
// round-trips through both of its text forms.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"0.5/s", "100/min", "10000/day", "7 per 90s", "3 per 2 hours", "1.000001/365d", "0/s", "1/0s", ".5/m", "99999999999/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			if errs.Fields(err).For("rate") == "" {
				t.Fatalf("ParseRate(%q) error %v is not a validation error on rate", s, err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseRate(%q) = %+v, which is invalid: %v", s, r, err)
		}
		for _, text := range []string{r.String(), r.Human()} {
			back, err := ParseRate(text)
			if err != nil || back != r {
				t.Fatalf("ParseRate(%q) = %+v, %v; want %+v (from %q)", text, back, err, r, s)
			}
		}
		if r.PerSecond() <= 0 {
			t.Fatalf("ParseRate(%q) = %+v with PerSecond %v", s, r, r.PerSecond())
		}
	})
}
