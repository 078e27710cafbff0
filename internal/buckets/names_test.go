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
		got, err := s.NamesContaining(ctx, part, nil, 10)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("NamesContaining(%q) = %v, %v; want %v", part, got, err, want)
		}
	}
	if got, err := s.NamesContaining(ctx, "s", nil, 2); err != nil || len(got) != 2 {
		t.Errorf("limit 2: %v, %v", got, err)
	}
	// As a member sees them: shop-api allows search; every bucket is
	// shop's; mail sees none.
	for apps, want := range map[string][]string{"search": {"shop-api"}, "shop": {"ads_feed", "shop-api", "shop-web"}, "mail": {}} {
		if got, err := s.NamesContaining(ctx, "", []string{apps}, 10); err != nil || !slices.Equal(got, want) {
			t.Errorf("NamesContaining seen from %s = %v, %v; want %v", apps, got, err, want)
		}
	}
	if got, err := s.NamesContaining(ctx, "api", []string{"search"}, 10); err != nil || !slices.Equal(got, []string{"shop-api"}) {
		t.Errorf("api seen from search: %v, %v", got, err)
	}
	if got, err := s.NamesContaining(ctx, "shop", []string{}, 10); err != nil || len(got) != 0 {
		t.Errorf("seen from no app: %v, %v", got, err)
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
