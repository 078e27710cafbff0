package decision

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// httpAcquire calls /v1/acquire with the Authorization value auth (none
// when empty) and returns the status, headers and body.
func httpAcquire(t *testing.T, addr, method, auth, bucket string, n int64) (int, http.Header, string) {
	t.Helper()
	var req *http.Request
	var err error
	if method == http.MethodGet {
		q := url.Values{"bucket": {bucket}, "n": {fmt.Sprint(n)}}
		req, err = http.NewRequest(method, "http://"+addr+"/v1/acquire?"+q.Encode(), nil)
	} else {
		body := fmt.Sprintf(`{"bucket": %q, "n": %d}`, bucket, n)
		req, err = http.NewRequest(method, "http://"+addr+"/v1/acquire", strings.NewReader(body))
	}
	if err != nil {
		t.Fatal(err)
	}
	return send(t, req, auth)
}

func send(t *testing.T, req *http.Request, auth string) (int, http.Header, string) {
	t.Helper()
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestHTTPAcquire(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{Headers: HeadersBoth, MetricsAddr: "127.0.0.1:0"}, gatewayBuckets, gatewayMappings)
	addr, auth := st.srv.HTTPAddr(), "Bearer "+st.edge

	// POST: 3 tokens of 5, then 2, then a denial.
	for i, want := range []struct {
		n         int64
		allowed   bool
		remaining int64
	}{{3, true, 2}, {2, true, 0}, {1, false, 0}} {
		code, h, body := httpAcquire(t, addr, http.MethodPost, auth, "checkout", want.n)
		if (want.allowed && code != 200) || (!want.allowed && code != 429) {
			t.Fatalf("call %d: %d %s", i, code, body)
		}
		var res AcquireResponse
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatalf("call %d: %v in %s", i, err, body)
		}
		if res.Allowed != want.allowed || res.Remaining != want.remaining || res.Limit != 5 || res.ResetAfter <= 0 {
			t.Fatalf("call %d: %+v, want %+v", i, res, want)
		}
		if h.Get("RateLimit-Limit") != "5" || h.Get("X-RateLimit-Limit") != "5" {
			t.Fatalf("call %d: headers %v", i, h)
		}
		if !want.allowed && (res.RetryAfter < 3600 || h.Get("Retry-After") == "") {
			t.Fatalf("denial without a wait: %+v %v", res, h)
		}
	}

	// GET, the auth_request form: 200 allow, 403 + Sluice-Decision: deny.
	for i, want := range []int{200, 200, 200, 403} {
		code, h, _ := httpAcquire(t, addr, http.MethodGet, auth, "search", 1)
		if code != want {
			t.Fatalf("GET %d: %d, want %d", i, code, want)
		}
		if code == 403 && (h.Get(DecisionHeader) != "deny" || h.Get("Retry-After") == "") {
			t.Fatalf("GET denial headers %v", h)
		}
		if code == 200 && h.Get(DecisionHeader) != "allow" {
			t.Fatalf("GET allow headers %v", h)
		}
	}

	// Errors: a clear status and message, never a 500 (and a keyed bucket
	// takes from its key).
	for _, tc := range []struct {
		name, method, body, query string
		code                      int
		text                      string
	}{
		{"unknown bucket", "POST", `{"bucket": "nope"}`, "", 404, "no bucket"},
		{"not allowed", "POST", `{"bucket": "theirs"}`, "", 403, "may not take tokens"},
		{"over capacity", "POST", `{"bucket": "checkout", "n": 6}`, "", 422, "capacity"},
		{"bad n", "POST", `{"bucket": "checkout", "n": -1}`, "", 422, "whole number"},
		{"no bucket", "POST", `{"n": 1}`, "", 422, "bucket"},
		{"not json", "POST", `bucket=checkout`, "", 422, "JSON object"},
		{"unknown field", "POST", `{"bucket": "checkout", "tokens": 1}`, "", 422, "tokens"},
		{"two objects", "POST", `{"bucket": "checkout"} {}`, "", 422, "one JSON object"},
		{"huge body", "POST", `{"bucket": "` + strings.Repeat("x", 10000) + `"}`, "", 422, "larger than"},
		{"keyed", "POST", `{"bucket": "per-ip", "key": "10.0.0.1"}`, "", 200, `"remaining":1`},
		{"GET bad n", "GET", "", "bucket=checkout&n=1e3", 422, "whole number"},
		{"GET unknown", "GET", "", "bucket=nope", 404, "no bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *http.Request
			if tc.method == "GET" {
				req, _ = http.NewRequest("GET", "http://"+addr+"/v1/acquire?"+tc.query, nil)
			} else {
				req, _ = http.NewRequest("POST", "http://"+addr+"/v1/acquire", strings.NewReader(tc.body))
			}
			code, _, body := send(t, req, auth)
			if code != tc.code || !strings.Contains(body, tc.text) {
				t.Fatalf("%d %s, want %d with %q", code, body, tc.code, tc.text)
			}
			var eb errorBody
			if tc.method == "POST" && tc.code >= 400 && (json.Unmarshal([]byte(body), &eb) != nil || eb.Error.Code == "") {
				t.Fatalf("error body %s", body)
			}
		})
	}

	// Probes on the same listener; metrics only on their own.
	for url, want := range map[string]string{
		"http://" + addr + "/healthz": "ok", "http://" + addr + "/readyz": `"ready":true`,
		"http://" + st.srv.MetricsAddr() + "/metrics": `sluice_decide_requests_total{result="ok",transport="http"}`,
	} {
		req, _ := http.NewRequest("GET", url, nil)
		code, _, body := send(t, req, "")
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("%s: %d %s", url, code, body)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if code, _, body := send(t, req, ""); code != http.StatusNotFound || strings.Contains(body, "sluice_") {
		t.Fatalf("/metrics on the decision port: %d %.200s", code, body)
	}
	req, _ = http.NewRequest("GET", "http://"+st.srv.MetricsAddr()+"/metrics", nil)
	_, _, body := send(t, req, "")
	if !strings.Contains(body, `sluice_client_decisions_total{app="edge",bucket="checkout",result="denied"} 1`) {
		t.Fatalf("client metrics of the app missing:\n%s", body)
	}
}

