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
