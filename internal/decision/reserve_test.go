package decision

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/descriptors"
)

// reserveBuckets keep 2 of 4 tokens for critical requests, refilled one
// an hour: nothing comes back while a test runs.
var reserveBuckets = []bucketDef{
	{name: "pay", owner: "edge", rate: "1/h", capacity: 4, reserve: 2},
	{name: "pay-http", owner: "edge", rate: "1/h", capacity: 4, reserve: 2},
	{name: "per-user", owner: "edge", rate: "1/h", capacity: 4, reserve: 2, keyed: true},
}

var reserveMappings = []descriptors.Mapping{
	{App: "edge", Domain: "edge", Entries: entries("path", "/pay"), Bucket: "pay"},
	{App: "edge", Domain: "edge", Entries: entries("user", ""), Bucket: "per-user", KeyFrom: "user"},
}

// TestGRPCCriticalEntry: a descriptor with the entry sluice_critical=true
// (anywhere in it) is matched without that entry and may take the
// bucket's reserve; others leave it, for plain and keyed buckets, alone
// and mixed in one request.
func TestGRPCCriticalEntry(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, reserveBuckets, reserveMappings)
	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	steps := []struct {
		what string
		req  *rlsv3.RateLimitRequest
		want []rlsv3.RateLimitResponse_Code
	}{
		{"2 not critical", request("edge", 2, desc("path", "/pay")), []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK}},
		{"a third not critical", request("edge", 1, desc("path", "/pay")), []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OVER_LIMIT}},
		{"critical, entry last", request("edge", 1, desc("path", "/pay", "sluice_critical", "true")),
			[]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK}},
		{"critical, entry first", request("edge", 1, desc("sluice_critical", "1", "path", "/pay")),
			[]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK}},
		{"critical, empty", request("edge", 1, desc("path", "/pay", "sluice_critical", "true")),
			[]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OVER_LIMIT}},
		// The entry with another value is taken out too, and is not critical.
		{"key not critical", request("edge", 3, desc("user", "ann", "sluice_critical", "false")),
			[]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OVER_LIMIT}},
		{"key, mixed", request("edge", 2, desc("user", "ann"), desc("user", "bob", "sluice_critical", "true")),
			[]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK}},
		{"key, mixed again", request("edge", 2, desc("user", "ann"), desc("user", "bob", "sluice_critical", "true")),
			[]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OK}},
	}
	for _, s := range steps {
		resp, err := e.ask(s.req)
		if err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if len(resp.GetStatuses()) != len(s.want) {
			t.Fatalf("%s: %d statuses, want %d", s.what, len(resp.GetStatuses()), len(s.want))
		}
		for i, ds := range resp.GetStatuses() {
			if ds.GetCode() != s.want[i] {
				t.Errorf("%s: descriptor %d: %v (%v), want %v", s.what, i, ds.GetCode(), ds, s.want[i])
			}
			if ds.GetCurrentLimit().GetName() == "" {
				t.Errorf("%s: descriptor %d was not matched: %v", s.what, i, ds)
			}
		}
	}
}

// TestHTTPCritical: POST with "critical": true and GET with critical=true
// may take the reserve; others leave it; a critical that is not a boolean
// is refused.
func TestHTTPCritical(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, reserveBuckets, reserveMappings)
	addr, auth := st.srv.HTTPAddr(), "Bearer "+st.edge
	post := func(body string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/acquire", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		code, _, _ := send(t, req, auth)
		return code
	}
	get := func(q url.Values) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/acquire?"+q.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, _, body := send(t, req, auth)
		return code, body
	}
	for i, s := range []struct {
		body string
		want int
	}{
		{`{"bucket": "pay-http", "n": 2}`, 200},
		{`{"bucket": "pay-http"}`, 429},
		{`{"bucket": "pay-http", "critical": false}`, 429},
		{`{"bucket": "pay-http", "critical": true}`, 200},
		{`{"bucket": "per-user", "key": "ann", "n": 3}`, 422}, // more than capacity - reserve
		{`{"bucket": "per-user", "key": "ann", "n": 3, "critical": true}`, 200},
	} {
		if got := post(s.body); got != s.want {
			t.Errorf("POST %d %s: %d, want %d", i+1, s.body, got, s.want)
		}
	}
	if code, _ := get(url.Values{"bucket": {"pay-http"}}); code != DeniedStatus {
		t.Errorf("GET not critical: %d, want %d", code, DeniedStatus)
	}
	if code, _ := get(url.Values{"bucket": {"pay-http"}, "critical": {"true"}}); code != 200 {
		t.Errorf("GET critical: %d, want 200", code)
	}
	if code, body := get(url.Values{"bucket": {"pay-http"}, "critical": {"maybe"}}); code != 422 || !strings.Contains(body, "critical") {
		t.Errorf("GET critical=maybe: %d %s, want 422 naming critical", code, body)
	}
}