// A bucket in shadow mode answers every call 200; the ones it would have
// denied say so: "would_deny": true in the POST form's body, the header
// Sluice-Would-Deny on the GET form's answer. Other answers carry
// "would_deny": false and no header.
func TestHTTPAcquireWouldDeny(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, []bucketDef{
		{name: "trial", owner: "edge", rate: "1/day", capacity: 2, shadow: true},
		{name: "plain", owner: "edge", rate: "1/day", capacity: 2},
	}, nil)
	addr, auth := st.srv.HTTPAddr(), "Bearer "+st.edge
	for i, want := range []bool{false, false, true, true} {
		code, h, body := httpAcquire(t, addr, http.MethodPost, auth, "trial", 1)
		var res AcquireResponse
		if err := json.Unmarshal([]byte(body), &res); err != nil || code != 200 {
			t.Fatalf("call %d: %d %s (%v)", i, code, body, err)
		}
		if !res.Allowed || res.WouldDeny != want || !strings.Contains(body, fmt.Sprintf(`"would_deny":%v`, want)) {
			t.Fatalf("call %d: %s, want would_deny %v", i, body, want)
		}
		if want && res.RetryAfter <= 0 {
			t.Fatalf("call %d: a would-deny without the wait it would have had: %s", i, body)
		}
		if h.Get(WouldDenyHeader) != "" {
			t.Fatalf("call %d: the POST form sets %s", i, WouldDenyHeader)
		}
	}
	code, h, _ := httpAcquire(t, addr, http.MethodGet, auth, "trial", 1)
	if code != 200 || h.Get(DecisionHeader) != "allow" || h.Get(WouldDenyHeader) != "true" {
		t.Fatalf("GET of a bucket that would deny: %d %v", code, h)
	}
	// A bucket not in shadow mode: allowed without the field set, then
	// denied.
	for i, wantCode := range []int{200, 200, 429} {
		code, _, body := httpAcquire(t, addr, http.MethodPost, auth, "plain", 1)
		if code != wantCode || !strings.Contains(body, `"would_deny":false`) {
			t.Fatalf("plain call %d: %d %s", i, code, body)
		}
	}
	if code, h, _ := httpAcquire(t, addr, http.MethodGet, auth, "plain", 1); code != DeniedStatus || h.Get(WouldDenyHeader) != "" {
		t.Fatalf("GET of a plain bucket's denial: %d %v", code, h)
	}
}
