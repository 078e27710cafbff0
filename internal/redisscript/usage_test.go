package redisscript

import (
	"path"
	"testing"
)

func TestUsageKeys(t *testing.T) {
	ks := Keyspace{}
	if got, want := ks.UsageMinute("api.search", 29_000_000), "sluice:{api.search}:usage:m:29000000"; got != want {
		t.Errorf("UsageMinute = %q, want %q", got, want)
	}
	if got, want := (Keyspace{Prefix: "p:"}).UsageHour("b", 483_000), "p:{b}:usage:h:483000"; got != want {
		t.Errorf("UsageHour = %q, want %q", got, want)
	}
	// Usage keys must never look like bucket hashes to the reconcile scan,
	// or it would delete them as extra buckets.
	if got, want := ks.UsageActive(29_000_000), "sluice:usage:active:29000000"; got != want {
		t.Errorf("UsageActive = %q, want %q", got, want)
	}
	for _, k := range []string{ks.UsageMinute("b", 1), ks.UsageHour("b", 1), ks.UsageActive(1)} {
		if _, ok := ks.NameOf(k); ok {
			t.Errorf("NameOf(%q) accepted a usage key", k)
		}
		if ok, _ := path.Match(ks.Pattern(), k); ok {
			t.Errorf("bucket pattern %q matches usage key %q", ks.Pattern(), k)
		}
	}
}

func TestUsageFields(t *testing.T) {
	for _, tc := range []struct {
		field   string
		app     string
		allowed bool
		ok      bool
	}{
		{UsageAllowedField("checkout"), "checkout", true, true},
		{UsageDeniedField("a-b.c_d"), "a-b.c_d", false, true},
		{"checkout:x", "", false, false},
		{UsageWouldDenyField("checkout"), "", false, false},
		{":a", "", false, false},
		{"Bad:a", "", false, false},
		{"a:b:d", "", false, false},
		{"", "", false, false},
	} {
		app, allowed, ok := ParseUsageField(tc.field)
		if app != tc.app || allowed != tc.allowed || ok != tc.ok {
			t.Errorf("ParseUsageField(%q) = %q %v %v, want %q %v %v", tc.field, app, allowed, ok, tc.app, tc.allowed, tc.ok)
		}
	}
}

func TestUsageCounts(t *testing.T) {
	for _, tc := range []struct {
		field string
		app   string
		kind  UsageKind
		ok    bool
	}{
		{UsageAllowedField("checkout"), "checkout", UsageAllowed, true},
		{UsageDeniedField("a-b.c_d"), "a-b.c_d", UsageDenied, true},
		{UsageWouldDenyField("shop"), "shop", UsageWouldDeny, true},
		{UsageNearLimitField("shop"), "shop", UsageNearLimit, true},
		{UsageFallbackAllowedField("shop"), "shop", UsageFallbackAllowed, true},
		{UsageFallbackRefusedField("shop"), "shop", UsageFallbackRefused, true},
		{"checkout:x", "", 0, false},
		{":n", "", 0, false},
		{"Bad:w", "", 0, false},
		{"a:b:n", "", 0, false},
		{"n", "", 0, false},
		{"", "", 0, false},
	} {
		app, kind, ok := ParseUsageCount(tc.field)
		if app != tc.app || kind != tc.kind || ok != tc.ok {
			t.Errorf("ParseUsageCount(%q) = %q %v %v, want %q %v %v", tc.field, app, kind, ok, tc.app, tc.kind, tc.ok)
		}
	}
}
