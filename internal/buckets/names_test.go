package buckets_test

import (
	"slices"
	"testing"
)

// TestNamesCountByNames: names containing a part (its wildcards literal),
// the count, and buckets read by name with their allowed apps.
func TestNamesCountByNames(t *testing.T) {
	_, s := setup(t)
	create(t, s, newBucket(t, "shop-api", "search"))
	create(t, s, newBucket(t, "shop-web"))
	create(t, s, newBucket(t, "ads_feed"))
	for part, want := range map[string][]string{
		"shop": {"shop-api", "shop-web"},
		"P-W":  {"shop-web"},
		"s_f":  {"ads_feed"},
		"_":    {"ads_feed"},
		"%":    {},
	} {
		got, err := s.NamesContaining(ctx, part, 10)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("NamesContaining(%q) = %v, %v; want %v", part, got, err, want)
		}
	}
	if got, err := s.NamesContaining(ctx, "s", 2); err != nil || len(got) != 2 {
		t.Errorf("limit 2: %v, %v", got, err)
	}
	if n, err := s.Count(ctx); err != nil || n != 3 {
		t.Errorf("Count = %d, %v", n, err)
	}
	bs, err := s.ByNames(ctx, []string{"shop-api", "gone", "ads_feed"})
	if err != nil || len(bs) != 2 {
		t.Fatalf("ByNames: %d buckets, %v", len(bs), err)
	}
	for _, b := range bs {
		if b.Name == "shop-api" && !slices.Equal(b.AllowedApps, []string{"search"}) {
			t.Errorf("shop-api allowed apps %v", b.AllowedApps)
		}
	}
	if bs, err := s.ByNames(ctx, nil); err != nil || len(bs) != 0 {
		t.Errorf("ByNames(nil) = %v, %v", bs, err)
	}
}
