package devdb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/migrations"
)

// The migrations and the stores run unchanged on the embedded engine.
func TestMigrationsAndStores(t *testing.T) {
	ctx := context.Background()
	dsn, stop, err := devdb.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := migrations.Up(dsn); err != nil {
		t.Fatalf("migrations on the embedded engine: %v", err)
	}
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	actor := audit.Actor{User: "alice"}
	appStore := apps.NewStore(db)
	for _, name := range []string{"shop", "search"} {
		if err := appStore.Create(ctx, actor, &apps.App{Name: name}); err != nil {
			t.Fatalf("create app %s: %v", name, err)
		}
	}
	store := buckets.NewStore(db)
	rate, err := buckets.ParseRate("0.5/s")
	if err != nil {
		t.Fatal(err)
	}
	b := &buckets.Bucket{Name: "checkout_v2", OwnerApp: "shop", MaxPermits: 10, Rate: rate, AllowedApps: []string{"shop", "search"}}
	if err := store.Create(ctx, actor, b); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := store.Create(ctx, actor, &buckets.Bucket{Name: "checkoutxv2", OwnerApp: "shop", MaxPermits: 1, Rate: rate}); err != nil {
		t.Fatalf("create second: %v", err)
	}
	if err := store.Create(ctx, actor, &buckets.Bucket{Name: "checkout_v2", OwnerApp: "shop", MaxPermits: 1, Rate: rate}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate create = %v; want ErrConflict", err)
	}
	got, err := store.Get(ctx, "checkout_v2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Rate != rate || got.MaxPermits != 10 || got.Version != 1 || len(got.AllowedApps) != 2 {
		t.Fatalf("get = %+v", got)
	}

	page, err := store.List(ctx, buckets.Filter{Search: "t_v", VisibleTo: []string{"search"}})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if page.Total != 1 || len(page.Buckets) != 1 || page.Buckets[0].Name != "checkout_v2" {
		t.Fatalf("list = %+v; want only checkout_v2 (the '_' is literal)", page)
	}

	// The bucket list's ranked pages (a join with a union, keyset
	// conditions) run on the embedded engine too.
	if _, err := db.ExecContext(ctx, `INSERT INTO bucket_usage (bucket_name, last_minute, allowed_counts, denied_counts,
		allowed_total, denied_total, near_total) VALUES ('checkout_v2', 1, '', '', 5, 3, 4), ('checkoutxv2', 1, '', '', 5, 7, 0)`); err != nil {
		t.Fatalf("usage rows: %v", err)
	}
	ranked, err := store.ListRanked(ctx, buckets.RankedFilter{Filter: buckets.Filter{VisibleTo: []string{"search", "shop"}, Limit: 1}})
	if err != nil || len(ranked.Buckets) != 1 || ranked.Buckets[0].Name != "checkoutxv2" || ranked.Total != 2 || ranked.Next == "" {
		t.Fatalf("ranked = %+v, %v; want checkoutxv2 first of 2", ranked, err)
	}
	ranked, err = store.ListRanked(ctx, buckets.RankedFilter{Filter: buckets.Filter{App: "search", Limit: 1},
		After: buckets.ParseRankCursor(ranked.Next)})
	if err != nil || len(ranked.Buckets) != 1 || ranked.Buckets[0].Name != "checkout_v2" {
		t.Fatalf("ranked, next page of search's = %+v, %v; want checkout_v2", ranked, err)
	}

	got.MaxPermits = 20
	got.AllowedApps = []string{"shop"}
	if err := store.Update(ctx, actor, got); err != nil {
		t.Fatalf("update: %v", err)
	}
	stale := *got
	stale.Version = 1
	if err := store.Update(ctx, actor, &stale); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale update = %v; want ErrConflict", err)
	}
	if err := store.Delete(ctx, actor, "checkout_v2", buckets.Expect{Version: got.Version}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := store.Get(ctx, "checkout_v2"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("get after delete = %v; want ErrNotFound", err)
	}

	events, err := store.PendingEvents(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 || events[3].Op != buckets.OpDelete || events[3].Version != 3 {
		t.Fatalf("events = %+v; want 4 ending with the delete at version 3", events)
	}
	defs, err := store.Definitions(ctx)
	if err != nil || len(defs) != 1 || defs[0].Name != "checkoutxv2" || len(defs[0].AllowedApps) != 1 {
		t.Fatalf("definitions = %+v, %v", defs, err)
	}
	entries, err := audit.NewStore(db).List(ctx, audit.Filter{ObjectType: "bucket", Apps: []string{"shop"}})
	if err != nil || len(entries.Entries) != 4 {
		t.Fatalf("audit = %+v, %v; want 4 bucket entries", entries, err)
	}
}

// Down migrations run on the embedded engine too.
func TestMigrationsDown(t *testing.T) {
	dsn, stop, err := devdb.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := migrations.Up(dsn); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Down(dsn); err != nil {
		t.Fatalf("down: %v", err)
	}
	if err := migrations.Up(dsn); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// Keyed buckets and their overrides work on the embedded engine too.
func TestKeyedOverridesOnEmbeddedEngine(t *testing.T) {
	ctx := context.Background()
	dsn, stop, err := devdb.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := migrations.Up(dsn); err != nil {
		t.Fatal(err)
	}
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	actor := audit.Actor{User: "alice"}
	if err := apps.NewStore(db).Create(ctx, actor, &apps.App{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	store := buckets.NewStore(db)
	rate, _ := buckets.ParseRate("100/min")
	if err := store.Create(ctx, actor, &buckets.Bucket{Name: "api", OwnerApp: "shop", MaxPermits: 10, Rate: rate, Keyed: true}); err != nil {
		t.Fatal(err)
	}
	var created []*buckets.Override
	for _, o := range []*buckets.Override{
		{Bucket: "api", Match: buckets.MatchExact, Key: "tenant:acme", MaxPermits: 100, Rate: rate},
		{Bucket: "api", Match: buckets.MatchPrefix, Key: "tenant:", MaxPermits: 50, Rate: rate},
		{Bucket: "api", Match: buckets.MatchExact, Key: "a_b%", MaxPermits: 5, Rate: rate},
	} {
		if err := store.CreateOverride(ctx, actor, o); err != nil {
			t.Fatalf("create override %q: %v", o.Key, err)
		}
		created = append(created, o)
	}
	for key, want := range map[string]string{"tenant:acme": "tenant:acme", "tenant:x": "tenant:", "bob": ""} {
		got, err := store.EffectiveOverride(ctx, "api", key)
		if err != nil {
			t.Fatalf("effective override of %q: %v", key, err)
		}
		if (got == nil && want != "") || (got != nil && got.Key != want) {
			t.Errorf("effective override of %q = %+v; want %q", key, got, want)
		}
	}
	page, err := store.ListOverrides(ctx, "api", buckets.OverrideFilter{Search: "a_", Limit: 1})
	if err != nil || page.Total != 1 || len(page.Overrides) != 1 || page.Overrides[0].Key != "a_b%" {
		t.Fatalf("search = %+v, %v", page, err)
	}
	page, err = store.ListOverrides(ctx, "api", buckets.OverrideFilter{Limit: 2})
	if err != nil || page.Total != 3 || page.Next == "" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	page, err = store.ListOverrides(ctx, "api", buckets.OverrideFilter{Limit: 2, After: page.Next})
	if err != nil || len(page.Overrides) != 1 || page.Next != "" {
		t.Fatalf("second page = %+v, %v", page, err)
	}
	created[0].MaxPermits = 200
	if err := store.UpdateOverride(ctx, actor, created[0]); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteOverride(ctx, actor, "api", created[1].ID, created[1].Version); err != nil {
		t.Fatal(err)
	}
	// The sync worker's locked reads (a shared row lock) run here too.
	ids := []int64{created[0].ID, created[1].ID, created[2].ID}
	err = store.WithOverrides(ctx, "api", ids, func(b *buckets.Bucket, os []*buckets.Override) error {
		if b == nil || b.Name != "api" || len(os) != 2 || os[0].MaxPermits != 200 || os[1].ID != created[2].ID {
			t.Errorf("with overrides: %+v, %+v", b, os)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("with overrides: %v", err)
	}
	err = store.WithDefinition(ctx, "api", func(b *buckets.Bucket) error {
		if b == nil || !b.Keyed || b.MaxPermits != 10 {
			t.Errorf("with definition: %+v", b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("with definition: %v", err)
	}
	events, err := store.PendingEvents(ctx, 0)
	if err != nil || len(events) != 6 || events[5].Op != buckets.OpOverrideDelete || events[5].Override == nil || events[5].Override.Key != "tenant:" {
		t.Fatalf("events = %+v, %v", events, err)
	}
	if err := store.Delete(ctx, actor, "api", buckets.Expect{}); err != nil {
		t.Fatalf("delete keyed bucket: %v", err)
	}
}
