package sso

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

func TestParseAppRoles(t *testing.T) {
	got, err := ParseAppRoles([]string{"shop-owners=shop:owner", " Search Team = search : viewer "})
	if err != nil {
		t.Fatal(err)
	}
	want := []AppRole{{"shop-owners", "shop", "owner"}, {"Search Team", "search", "viewer"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"shop:owner", "g=shop", "g=Shop:owner", "g=shop:admin", "=shop:owner"} {
		if _, err := ParseAppRoles([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGrantTakesTheHighestRole(t *testing.T) {
	m := Mapping{AdminGroups: []string{"admins"}, Apps: []AppRole{
		{"a", "shop", "viewer"}, {"b", "shop", "owner"}, {"c", "shop", "viewer"}, {"d", "search", "viewer"}}}
	g := m.Grant([]string{"c", "b", "a"})
	if g.Admin || g.Apps["shop"] != "owner" || len(g.Apps) != 1 {
		t.Fatalf("got %+v, want owner of shop only", g)
	}
	if g := m.Grant([]string{"admins", "Admins-x"}); !g.Admin || len(g.Apps) != 0 {
		t.Fatalf("got %+v, want admin only", g)
	}
	if g := m.Grant(nil); g.Admin || len(g.Apps) != 0 {
		t.Fatalf("no groups give %+v", g)
	}
}

func TestUsernameFromClaims(t *testing.T) {
	for _, tc := range []struct {
		claims map[string]any
		want   string
	}{
		{map[string]any{"preferred_username": "Ada.Lovelace"}, "ada.lovelace"},
		{map[string]any{"preferred_username": "ada@example.com"}, "ada"},
		{map[string]any{"email": "Max Mustermann@example.com"}, "max-mustermann"},
		{map[string]any{"preferred_username": "__x"}, "x"},
		{map[string]any{"preferred_username": "ÄÖÜ"}, ""},
		{map[string]any{}, ""},
		{map[string]any{"preferred_username": strings.Repeat("a", 100)}, strings.Repeat("a", 63)},
	} {
		if got := username(tc.claims, DefaultUsernameClaim); got != tc.want {
			t.Errorf("username(%v) = %q, want %q", tc.claims, got, tc.want)
		}
	}
}

func TestGroupsClaim(t *testing.T) {
	if got := groups([]any{"a", 1, "b"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("list: %v", got)
	}
	if got := groups("solo"); !slices.Equal(got, []string{"solo"}) {
		t.Errorf("string: %v", got)
	}
	if got := groups(nil); len(got) != 0 {
		t.Errorf("missing: %v", got)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{Issuer: "https://idp.example.com", ClientID: "sluice", RedirectURL: "https://sluice.example.com" + CallbackPath}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("a disabled config: %v", err)
	}
	for name, c := range map[string]Config{
		"issuer":   {Issuer: "idp.example.com", ClientID: "x", RedirectURL: ok.RedirectURL},
		"client":   {Issuer: ok.Issuer, RedirectURL: ok.RedirectURL},
		"redirect": {Issuer: ok.Issuer, ClientID: "x", RedirectURL: "https://sluice.example.com/callback"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLoginsAreSingleUseAndBound: a state is taken once, only with the
// browser cookie it was issued with, and not after LoginLifetime.
func TestLoginsAreSingleUseAndBound(t *testing.T) {
	ctx := context.Background()
	l := NewLogins(testenv.MySQL(t))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.Now = func() time.Time { return now }

	in, err := l.Begin(ctx, "/apps")
	if err != nil {
		t.Fatal(err)
	}
	if in.State == in.Browser || in.Nonce == "" || len(in.Verifier) < 43 {
		t.Fatalf("weak login secrets: %+v", in)
	}
	got, err := l.Take(ctx, in.State, in.Browser)
	if err != nil || got.Nonce != in.Nonce || got.Verifier != in.Verifier || got.Next != "/apps" {
		t.Fatalf("Take = %+v, %v", got, err)
	}
	if _, err := l.Take(ctx, in.State, in.Browser); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("a second Take: %v, want ErrUnknownState", err)
	}

	other, _ := l.Begin(ctx, "/")
	if _, err := l.Take(ctx, other.State, in.Browser); !errors.Is(err, ErrOtherBrowser) {
		t.Fatalf("Take with another browser's cookie: %v, want ErrOtherBrowser", err)
	}
	if _, err := l.Take(ctx, other.State, other.Browser); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("a state refused once is spent: %v, want ErrUnknownState", err)
	}

	late, _ := l.Begin(ctx, "/")
	now = now.Add(LoginLifetime)
	if _, err := l.Take(ctx, late.State, late.Browser); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("an expired state: %v, want ErrUnknownState", err)
	}
	if _, err := l.Begin(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(LoginLifetime)
	if n, err := l.Purge(ctx); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want the one login never finished", n, err)
	}
}
