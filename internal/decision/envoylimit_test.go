package decision

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/buckets"
)

func TestEnvoyLimitOf(t *testing.T) {
	for _, tc := range []struct {
		rate string
		want EnvoyLimit
	}{
		{"100/min", EnvoyLimit{100, UnitMinute, 1}},
		{"10/s", EnvoyLimit{10, UnitSecond, 1}},
		{"0.5/s", EnvoyLimit{30, UnitMinute, 1}},
		{"7 per 90s", EnvoyLimit{280, UnitHour, 1}},
		{"10000/day", EnvoyLimit{10000, UnitDay, 1}},
		{"1/day", EnvoyLimit{1, UnitDay, 1}},
		{"5/h", EnvoyLimit{5, UnitHour, 1}},
		{"3 per 2 days", EnvoyLimit{3, UnitDay, 2}},
		{"0.000001/s", EnvoyLimit{1, UnitSecond, 1_000_000}},
		{"0.333333/day", EnvoyLimit{333333, UnitDay, 1_000_000}},
		{"1000000000/s", EnvoyLimit{1_000_000_000, UnitSecond, 1}},
	} {
		r, err := buckets.ParseRate(tc.rate)
		if err != nil {
			t.Fatal(err)
		}
		if got := envoyLimitOf(r); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.rate, got, tc.want)
		}
	}
	if got := envoyLimitOf(buckets.Rate{}); got != (EnvoyLimit{}) {
		t.Errorf("zero rate: %+v", got)
	}
}

func TestSettings(t *testing.T) {
	for in, want := range map[string]Unmatched{"": UnmatchedAllow, "allow": UnmatchedAllow, " DENY ": UnmatchedDeny} {
		if got, err := ParseUnmatched(in); err != nil || got != want {
			t.Errorf("ParseUnmatched(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseUnmatched("maybe"); err == nil {
		t.Error("ParseUnmatched accepted maybe")
	}
	for in, want := range map[string]Headers{"": HeadersDraft, "x": HeadersX, "Both": HeadersBoth, "none": HeadersNone} {
		if got, err := ParseHeaders(in); err != nil || got != want || got.String() == "" {
			t.Errorf("ParseHeaders(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseHeaders("all"); err == nil {
		t.Error("ParseHeaders accepted all")
	}
	denied := client.Result{Limit: 10, Remaining: 0, RetryAfter: 1500 * time.Millisecond, ResetAfter: 20 * time.Second}
	h := http.Header{}
	HeadersNone.Write(h, denied)
	if len(h) != 1 || h.Get("Retry-After") != "2" {
		t.Fatalf("none still sends Retry-After, rounded up: %v", h)
	}
	h = http.Header{}
	HeadersBoth.Write(h, denied)
	if h.Get("RateLimit-Reset") != "20" || h.Get("X-RateLimit-Limit") != "10" || h.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("both: %v", h)
	}
	h = http.Header{}
	HeadersDraft.Write(h, client.Result{Allowed: true, Fallback: true})
	if len(h) != 0 {
		t.Fatalf("fail open: no limit known, no headers: %v", h)
	}
}

func TestDeciding(t *testing.T) {
	a := Status{Code: CodeOK, Result: client.Result{Allowed: true, Limit: 5, Remaining: 3}}
	b := Status{Code: CodeOK, Result: client.Result{Allowed: true, Limit: 9, Remaining: 1}}
	c := Status{Code: CodeOverLimit, Result: client.Result{Limit: 5, RetryAfter: time.Second}}
	d := Status{Code: CodeOverLimit, Result: client.Result{Limit: 5, RetryAfter: time.Minute}}
	unmatched := Status{Code: CodeOverLimit, Note: "unmatched"}
	if got, ok := deciding([]Status{a, b}, CodeOK); !ok || got.Result.Remaining != 1 {
		t.Fatalf("allowed: the fewest left decides: %+v", got)
	}
	if got, ok := deciding([]Status{a, c, d, unmatched}, CodeOverLimit); !ok || got.Result.RetryAfter != time.Minute {
		t.Fatalf("denied: the longest wait decides: %+v", got)
	}
	if _, ok := deciding([]Status{unmatched}, CodeOverLimit); ok {
		t.Fatal("no bucket asked: no headers")
	}
}
