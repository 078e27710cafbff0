package buckets

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
)

func TestKindValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Bucket)
		fields []string
	}{
		{"empty is bucket", func(b *Bucket) { b.Kind = "" }, nil},
		{"bucket", func(b *Bucket) { b.Kind = KindBucket }, nil},
		{"unknown", func(b *Bucket) { b.Kind = "window" }, []string{"kind"}},
		{"bucket without rate", func(b *Bucket) { b.Rate = Rate{} }, []string{"rate"}},
		{"concurrency", func(b *Bucket) { b.Kind, b.Rate = KindConcurrency, Rate{} }, nil},
		{"quota", func(b *Bucket) { b.Kind, b.Rate = KindQuota, Rate{} }, nil},
		{"concurrency with rate", func(b *Bucket) { b.Kind = KindConcurrency }, []string{"rate"}},
		{"quota with lease", func(b *Bucket) { b.Kind, b.Rate, b.LeaseMillis = KindQuota, Rate{}, 100 }, []string{"lease_ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := validBucket()
			tc.edit(&b)
			err := b.Validate()
			var got []string
			if err != nil {
				if !errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("Validate = %v, not a validation error", err)
				}
				for _, f := range errs.Fields(err).Fields {
					got = append(got, f.Field)
				}
			}
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("invalid fields = %v; want %v (%v)", got, tc.fields, err)
			}
			if err == nil && !b.Kind.Valid() {
				t.Fatalf("Validate left kind %q", b.Kind)
			}
		})
	}
}

func TestKindFixed(t *testing.T) {
	old := validBucket()
	n := old
	n.Kind, n.Rate = KindQuota, Rate{}
	if err := n.CheckFixed(&old); errs.Fields(err).For("kind") == "" {
		t.Fatalf("CheckFixed = %v; want kind refused", err)
	}
	n.Kind = ""
	old.Kind = KindBucket
	if err := n.CheckFixed(&old); err != nil {
		t.Fatalf("empty and bucket are one kind: %v", err)
	}
}

func TestOverrideRateFollowsKind(t *testing.T) {
	o := Override{Bucket: "b", Match: MatchExact, Key: "k", MaxPermits: 5}
	if errs.Fields(o.Validate()).For("rate") == "" {
		t.Fatal("a token bucket's override without a rate was accepted")
	}
	o.Kind = KindConcurrency
	if err := o.Validate(); err != nil {
		t.Fatalf("a concurrency override without a rate: %v", err)
	}
	o.Rate = Rate{PermitsMicro: 1_000_000, Period: time.Second}
	if errs.Fields(o.Validate()).For("rate") == "" {
		t.Fatal("a concurrency override with a rate was accepted")
	}
}

func TestParseKind(t *testing.T) {
	if k, err := ParseKind(""); err != nil || k != KindBucket {
		t.Fatalf(`ParseKind("") = %q, %v`, k, err)
	}
	if _, err := ParseKind("Quota"); errs.Fields(err).For("kind") == "" {
		t.Fatalf("ParseKind accepted a wrong case: %v", err)
	}
}

func TestParseOptionalRate(t *testing.T) {
	if r, err := ParseOptionalRate("  "); err != nil || !r.IsZero() {
		t.Fatalf("ParseOptionalRate(blank) = %v, %v", r, err)
	}
	if _, err := ParseOptionalRate("nope"); err == nil {
		t.Fatal("ParseOptionalRate accepted garbage")
	}
}
