package buckets_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/testenv"
)

// BenchmarkDefinitions reads 10,000 buckets with two allowed apps each, the
// sync worker's full reconcile.
func BenchmarkDefinitions(b *testing.B) {
	const n = 10_000
	db := testenv.MySQL(b)
	for _, name := range []string{"shop", "search"} {
		if err := apps.NewStore(db).Create(ctx, alice, &apps.App{Name: name}); err != nil {
			b.Fatal(err)
		}
	}
	// Bulk rows: going through Create would make the setup slower than the benchmark.
	const batch = 1000
	for start := 0; start < n; start += batch {
		var rows []string
		for i := start; i < start+batch; i++ {
			rows = append(rows, fmt.Sprintf("(%d, 'bucket-%05d', 1, 100, 0.5, 1, 1, 'x', NOW(6), 'x', NOW(6))", i+1, i))
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO buckets (id, name, owner_app_id, max_permits, rate_permits,
			rate_period_seconds, version, created_by, created_at, updated_by, updated_at) VALUES `+strings.Join(rows, ",")); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO bucket_apps (bucket_id, app_id) SELECT id, 1 FROM buckets UNION ALL SELECT id, 2 FROM buckets`); err != nil {
		b.Fatal(err)
	}
	s := buckets.NewStore(db)
	b.ResetTimer()
	for b.Loop() {
		defs, err := s.Definitions(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(defs) != n || len(defs[n-1].AllowedApps) != 2 {
			b.Fatalf("%d definitions", len(defs))
		}
	}
}

// BenchmarkListPage reads one page of 50 buckets from 2,000, filtered by visibility.
func BenchmarkListPage(b *testing.B) {
	db := testenv.MySQL(b)
	for _, name := range []string{"shop", "search"} {
		if err := apps.NewStore(db).Create(ctx, alice, &apps.App{Name: name}); err != nil {
			b.Fatal(err)
		}
	}
	var rows []string
	for i := range 2000 {
		rows = append(rows, fmt.Sprintf("(%d, 'bucket-%05d', 1, 100, 0.5, 1, 1, 'x', NOW(6), 'x', NOW(6))", i+1, i))
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO buckets (id, name, owner_app_id, max_permits, rate_permits,
		rate_period_seconds, version, created_by, created_at, updated_by, updated_at) VALUES `+strings.Join(rows, ",")); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO bucket_apps (bucket_id, app_id) SELECT id, 2 FROM buckets WHERE id % 2 = 0`); err != nil {
		b.Fatal(err)
	}
	s := buckets.NewStore(db)
	for b.Loop() {
		page, err := s.List(ctx, buckets.Filter{VisibleTo: []string{"search"}, After: "bucket-01000", Search: "bucket"})
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Buckets) != 50 || page.Total != 1000 {
			b.Fatalf("page of %d, total %d", len(page.Buckets), page.Total)
		}
	}
}

// BenchmarkListRanked reads pages of 25 of the "most denied" list with
// 10,000 buckets over 50 apps, every one used in the last hour (the
// roll-up's worst case) and half of them with denials: the first page, a
// page 2,500 deep by cursor, as a member of one app, with an app filter,
// and ranked by near-limit calls.
func BenchmarkListRanked(b *testing.B) {
	const n, nApps = 10_000, 50
	db := testenv.MySQL(b)
	for a := range nApps {
		if err := apps.NewStore(db).Create(ctx, alice, &apps.App{Name: fmt.Sprintf("app-%02d", a)}); err != nil {
			b.Fatal(err)
		}
	}
	const batch = 1000
	for start := 0; start < n; start += batch {
		var rows, usage []string
		for i := start; i < start+batch; i++ {
			rows = append(rows, fmt.Sprintf("(%d, 'bucket-%05d', %d, 100, 0.5, 1, 1, 'x', NOW(6), 'x', NOW(6))", i+1, i, i%nApps+1))
			usage = append(usage, fmt.Sprintf("('bucket-%05d', 1, '', '', %d, %d, %d)", i, 100+i%97, (i%2)*(i%389), i%3*(i%211)))
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO buckets (id, name, owner_app_id, max_permits, rate_permits,
			rate_period_seconds, version, created_by, created_at, updated_by, updated_at) VALUES `+strings.Join(rows, ",")); err != nil {
			b.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO bucket_usage (bucket_name, last_minute, allowed_counts, denied_counts,
			allowed_total, denied_total, near_total) VALUES `+strings.Join(usage, ",")); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO bucket_apps (bucket_id, app_id) SELECT id, (id % 50) + 1 FROM buckets`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ANALYZE TABLE buckets, bucket_apps, bucket_usage`); err != nil {
		b.Fatal(err)
	}
	s := buckets.NewStore(db)
	deep := buckets.RankedFilter{Filter: buckets.Filter{Limit: 100}}
	for range 25 { // 2,500 rows in
		p, err := s.ListRanked(ctx, deep)
		if err != nil || p.Next == "" {
			b.Fatalf("walk: %v", err)
		}
		deep.After = buckets.ParseRankCursor(p.Next)
	}
	deep.Limit = 25
	for _, tc := range []struct {
		name string
		f    buckets.RankedFilter
	}{
		{"first", buckets.RankedFilter{Filter: buckets.Filter{Limit: 25}}},
		{"deep", deep},
		{"member", buckets.RankedFilter{Filter: buckets.Filter{Limit: 25, VisibleTo: []string{"app-07"}}}},
		{"app", buckets.RankedFilter{Filter: buckets.Filter{Limit: 25, App: "app-07"}}},
		{"near", buckets.RankedFilter{Filter: buckets.Filter{Limit: 25}, Rank: buckets.RankNearLimit}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := s.ListRanked(ctx, tc.f)
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Buckets) != 25 || p.Total == 0 {
					b.Fatalf("page of %d, total %d", len(p.Buckets), p.Total)
				}
			}
		})
	}
}
