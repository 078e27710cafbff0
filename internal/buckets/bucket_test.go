package buckets

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
)

func validBucket() Bucket {
	return Bucket{
		Name: "checkout", OwnerApp: "shop", Description: "guards checkout",
		MaxPermits: 100, Rate: Rate{PermitsMicro: 500_000, Period: time.Second},
		AllowedApps: []string{"shop"},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*Bucket)
		fields []string // invalid fields expected, in order
	}{
		{"valid", func(*Bucket) {}, nil},
		{"name missing", func(b *Bucket) { b.Name = "" }, []string{"name"}},
		{"name upper case", func(b *Bucket) { b.Name = "Checkout" }, []string{"name"}},
		{"name leading dash", func(b *Bucket) { b.Name = "-checkout" }, []string{"name"}},
		{"name leading dot", func(b *Bucket) { b.Name = ".x" }, []string{"name"}},
		{"name with space", func(b *Bucket) { b.Name = "check out" }, []string{"name"}},
		{"name with brace", func(b *Bucket) { b.Name = "a{b}" }, []string{"name"}},
		{"name with comma", func(b *Bucket) { b.Name = "a,b" }, []string{"name"}},
		{"name with star", func(b *Bucket) { b.Name = "a*" }, []string{"name"}},
		{"name with quote", func(b *Bucket) { b.Name = `a"` }, []string{"name"}},
		{"name non-ascii", func(b *Bucket) { b.Name = "caf\u00e9" }, []string{"name"}},
		{"name 64 chars", func(b *Bucket) { b.Name = strings.Repeat("a", 64) }, []string{"name"}},
		{"name 63 chars", func(b *Bucket) { b.Name = strings.Repeat("a", 63) }, nil},
		{"name one digit", func(b *Bucket) { b.Name = "7" }, nil},
		{"name punctuation", func(b *Bucket) { b.Name = "a.b_c-d" }, nil},
		{"owner missing", func(b *Bucket) { b.OwnerApp = ""; b.AllowedApps = []string{"shop"} }, []string{"owner_app"}},
		{"owner invalid", func(b *Bucket) { b.OwnerApp = "Shop" }, []string{"owner_app"}},
		{"description 500 runes", func(b *Bucket) { b.Description = strings.Repeat("\u00e9", 500) }, nil},
		{"description 501 runes", func(b *Bucket) { b.Description = strings.Repeat("x", 501) }, []string{"description"}},
		{"description bad utf8", func(b *Bucket) { b.Description = "a\xffb" }, []string{"description"}},
		{"description control", func(b *Bucket) { b.Description = "a\x00b" }, []string{"description"}},
		{"description newline", func(b *Bucket) { b.Description = "line\nline\ttab" }, nil},
		{"capacity 0", func(b *Bucket) { b.MaxPermits = 0 }, []string{"max_permits"}},
		{"capacity negative", func(b *Bucket) { b.MaxPermits = -5 }, []string{"max_permits"}},
		{"capacity 1", func(b *Bucket) { b.MaxPermits = 1 }, nil},
		{"capacity 1e9", func(b *Bucket) { b.MaxPermits = 1_000_000_000 }, nil},
		{"capacity over 1e9", func(b *Bucket) { b.MaxPermits = 1_000_000_001 }, []string{"max_permits"}},
		{"lease off", func(b *Bucket) { b.LeaseMillis = 0 }, nil},
		{"lease 10 ms", func(b *Bucket) { b.LeaseMillis = 10 }, nil},
		{"lease 10 s", func(b *Bucket) { b.LeaseMillis = 10_000 }, nil},
		{"lease 9 ms", func(b *Bucket) { b.LeaseMillis = 9 }, []string{"lease_ms"}},
		{"lease over 10 s", func(b *Bucket) { b.LeaseMillis = 10_001 }, []string{"lease_ms"}},
		{"lease negative", func(b *Bucket) { b.LeaseMillis = -1 }, []string{"lease_ms"}},
		{"rate missing", func(b *Bucket) { b.Rate = Rate{} }, []string{"rate"}},
		{"rate zero permits", func(b *Bucket) { b.Rate.PermitsMicro = 0 }, []string{"rate"}},
		{"rate sub-second period", func(b *Bucket) { b.Rate.Period = time.Millisecond }, []string{"rate"}},
		{"allowed app invalid", func(b *Bucket) { b.AllowedApps = []string{"shop", "Bad App"} }, []string{"allowed_apps"}},
		{"allowed apps too many", func(b *Bucket) {
			b.AllowedApps = nil
			for i := range MaxAllowedApps + 1 {
				b.AllowedApps = append(b.AllowedApps, fmt.Sprintf("app%03d", i))
			}
		}, []string{"allowed_apps"}},
		{"everything wrong", func(b *Bucket) {
			*b = Bucket{Name: "A", OwnerApp: "", Description: "\x01", MaxPermits: 0, AllowedApps: []string{"?"}}
		}, []string{"name", "owner_app", "description", "max_permits", "rate", "allowed_apps"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := validBucket()
			tt.edit(&b)
			err := b.Validate()
			if err != nil && !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("Validate = %v; want a *errs.Validation", err)
			}
			got := validationFields(err)
			if !slices.Equal(got, tt.fields) {
				t.Fatalf("invalid fields = %v (%v); want %v", got, err, tt.fields)
			}
		})
	}
}

func TestValidateNormalizesAllowedApps(t *testing.T) {
	b := validBucket()
	b.AllowedApps = nil
	if err := b.Validate(); err != nil || !slices.Equal(b.AllowedApps, []string{"shop"}) {
		t.Fatalf("empty allowed apps -> %v, %v; want [shop]", b.AllowedApps, err)
	}
	b.AllowedApps = []string{"search", "ads", "search", " shop ", ""}
	if err := b.Validate(); err != nil || !slices.Equal(b.AllowedApps, []string{"ads", "search", "shop"}) {
		t.Fatalf("allowed apps -> %v, %v; want sorted and deduped", b.AllowedApps, err)
	}
}
