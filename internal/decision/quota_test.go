package decision

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// berlinMonthEnd is the end of the month of Berlin containing t.
func berlinMonthEnd(t *testing.T, at time.Time) time.Time {
	t.Helper()
	loc, err := quota.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return quota.Month.Next(quota.Month.Start(at, loc), loc)
}

// wantReset fails unless secs, a reset answered between before and after,
// is the time until end, give or take a second of rounding.
func wantReset(t *testing.T, what string, secs float64, before, after, end time.Time) {
	t.Helper()
	lo, hi := end.Sub(after).Seconds()-1, end.Sub(before).Seconds()+1
	if secs < lo || secs > hi {
		t.Fatalf("%s: reset in %.3f s; want %.0f..%.0f s (the end of Berlin's month, %s)", what, secs, lo, hi, end)
	}
}

// TestQuotaOverHTTPAndGRPC: a monthly quota of Berlin answers over HTTP
// and Envoy's gRPC API with what is left and the time until the 1st of
// next month at 00:00 in Berlin, and refuses beyond the quota until then.
func TestQuotaOverHTTPAndGRPC(t *testing.T) {
	t.Parallel()
	bs := []bucketDef{{name: "monthly", owner: "edge", capacity: 3, period: quota.Month, zone: "Europe/Berlin"}}
	ms := []descriptors.Mapping{{App: "edge", Domain: "edge", Entries: entries("generic_key", "monthly"), Bucket: "monthly"}}
	st := newStack(t, ServerConfig{Headers: HeadersBoth}, bs, ms)
	addr, auth := st.srv.HTTPAddr(), "Bearer "+st.edge
	if end := berlinMonthEnd(t, time.Now()); time.Until(end) < time.Minute {
		t.Skip("Berlin's month ends within the minute")
	}

	before := time.Now()
	code, h, body := httpAcquire(t, addr, http.MethodPost, auth, "monthly", 2)
	after := time.Now()
	end := berlinMonthEnd(t, before)
	var res AcquireResponse
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != 200 {
		t.Fatalf("HTTP: %d %s %v", code, body, err)
	}
	if !res.Allowed || res.Remaining != 1 || res.Limit != 3 {
		t.Fatalf("HTTP: %+v; want allowed, 1 of 3 left", res)
	}
	wantReset(t, "HTTP reset_after", res.ResetAfter, before, after, end)
	if r, err := strconv.ParseFloat(h.Get("RateLimit-Reset"), 64); err != nil {
		t.Fatalf("RateLimit-Reset %q", h.Get("RateLimit-Reset"))
	} else {
		wantReset(t, "RateLimit-Reset", r, before, after, end)
	}

	before = time.Now()
	code, h, body = httpAcquire(t, addr, http.MethodPost, auth, "monthly", 2)
	after = time.Now()
	res = AcquireResponse{}
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != 429 || res.Allowed || res.Remaining != 1 {
		t.Fatalf("HTTP beyond the quota: %d %s %v", code, body, err)
	}
	wantReset(t, "HTTP retry_after", res.RetryAfter, before, after, end)
	if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil {
		t.Fatalf("Retry-After %q", h.Get("Retry-After"))
	} else {
		wantReset(t, "Retry-After", float64(ra), before, after, end)
	}

	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		before = time.Now()
		resp, err := e.ask(request("edge", 0, desc("generic_key", "monthly")))
		after = time.Now()
		if err != nil || len(resp.GetStatuses()) != 1 {
			t.Fatalf("gRPC %d: %v %v", i, resp, err)
		}
		s := resp.GetStatuses()[0]
		lim := s.GetCurrentLimit()
		if resp.GetOverallCode() != want || s.GetLimitRemaining() != 0 || lim.GetName() != "monthly" ||
			lim.GetRequestsPerUnit() != 3 || lim.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MONTH {
			t.Fatalf("gRPC %d: %v; want %v, 0 left of 3 per month", i, resp, want)
		}
		wantReset(t, "gRPC duration_until_reset", s.GetDurationUntilReset().AsDuration().Seconds(), before, after, end)
		if r, err := strconv.ParseFloat(headerOf(resp, "RateLimit-Reset"), 64); err != nil || math.IsNaN(r) {
			t.Fatalf("gRPC %d: RateLimit-Reset %q", i, headerOf(resp, "RateLimit-Reset"))
		}
	}
}
