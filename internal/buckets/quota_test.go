package buckets

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

func validQuota() Bucket {
	b := validBucket()
	b.Kind, b.Rate, b.QuotaPeriod, b.TimeZone = KindQuota, Rate{}, quota.Month, "Europe/Berlin"
	return b
}

func TestQuotaCalendarValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Bucket)
		fields []string
	}{
		{"month in Berlin", func(*Bucket) {}, nil},
		{"each period", func(b *Bucket) { b.QuotaPeriod = quota.Week }, nil},
		{"no period", func(b *Bucket) { b.QuotaPeriod = "" }, []string{"quota_period"}},
		{"unknown period", func(b *Bucket) { b.QuotaPeriod = "year" }, []string{"quota_period"}},
		{"unknown zone", func(b *Bucket) { b.TimeZone = "Mars/Olympus" }, []string{"time_zone"}},
		{"Local is no zone", func(b *Bucket) { b.TimeZone = "Local" }, []string{"time_zone"}},
		{"a path is no zone", func(b *Bucket) { b.TimeZone = "../../etc/passwd" }, []string{"time_zone"}},
		{"bucket with a period", func(b *Bucket) { *b = validBucket(); b.QuotaPeriod = quota.Day }, []string{"quota_period"}},
		{"concurrency with a zone", func(b *Bucket) { *b = validBucket(); b.Kind, b.Rate, b.TimeZone = KindConcurrency, Rate{}, "UTC" }, []string{"time_zone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := validQuota()
			tc.edit(&b)
			var got []string
			if err := b.Validate(); err != nil {
				for _, f := range errs.Fields(err).Fields {
					got = append(got, f.Field)
				}
			}
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("invalid fields = %v; want %v", got, tc.fields)
			}
		})
	}
}

func TestQuotaZoneDefaultsToUTC(t *testing.T) {
	b := validQuota()
	b.TimeZone = " "
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if b.TimeZone != "UTC" || b.Location() == nil || b.Location().String() != "UTC" {
		t.Fatalf("zone %q, location %v; want UTC", b.TimeZone, b.Location())
	}
	o := validBucket()
	if o.Location() != nil {
		t.Fatal("a token bucket has a location")
	}
}

func TestQuotaCalendarMayChange(t *testing.T) {
	old := validQuota()
	n := old
	n.QuotaPeriod, n.TimeZone = quota.Day, "UTC"
	if err := n.CheckFixed(&old); err != nil {
		t.Fatalf("CheckFixed refused a new period and zone: %v", err)
	}
	if n.SameSettings(&old) {
		t.Fatal("SameSettings ignores the period and zone")
	}
}
