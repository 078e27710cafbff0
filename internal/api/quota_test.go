package api_test

import "testing"

// TestQuotaCalendar: a quota's period and zone through the API: required
// and checked on a quota, refused on other kinds, changeable.
func TestQuotaCalendar(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	var raw map[string]any
	e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{"name": "monthly", "owner_app": "alpha",
		"kind": "quota", "max_permits": 10000, "quota_period": "month", "time_zone": "Europe/Berlin"}).decode(t, &raw)
	if raw["quota_period"] != "month" || raw["time_zone"] != "Europe/Berlin" || raw["rate"] != "" {
		t.Fatalf("quota: %v", raw)
	}
	b := e.must(422, owner, "POST", "/api/v1/buckets", map[string]any{"name": "x", "owner_app": "alpha",
		"kind": "quota", "max_permits": 1, "quota_period": "fortnight", "time_zone": "Nowhere/Atlantis"}).errorBody(t)
	if b.reasonFor("quota_period") == "" || b.reasonFor("time_zone") == "" {
		t.Errorf("a bad period and zone: %+v", b.Error)
	}
	b = e.must(422, owner, "POST", "/api/v1/buckets", map[string]any{"name": "x", "owner_app": "alpha",
		"max_permits": 1, "rate": "1/s", "quota_period": "day"}).errorBody(t)
	if b.reasonFor("quota_period") == "" {
		t.Errorf("a token bucket with a period: %+v", b.Error)
	}
	e.must(200, owner, "PATCH", "/api/v1/buckets/monthly", map[string]any{"quota_period": "week", "time_zone": ""},
		"If-Match", "*").decode(t, &raw)
	if raw["quota_period"] != "week" || raw["time_zone"] != "UTC" {
		t.Fatalf("after PATCH: %v", raw)
	}
}
