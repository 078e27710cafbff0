package secrets_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/secrets"
)

func TestNewIsRandomAndURLSafe(t *testing.T) {
	a, err := secrets.New()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := secrets.New()
	// 32 bytes in base64url without padding: 43 characters.
	if len(a) != 43 || a == b || strings.ContainsAny(a, "+/=") {
		t.Fatalf("secrets %q and %q", a, b)
	}
	if d := secrets.Digest("x"); d != "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881" {
		t.Fatalf("digest %s", d)
	}
}

func TestNewToken(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)
	later := now.Add(time.Hour)
	tok, err := secrets.NewToken("slx_", "  ci  ", &later, now)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name != "ci" || !strings.HasPrefix(tok.Plaintext, "slx_") || len(tok.Display) != len("slx_")+8 ||
		!strings.HasPrefix(tok.Plaintext, tok.Display) || tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(later.Truncate(time.Microsecond)) {
		t.Fatalf("token %+v", tok)
	}
	_, err = secrets.NewToken("slx_", strings.Repeat("x", secrets.MaxTokenName+1), &now, now)
	if v := errs.Fields(err); v.For("name") == "" || v.For("expires_at") == "" {
		t.Fatalf("bad name and past expiry: %v", err)
	}
	if _, err := secrets.NewToken("slx_", strings.Repeat("x", secrets.MaxTokenName), nil, now); err != nil {
		t.Fatalf("a name of MaxTokenName characters: %v", err)
	}
}

func TestActive(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	before, after := now.Add(-time.Second), now.Add(time.Second)
	for _, c := range []struct {
		revoked, expires *time.Time
		want             bool
	}{
		{nil, nil, true},
		{nil, &after, true},
		{nil, &now, false},
		{nil, &before, false},
		{&before, nil, false},
		{&before, &after, false},
	} {
		if got := secrets.Active(c.revoked, c.expires, now); got != c.want {
			t.Errorf("Active(%v, %v) = %v, want %v", c.revoked, c.expires, got, c.want)
		}
	}
}
