package decision

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
)

// slotCall posts body to a slot endpoint (take: "/v1/slots") and decodes
// the answer.
func slotCall(t *testing.T, addr, path, auth, body string) (int, http.Header, SlotResponse, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	code, h, raw := send(t, req, auth)
	var res SlotResponse
	if code == 200 || code == 429 {
		if err := json.Unmarshal([]byte(raw), &res); err != nil {
			t.Fatalf("%s %s: %v in %s", path, body, err, raw)
		}
	}
	return code, h, res, raw
}

// TestHTTPSlots: take, deny at the limit, release by the slot id (twice:
// the second frees nothing), renew, keyed slots, and the refusals.
func TestHTTPSlots(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, []bucketDef{
		{name: "exports", owner: "edge", capacity: 2, kind: buckets.KindConcurrency, slotMillis: 60_000},
		{name: "per-user", owner: "edge", capacity: 1, kind: buckets.KindConcurrency, slotMillis: 60_000, keyed: true},
		{name: "orders", owner: "edge", rate: "1/s", capacity: 5},
		{name: "theirs", owner: "other", capacity: 1, kind: buckets.KindConcurrency},
	}, nil)
	addr, auth := st.srv.HTTPAddr(), "Bearer "+st.edge

	var ids []string
	for i := range 2 {
		code, h, res, raw := slotCall(t, addr, "/v1/slots", auth, `{"limit": "exports"}`)
		if code != 200 || !res.Allowed || res.Slot == "" || res.InUse != int64(i+1) || res.Limit != 2 || res.Lease != 60 ||
			h.Get("RateLimit-Limit") != "2" {
			t.Fatalf("take %d: %d %s %v", i+1, code, raw, h)
		}
		ids = append(ids, res.Slot)
	}
	code, h, res, raw := slotCall(t, addr, "/v1/slots", auth, `{"limit": "exports"}`)
	if code != 429 || res.Allowed || res.Slot != "" || res.RetryAfter <= 0 || h.Get("Retry-After") == "" {
		t.Fatalf("at the limit: %d %s %v", code, raw, h)
	}
	release := `{"limit": "exports", "slot": "` + ids[0] + `"}`
	if code, _, res, raw := slotCall(t, addr, "/v1/slots/release", auth, release); code != 200 || !res.Allowed || res.InUse != 1 {
		t.Fatalf("release: %d %s", code, raw)
	}
	if code, _, res, raw := slotCall(t, addr, "/v1/slots/release", auth, release); code != 200 || res.Allowed || res.InUse != 1 {
		t.Fatalf("second release: %d %s, want nothing freed", code, raw)
	}
	renew := `{"limit": "exports", "slot": "` + ids[1] + `"}`
	if code, _, res, raw := slotCall(t, addr, "/v1/slots/renew", auth, renew); code != 200 || !res.Allowed || res.Lease != 60 {
		t.Fatalf("renew: %d %s", code, raw)
	}
	if code, _, res, raw := slotCall(t, addr, "/v1/slots/renew", auth, release); code != 200 || res.Allowed {
		t.Fatalf("renew of a released slot: %d %s", code, raw)
	}

	// Keyed: each key its own slot.
	for _, c := range []struct {
		key  string
		want int
	}{{"ann", 200}, {"ann", 429}, {"bob", 200}} {
		if code, _, _, raw := slotCall(t, addr, "/v1/slots", auth, `{"limit": "per-user", "key": "`+c.key+`"}`); code != c.want {
			t.Errorf("key %s: %d %s, want %d", c.key, code, raw, c.want)
		}
	}

	// Refusals, each with its reason.
	for _, c := range []struct {
		auth, path, body string
		code             int
		text             string
	}{
		{"Bearer nope", "/v1/slots", `{"limit": "exports"}`, 401, ""},
		{auth, "/v1/slots", `{"limit": "nope"}`, 404, "no limit"},
		{auth, "/v1/slots", `{"limit": "theirs"}`, 403, "may not take slots"},
		{auth, "/v1/slots", `{"limit": "orders"}`, 422, "not a concurrency limit"},
		{auth, "/v1/slots", `{"limit": "exports", "slot": "mine"}`, 422, "chosen by the service"},
		{auth, "/v1/slots", `{"bucket": "exports"}`, 422, "must be a JSON object"},
		{auth, "/v1/slots", `{}`, 422, "limit"},
		{auth, "/v1/slots/release", `{"limit": "exports"}`, 422, "the id the take answered"},
		{auth, "/v1/slots/release", `{"limit": "exports", "slot": "not an id"}`, 422, "slot"},
		{auth, "/v1/slots", `{"limit": "per-user", "key": ""}`, 404, "no limit"},
	} {
		code, _, _, raw := slotCall(t, addr, c.path, c.auth, c.body)
		if code != c.code || !strings.Contains(raw, c.text) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.path, c.body, code, raw, c.code, c.text)
		}
	}
}
