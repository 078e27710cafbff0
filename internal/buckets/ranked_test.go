package buckets_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/buckets"
)

// usageRow writes a row of the roll-up as package usage does (only the
// columns a ranked list reads matter here).
func usageRow(t *testing.T, db *sqlx.DB, name string, denied, near int64) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO bucket_usage (bucket_name, last_minute, allowed_counts, denied_counts,
		allowed_total, denied_total, near_total) VALUES (?, 1, '', '', 1, ?, ?)`, name, denied, near)
	if err != nil {
		t.Fatal(err)
	}
}

func mustRank(t *testing.T, s *buckets.Store, f buckets.RankedFilter) buckets.RankedPage {
	t.Helper()
	p, err := s.ListRanked(ctx, f)
	if err != nil {
		t.Fatalf("ListRanked(%+v): %v", f, err)
	}
	return p
}

// Walking a ranked list forward with Next and back with Prev visits every
// bucket once, in rank order (count, then name, both descending), with
// offsets and totals that add up, whatever the ties.
func TestListRankedPaging(t *testing.T) {
	db, s := setup(t)
	var want []string // in rank order
	type ranked struct {
		name   string
		denied int64
	}
	var all []ranked
	for i := range 23 {
		name := fmt.Sprintf("b-%02d", i)
		create(t, s, newBucket(t, name))
		denied := int64(i % 5) // ties, and zeros that are not listed
		usageRow(t, db, name, denied, 0)
		if denied > 0 {
			all = append(all, ranked{name, denied})
		}
	}
	create(t, s, newBucket(t, "quiet")) // no usage row
	usageRow(t, db, "deleted", 100, 0)  // a row whose bucket is gone
	slices.SortFunc(all, func(a, b ranked) int {
		if a.denied != b.denied {
			return int(b.denied - a.denied)
		}
		if a.name > b.name {
			return -1
		}
		return 1
	})
	for _, r := range all {
		want = append(want, r.name)
	}

	var got []string
	var pages []buckets.RankedPage
	f := buckets.RankedFilter{Filter: buckets.Filter{Limit: 5}}
	for {
		p := mustRank(t, s, f)
		if p.Total != len(want) || p.Offset != len(got) {
			t.Fatalf("page %d: total %d offset %d, want %d and %d", len(pages)+1, p.Total, p.Offset, len(want), len(got))
		}
		if len(p.Counts) != len(p.Buckets) {
			t.Fatalf("%d counts for %d buckets", len(p.Counts), len(p.Buckets))
		}
		if (len(pages) == 0) != (p.Prev == "") {
			t.Errorf("page %d: prev %q", len(pages)+1, p.Prev)
		}
		got = append(got, names(p.Buckets)...)
		pages = append(pages, p)
		if p.Next == "" {
			break
		}
		if len(pages) > 10 {
			t.Fatal("paging does not end")
		}
		f.After = buckets.ParseRankCursor(p.Next)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("forward: %v\nwant     %v", got, want)
	}
	if len(pages) != 4 {
		t.Errorf("%d pages of 5 for %d buckets, want 4", len(pages), len(want))
	}
	// Back from the last page: each Prev gives the page before, exactly.
	for i := len(pages) - 1; i > 0; i-- {
		p := mustRank(t, s, buckets.RankedFilter{Filter: buckets.Filter{Limit: 5}, Before: buckets.ParseRankCursor(pages[i].Prev)})
		if !slices.Equal(names(p.Buckets), names(pages[i-1].Buckets)) || p.Offset != pages[i-1].Offset {
			t.Errorf("back from page %d: %v at %d, want %v at %d", i+1, names(p.Buckets), p.Offset,
				names(pages[i-1].Buckets), pages[i-1].Offset)
		}
		if (i-1 == 0) != (p.Prev == "") || p.Next != pages[i-1].Next {
			t.Errorf("back to page %d: prev %q next %q, want next %q", i, p.Prev, p.Next, pages[i-1].Next)
		}
	}
	// A damaged cursor reads as the first page.
	for _, bad := range []string{"", "x", "1", "-1:b-01:0", "1:b-01", "1:b-01:-1", "1:b-01:x", "1:b:01:2", "1:Bad Name", "99999999999999999999:b"} {
		if c := buckets.ParseRankCursor(bad); c != (buckets.RankCursor{}) {
			t.Errorf("ParseRankCursor(%q) = %+v, want zero", bad, c)
		}
	}
}

// Filters of a ranked list: visibility, app, search, near the limit, and
// the near-limit rank.
func TestListRankedFilters(t *testing.T) {
	db, s := setup(t)
	create(t, s, newBucket(t, "own"))
	create(t, s, newBucket(t, "shared", "search"))
	ads := newBucket(t, "ads-only")
	ads.OwnerApp = "ads"
	create(t, s, ads)
	create(t, s, newBucket(t, "near-only"))
	usageRow(t, db, "own", 5, 0)
	usageRow(t, db, "shared", 3, 7)
	usageRow(t, db, "ads-only", 9, 9)
	usageRow(t, db, "near-only", 0, 2)

	for _, tt := range []struct {
		f    buckets.RankedFilter
		want []string
	}{
		{buckets.RankedFilter{}, []string{"ads-only", "own", "shared"}},
		{buckets.RankedFilter{Filter: buckets.Filter{VisibleTo: []string{"search"}}}, []string{"shared"}},
		{buckets.RankedFilter{Filter: buckets.Filter{VisibleTo: []string{"shop"}}}, []string{"own", "shared"}},
		{buckets.RankedFilter{Filter: buckets.Filter{VisibleTo: []string{}}}, []string{}},
		{buckets.RankedFilter{Filter: buckets.Filter{App: "ads"}}, []string{"ads-only"}},
		{buckets.RankedFilter{Filter: buckets.Filter{Search: "sha"}}, []string{"shared"}},
		{buckets.RankedFilter{Filter: buckets.Filter{Search: "\xff"}}, []string{}},
		{buckets.RankedFilter{NearLimit: true}, []string{"ads-only", "shared"}},
		{buckets.RankedFilter{Rank: buckets.RankNearLimit}, []string{"ads-only", "shared", "near-only"}},
		{buckets.RankedFilter{Rank: buckets.RankNearLimit, Denied: true}, []string{"ads-only", "shared"}},
		{buckets.RankedFilter{Rank: buckets.RankNearLimit, Filter: buckets.Filter{VisibleTo: []string{"shop"}}},
			[]string{"shared", "near-only"}},
	} {
		p := mustRank(t, s, tt.f)
		if got := names(p.Buckets); !slices.Equal(got, tt.want) || p.Total != len(tt.want) {
			t.Errorf("ListRanked(%+v) = %v (total %d), want %v", tt.f, got, p.Total, tt.want)
		}
	}
	p := mustRank(t, s, buckets.RankedFilter{})
	if fmt.Sprint(p.Counts) != "[9 5 3]" || len(p.Buckets[2].AllowedApps) != 1 {
		t.Errorf("counts %v, apps of shared %v", p.Counts, p.Buckets[2].AllowedApps)
	}
}
