package buckets_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	ctx   = context.Background()
	alice = audit.Actor{User: "alice", Via: "console", Addr: "192.0.2.1"}
	bob   = audit.Actor{User: "bob", Via: "api"}
)

// setup returns a store on a fresh database with the apps shop, search and ads.
func setup(t *testing.T) (*sqlx.DB, *buckets.Store) {
	t.Helper()
	db := testenv.MySQL(t)
	for _, name := range []string{"shop", "search", "ads"} {
		if err := apps.NewStore(db).Create(ctx, alice, &apps.App{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	return db, buckets.NewStore(db)
}

func rate(t *testing.T, s string) buckets.Rate {
	t.Helper()
	r, err := buckets.ParseRate(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newBucket(t *testing.T, name string, allowed ...string) *buckets.Bucket {
	return &buckets.Bucket{Name: name, OwnerApp: "shop", Description: "d", MaxPermits: 10, Rate: rate(t, "0.5/s"), AllowedApps: allowed}
}

func create(t *testing.T, s *buckets.Store, b *buckets.Bucket) *buckets.Bucket {
	t.Helper()
	if err := s.Create(ctx, alice, b); err != nil {
		t.Fatalf("create %s: %v", b.Name, err)
	}
	return b
}

// dump renders every row a bucket mutation may touch, to prove that a
// refused mutation changed nothing.
func dump(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT CONCAT_WS('|', id, name, owner_app_id, description, max_permits, rate_permits, rate_period_seconds, version, created_by, updated_by, created_at, updated_at) FROM buckets ORDER BY id`,
		`SELECT CONCAT_WS('|', bucket_id, app_id) FROM bucket_apps ORDER BY bucket_id, app_id`,
		`SELECT CONCAT_WS('|', id, bucket_id, op, version, keyed) FROM bucket_events ORDER BY id`,
		`SELECT CONCAT_WS('|', id, action, object_name) FROM audit_log ORDER BY id`,
	} {
		var rows []string
		if err := db.SelectContext(ctx, &rows, q); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, strings.Join(rows, "\n"))
	}
	return b.String()
}

func count(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.GetContext(ctx, &n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// mutation runs fn and checks that it wrote exactly one change event and
// one audit row with the given action, returning them.
func mutation(t *testing.T, db *sqlx.DB, action string, fn func() error) (buckets.Event, audit.Entry) {
	t.Helper()
	var lastEvent, lastAudit int64
	if err := db.GetContext(ctx, &lastEvent, `SELECT COALESCE(MAX(id), 0) FROM bucket_events`); err != nil {
		t.Fatal(err)
	}
	if err := db.GetContext(ctx, &lastAudit, `SELECT COALESCE(MAX(id), 0) FROM audit_log`); err != nil {
		t.Fatal(err)
	}
	if err := fn(); err != nil {
		t.Fatalf("%s: %v", action, err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM bucket_events WHERE id > ?`, lastEvent); n != 1 {
		t.Fatalf("%s wrote %d change events; want 1", action, n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE id > ?`, lastAudit); n != 1 {
		t.Fatalf("%s wrote %d audit rows; want 1", action, n)
	}
	events, err := buckets.NewStore(db).PendingEvents(ctx, buckets.MaxEventLimit)
	if err != nil {
		t.Fatal(err)
	}
	page, err := audit.NewStore(db).List(ctx, audit.Filter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := page.Entries[0]
	if e.Action != action || e.ObjectType != "bucket" {
		t.Fatalf("audit row %+v; want action %s on a bucket", e, action)
	}
	return events[len(events)-1], e
}

func TestCreateGet(t *testing.T) {
	db, s := setup(t)
	b := newBucket(t, "checkout", "search", "shop", "search")
	b.Rate = rate(t, "7 per 90s")
	before := time.Now().Add(-time.Second)
	ev, entry := mutation(t, db, "bucket.create", func() error { return s.Create(ctx, alice, b) })

	if b.ID == 0 || b.Version != 1 || b.CreatedBy != "alice" || b.UpdatedBy != "alice" ||
		b.CreatedAt.Before(before) || !b.UpdatedAt.Equal(b.CreatedAt) {
		t.Fatalf("created bucket %+v: want ID, version 1, authors and timestamps set", b)
	}
	if !slices.Equal(b.AllowedApps, []string{"search", "shop"}) {
		t.Fatalf("allowed apps %v; want sorted, deduped", b.AllowedApps)
	}
	got, err := s.Get(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", *b) {
		t.Fatalf("Get = %+v\nwant %+v", *got, *b)
	}
	if got.Rate.String() != "7/90s" {
		t.Fatalf("stored rate %v; want 7/90s exactly", got.Rate)
	}
	// The event names the bucket and its version; it copies nothing else.
	want := buckets.Event{ID: ev.ID, BucketID: b.ID, Name: "checkout", Op: buckets.OpUpsert, Version: 1,
		CreatedAt: ev.CreatedAt}
	if fmt.Sprint(ev) != fmt.Sprint(want) {
		t.Fatalf("event %+v\nwant %+v", ev, want)
	}
	if entry.ObjectName != "checkout" || entry.App != "shop" || entry.Actor != "alice" || entry.RemoteAddr != "192.0.2.1" ||
		entry.Before != "" || !strings.Contains(entry.After, `"rate":"7/90s"`) {
		t.Fatalf("audit entry %+v", entry)
	}

	// Allowed apps default to the owner.
	d := create(t, s, newBucket(t, "default-apps"))
	if !slices.Equal(d.AllowedApps, []string{"shop"}) {
		t.Fatalf("default allowed apps %v; want [shop]", d.AllowedApps)
	}
	for _, name := range []string{"nope", "", "Bad Name", strings.Repeat("x", 300), "a'; DROP TABLE buckets; --"} {
		if _, err := s.Get(ctx, name); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("Get(%q) = %v; want ErrNotFound", name, err)
		}
	}
}

func TestExactRatesAndLimits(t *testing.T) {
	_, s := setup(t)
	for i, r := range []string{"0.000001/s", "1000000000/s", "1.999999/365day", "3/7199s"} {
		b := newBucket(t, fmt.Sprintf("r%d", i))
		b.Rate = rate(t, r)
		b.MaxPermits = buckets.MaxCapacity
		create(t, s, b)
		got, err := s.Get(ctx, b.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Rate != b.Rate || got.MaxPermits != buckets.MaxCapacity {
			t.Errorf("stored %v cap %d; want %v cap %d", got.Rate, got.MaxPermits, b.Rate, buckets.MaxCapacity)
		}
	}
}

func TestCreateRefused(t *testing.T) {
	db, s := setup(t)
	create(t, s, newBucket(t, "checkout"))
	before := dump(t, db)

	err := s.Create(ctx, alice, newBucket(t, "checkout"))
	if !errors.Is(err, errs.ErrConflict) || err.Error() != `a bucket named "checkout" already exists; bucket names are unique across Sluice, choose another` {
		t.Fatalf("duplicate name: %v; want ErrConflict with a clear message", err)
	}

	b := newBucket(t, "other", "shop", "ghost", "phantom")
	err = s.Create(ctx, alice, b)
	if r := errs.Fields(err).For("allowed_apps"); r != `unknown apps "ghost", "phantom"` {
		t.Fatalf("unknown allowed apps: %v", err)
	}
	b = newBucket(t, "other", "shop")
	b.OwnerApp = "ghost"
	err = s.Create(ctx, alice, b)
	if r := errs.Fields(err).For("owner_app"); r != `unknown app "ghost"` {
		t.Fatalf("unknown owner app: %v", err)
	}
	if errs.Fields(err).For("allowed_apps") != "" {
		t.Fatalf("known allowed apps reported: %v", err)
	}
	b.AllowedApps = nil // defaults to the unknown owner: reported once
	err = s.Create(ctx, alice, b)
	if v := errs.Fields(err); v == nil || len(v.Fields) != 1 || v.For("owner_app") != `unknown app "ghost"` {
		t.Fatalf("unknown owner app by default: %v", err)
	}
	b = newBucket(t, "Bad Name")
	b.MaxPermits = 0
	err = s.Create(ctx, alice, b)
	if v := errs.Fields(err); v.For("name") == "" || v.For("max_permits") == "" {
		t.Fatalf("invalid bucket: %v", err)
	}
	if after := dump(t, db); after != before {
		t.Fatalf("refused creates changed the database:\n%s\nwas\n%s", after, before)
	}
}

func TestUpdate(t *testing.T) {
	db, s := setup(t)
	b := create(t, s, newBucket(t, "checkout", "shop"))
	created := *b

	time.Sleep(2 * time.Millisecond) // UpdatedAt must move on
	b.Description = "new description"
	b.MaxPermits = 500
	b.Rate = rate(t, "100/min")
	b.AllowedApps = []string{"search", "ads"}
	b.LeaseMillis = 100
	ev, entry := mutation(t, db, "bucket.update", func() error { return s.Update(ctx, bob, b) })
	if b.Version != 2 || b.UpdatedBy != "bob" || b.CreatedBy != "alice" || !b.UpdatedAt.After(created.UpdatedAt) ||
		!b.CreatedAt.Equal(created.CreatedAt) || b.ID != created.ID {
		t.Fatalf("updated bucket %+v", b)
	}
	got, err := s.Get(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", *b) {
		t.Fatalf("Get = %+v\nwant %+v", *got, *b)
	}
	if ev.Op != buckets.OpUpsert || ev.Version != 2 || ev.BucketID != b.ID || got.MaxPermits != 500 ||
		!slices.Equal(got.AllowedApps, []string{"ads", "search"}) || got.LeaseMillis != 100 {
		t.Fatalf("update event %+v", ev)
	}
	if entry.Actor != "bob (api)" || !strings.Contains(entry.Before, `"max_permits":10`) || !strings.Contains(entry.After, `"max_permits":500`) {
		t.Fatalf("update audit %+v", entry)
	}

	// A save based on version 1 is refused and changes nothing.
	before := dump(t, db)
	stale := created
	stale.MaxPermits = 7
	err = s.Update(ctx, alice, &stale)
	var se *errs.Stale
	if !errors.As(err, &se) || se.Version != 2 || se.Based != 1 || se.Current.(*buckets.Bucket).MaxPermits != 500 {
		t.Fatalf("stale update: %v; want an *errs.Stale carrying version 2", err)
	}
	if stale.MaxPermits != 7 || stale.Version != 1 {
		t.Fatalf("refused update changed its argument: %+v", stale)
	}
	// The owner app cannot change; unknown apps and missing buckets are refused.
	moved := *b
	moved.OwnerApp = "ads"
	if err := moved.CheckFixed(b); errs.Fields(err).For("owner_app") == "" {
		t.Fatalf("owner change: %v; want a validation error on owner_app", err)
	}
	ghost := *b
	ghost.AllowedApps = []string{"ghost"}
	if err := s.Update(ctx, alice, &ghost); errs.Fields(err).For("allowed_apps") != `unknown app "ghost"` {
		t.Fatalf("unknown allowed app: %v", err)
	}
	invalid := *b
	invalid.Rate = buckets.Rate{}
	if err := s.Update(ctx, alice, &invalid); errs.Fields(err).For("rate") == "" {
		t.Fatalf("invalid rate: %v", err)
	}
	missing := *b
	missing.Name = "nope"
	if err := s.Update(ctx, alice, &missing); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("update of a missing bucket: %v; want ErrNotFound", err)
	}
	if after := dump(t, db); after != before {
		t.Fatalf("refused updates changed the database:\n%s\nwas\n%s", after, before)
	}

	// An update that keeps the allowed apps still bumps the version.
	b.Description = "again"
	ev, _ = mutation(t, db, "bucket.update", func() error { return s.Update(ctx, alice, b) })
	if b.Version != 3 || ev.Version != 3 || !slices.Equal(b.AllowedApps, []string{"ads", "search"}) {
		t.Fatalf("second update: bucket %+v event %+v", b, ev)
	}
}

func TestConcurrentUpdatesOneWins(t *testing.T) {
	_, s := setup(t)
	b := create(t, s, newBucket(t, "hot"))
	const n = 8
	results := make(chan error, n)
	for i := range n {
		go func() {
			c := *b
			c.MaxPermits = int64(100 + i)
			results <- s.Update(ctx, alice, &c)
		}()
	}
	wins := 0
	for range n {
		err := <-results
		switch {
		case err == nil:
			wins++
		case errors.Is(err, errs.ErrConflict), errors.Is(err, errs.ErrUnavailable):
		default:
			t.Errorf("concurrent update: %v", err)
		}
	}
	got, err := s.Get(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	if wins != 1 || got.Version != 2 {
		t.Fatalf("%d updates of version 1 succeeded, stored version %d; want exactly 1 and 2", wins, got.Version)
	}
}

func TestDelete(t *testing.T) {
	db, s := setup(t)
	b := create(t, s, newBucket(t, "checkout", "shop", "search"))
	b.MaxPermits = 20
	if err := s.Update(ctx, alice, b); err != nil {
		t.Fatal(err)
	}
	before := dump(t, db)
	if err := s.Delete(ctx, alice, "checkout", buckets.Expect{Version: 1}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale delete: %v; want ErrConflict", err)
	}
	if err := s.Delete(ctx, alice, "nope", buckets.Expect{}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("delete of a missing bucket: %v; want ErrNotFound", err)
	}
	if after := dump(t, db); after != before {
		t.Fatalf("refused deletes changed the database:\n%s\nwas\n%s", after, before)
	}

	ev, entry := mutation(t, db, "bucket.delete", func() error { return s.Delete(ctx, alice, "checkout", buckets.Expect{Version: 2}) })
	if ev.Op != buckets.OpDelete || ev.Version != 3 || ev.BucketID != b.ID || ev.Name != "checkout" {
		t.Fatalf("delete event %+v; want a delete at version 3", ev)
	}
	if entry.After != "" || !strings.Contains(entry.Before, `"name":"checkout"`) || entry.App != "shop" {
		t.Fatalf("delete audit %+v", entry)
	}
	if _, err := s.Get(ctx, "checkout"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Get after delete: %v", err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM bucket_apps`); n != 0 {
		t.Fatalf("%d allowed-app rows left after delete", n)
	}

	// Version 0 deletes whatever is stored; the name can be reused, with a new ID.
	again := create(t, s, newBucket(t, "checkout"))
	if again.ID == b.ID || again.Version != 1 {
		t.Fatalf("re-created bucket %+v; want a new ID at version 1", again)
	}
	mutation(t, db, "bucket.delete", func() error { return s.Delete(ctx, alice, "checkout", buckets.Expect{}) })
}

func names(bs []*buckets.Bucket) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}

func TestListPagination(t *testing.T) {
	_, s := setup(t)
	var want []string
	for i := range 23 {
		// Out of order on purpose, with digits and dashes.
		name := fmt.Sprintf("b-%02d", (i*7)%23)
		if i%4 == 0 {
			name = fmt.Sprintf("a%d", i)
		}
		create(t, s, newBucket(t, name))
		want = append(want, name)
	}
	sort.Strings(want)

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, err := s.List(ctx, buckets.Filter{After: after, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 23 {
			t.Fatalf("Total = %d; want 23", page.Total)
		}
		if len(page.Buckets) > 5 || pages > 5 {
			t.Fatalf("page %d has %d buckets", pages, len(page.Buckets))
		}
		if page.Offset != len(got) {
			t.Fatalf("page %d: Offset = %d; want %d", pages, page.Offset, len(got))
		}
		if len(got) > 0 {
			// Coming back from this page lands on the one before, at its offset.
			back := mustList(t, s, buckets.Filter{Before: page.Buckets[0].Name, Limit: 5})
			if back.Offset != len(got)-len(back.Buckets) {
				t.Fatalf("page before %q: Offset = %d; want %d", page.Buckets[0].Name, back.Offset, len(got)-len(back.Buckets))
			}
		}
		got = append(got, names(page.Buckets)...)
		if page.Next == "" {
			break
		}
		if page.Next != page.Buckets[len(page.Buckets)-1].Name {
			t.Fatalf("Next = %q; want the last name of the page", page.Next)
		}
		after = page.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged names %v\nwant %v", got, want)
	}
	for _, b := range mustList(t, s, buckets.Filter{Limit: 1}).Buckets {
		if len(b.AllowedApps) != 1 || b.AllowedApps[0] != "shop" || b.Rate.String() != "0.5/s" {
			t.Fatalf("listed bucket %+v lacks its definition", b)
		}
	}
	if page := mustList(t, s, buckets.Filter{Limit: 100000}); len(page.Buckets) != 23 || page.Next != "" {
		t.Fatalf("big limit: %d buckets, next %q", len(page.Buckets), page.Next)
	}
	if page := mustList(t, s, buckets.Filter{}); len(page.Buckets) != 23 {
		t.Fatalf("default limit: %d buckets", len(page.Buckets))
	}
}

func TestListCursorStable(t *testing.T) {
	_, s := setup(t)
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		create(t, s, newBucket(t, n))
	}
	first := mustList(t, s, buckets.Filter{Limit: 3})
	if !slices.Equal(names(first.Buckets), []string{"a", "b", "c"}) || first.Next != "c" {
		t.Fatalf("first page %v next %q", names(first.Buckets), first.Next)
	}
	// Changes before the cursor neither repeat nor skip anything after it.
	create(t, s, newBucket(t, "aa"))
	if err := s.Delete(ctx, alice, "b", buckets.Expect{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, alice, "c", buckets.Expect{}); err != nil {
		t.Fatal(err)
	}
	second := mustList(t, s, buckets.Filter{After: first.Next, Limit: 3})
	if !slices.Equal(names(second.Buckets), []string{"d", "e", "f"}) || second.Next != "" {
		t.Fatalf("second page %v next %q; want d e f and no next", names(second.Buckets), second.Next)
	}
}

func mustList(t *testing.T, s *buckets.Store, f buckets.Filter) buckets.Page {
	t.Helper()
	page, err := s.List(ctx, f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return page
}

func TestListSearch(t *testing.T) {
	_, s := setup(t)
	for _, n := range []string{"a_b", "axb", "a.b", "a-b", "ab", "xy", "x1y"} {
		create(t, s, newBucket(t, n))
	}
	for search, want := range map[string][]string{
		"a_b":    {"a_b"},
		"A_B":    {"a_b"},
		"_":      {"a_b"},
		"%":      {},
		"a%b":    {},
		"!":      {},
		"x!y":    {},
		"a.":     {"a.b"},
		"b":      {"a-b", "a.b", "a_b", "ab", "axb"},
		"1":      {"x1y"},
		"\\":     {},
		"'":      {},
		"\x00":   {},
		"\xff":   {},
		"\u00e9": {},
		"a-b":    {"a-b"},
		"zzzzz":  {},
	} {
		page := mustList(t, s, buckets.Filter{Search: search})
		got := names(page.Buckets)
		sort.Strings(got)
		if !slices.Equal(got, want) || page.Total != len(want) {
			t.Errorf("Search %q = %v (total %d); want %v", search, got, page.Total, want)
		}
	}
}

func TestListVisibility(t *testing.T) {
	_, s := setup(t)
	create(t, s, newBucket(t, "own", "shop"))
	create(t, s, newBucket(t, "shared", "search"))
	ads := newBucket(t, "ads-only", "ads")
	ads.OwnerApp = "ads"
	create(t, s, ads)
	both := newBucket(t, "ads-search", "ads", "search")
	both.OwnerApp = "ads"
	create(t, s, both)

	for _, tt := range []struct {
		f    buckets.Filter
		want []string
	}{
		{buckets.Filter{}, []string{"ads-only", "ads-search", "own", "shared"}},
		{buckets.Filter{VisibleTo: []string{}}, []string{}},
		{buckets.Filter{VisibleTo: []string{"search"}}, []string{"ads-search", "shared"}},
		{buckets.Filter{VisibleTo: []string{"shop"}}, []string{"own", "shared"}},
		{buckets.Filter{VisibleTo: []string{"ads", "ghost"}}, []string{"ads-only", "ads-search"}},
		{buckets.Filter{VisibleTo: []string{"ghost"}}, []string{}},
		{buckets.Filter{App: "search"}, []string{"ads-search", "shared"}},
		{buckets.Filter{App: "shop"}, []string{"own", "shared"}},
		{buckets.Filter{App: "ads", VisibleTo: []string{"search"}}, []string{"ads-search"}},
		{buckets.Filter{App: "search", Search: "ads"}, []string{"ads-search"}},
		{buckets.Filter{VisibleTo: []string{"shop", "ads"}, After: "ads-search", Limit: 1}, []string{"own"}},
		{buckets.Filter{VisibleTo: []string{"\xff", "x'y"}, App: "\xff\x00", After: "\xff"}, []string{}},
		{buckets.Filter{After: "\xff"}, []string{}},
	} {
		page := mustList(t, s, tt.f)
		if got := names(page.Buckets); !slices.Equal(got, tt.want) {
			t.Errorf("List(%+v) = %v; want %v", tt.f, got, tt.want)
		}
		if tt.f.After == "" && page.Total != len(tt.want) {
			t.Errorf("List(%+v).Total = %d; want %d", tt.f, page.Total, len(tt.want))
		}
	}
}

func TestEvents(t *testing.T) {
	_, s := setup(t)
	for i := range 5 {
		create(t, s, newBucket(t, fmt.Sprintf("e%d", i)))
	}
	b, err := s.Get(ctx, "e2")
	if err != nil {
		t.Fatal(err)
	}
	b.MaxPermits = 99
	if err := s.Update(ctx, alice, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, alice, "e0", buckets.Expect{}); err != nil {
		t.Fatal(err)
	}

	all, err := s.PendingEvents(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range all {
		if i > 0 && e.ID <= all[i-1].ID {
			t.Fatalf("events out of order: %d after %d", e.ID, all[i-1].ID)
		}
		got = append(got, fmt.Sprintf("%s %s v%d", e.Op, e.Name, e.Version))
	}
	want := []string{"upsert e0 v1", "upsert e1 v1", "upsert e2 v1", "upsert e3 v1", "upsert e4 v1", "upsert e2 v2", "delete e0 v2"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}

	first, err := s.PendingEvents(ctx, 3)
	if err != nil || len(first) != 3 || first[0].ID != all[0].ID {
		t.Fatalf("PendingEvents(3) = %v, %v", first, err)
	}
	ids := []int64{first[0].ID, first[1].ID, first[2].ID}
	if err := s.AckEvents(ctx, ids); err != nil {
		t.Fatal(err)
	}
	// Acknowledging again, unknown ids or nothing is harmless.
	for _, again := range [][]int64{ids, {999999999}, nil, {}} {
		if err := s.AckEvents(ctx, again); err != nil {
			t.Fatalf("AckEvents(%v): %v", again, err)
		}
	}
	rest, err := s.PendingEvents(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 4 || rest[0].ID != all[3].ID {
		t.Fatalf("after ack: %d events starting at %d; want 4 starting at %d", len(rest), rest[0].ID, all[3].ID)
	}
	// Many ids at once (more than one statement's worth).
	many := make([]int64, 0, 2500)
	for i := range 2500 {
		many = append(many, int64(i+1))
	}
	if err := s.AckEvents(ctx, many); err != nil {
		t.Fatal(err)
	}
	if left, _ := s.PendingEvents(ctx, 100); len(left) != 0 {
		t.Fatalf("%d events left after acknowledging all", len(left))
	}
}

func TestDefinitions(t *testing.T) {
	_, s := setup(t)
	create(t, s, newBucket(t, "z", "shop", "search", "ads"))
	create(t, s, newBucket(t, "a"))
	create(t, s, newBucket(t, "m", "search"))
	defs, err := s.Definitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(defs); !slices.Equal(got, []string{"a", "m", "z"}) {
		t.Fatalf("definitions %v", got)
	}
	for _, d := range defs {
		g, err := s.Definition(ctx, d.Name)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", *g) != fmt.Sprintf("%+v", *d) {
			t.Errorf("Definitions has %+v; Definition has %+v", *d, *g)
		}
	}
	if !slices.Equal(defs[2].AllowedApps, []string{"ads", "search", "shop"}) {
		t.Fatalf("allowed apps of z: %v", defs[2].AllowedApps)
	}
	if _, err := s.Definition(ctx, "gone"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Definition of a missing bucket: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	srv := testenv.StartMariaDB(t)
	dsn := srv.FreshDatabase(t)
	db, err := database.Open(ctx, dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := buckets.NewStore(db)
	if _, err := s.Get(ctx, "x"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Get on a live server: %v", err)
	}
	srv.Kill()
	if _, err := s.Get(ctx, "x"); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Get with MySQL down = %v; want ErrUnavailable", err)
	}
	if _, err := s.List(ctx, buckets.Filter{}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("List with MySQL down = %v; want ErrUnavailable", err)
	}
	if err := s.Create(ctx, alice, newBucket(t, "x")); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Create with MySQL down = %v; want ErrUnavailable", err)
	}
	if _, err := s.PendingEvents(ctx, 1); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("PendingEvents with MySQL down = %v; want ErrUnavailable", err)
	}
}

// TestDeleteRacesRecreate: two deletes of bucket X carrying the same read
// (row, owner, version) run while another app's owner creates X again. The
// second delete must never remove the other team's new bucket, whose
// version (1) may equal the one the deletes carry.
func TestDeleteRacesRecreate(t *testing.T) {
	_, s := setup(t)

	// Step by step first: the new X has the version the stale read had.
	seen := create(t, s, newBucket(t, "x"))
	if err := s.Delete(ctx, alice, "x", buckets.Expect{ID: seen.ID, OwnerApp: "shop", Version: seen.Version}); err != nil {
		t.Fatal(err)
	}
	theirs := &buckets.Bucket{Name: "x", OwnerApp: "search", MaxPermits: 5, Rate: rate(t, "1/s")}
	create(t, s, theirs)
	if theirs.Version != seen.Version {
		t.Fatalf("test premise: versions %d and %d differ", theirs.Version, seen.Version)
	}
	for name, want := range map[string]buckets.Expect{
		"same read":  {ID: seen.ID, OwnerApp: "shop", Version: seen.Version},
		"row only":   {ID: seen.ID},
		"owner only": {OwnerApp: "shop", Version: seen.Version},
	} {
		if err := s.Delete(ctx, alice, "x", want); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("%s: delete of a bucket created again by another app = %v, want not found", name, err)
		}
	}
	edit := *seen
	edit.Description = "mine"
	if err := s.Update(ctx, alice, &edit); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("update of a bucket created again by another app = %v, want not found", err)
	}
	if got, err := s.Get(ctx, "x"); err != nil || got.OwnerApp != "search" || got.Description != "" {
		t.Fatalf("the other app's bucket after stale changes: %+v, %v", got, err)
	}

	// Then with real concurrency, many rounds.
	const rounds = 40
	lost := 0
	for round := range rounds {
		if err := s.Delete(ctx, alice, "x", buckets.Expect{}); err != nil && !errors.Is(err, errs.ErrNotFound) {
			t.Fatal(err)
		}
		mine := create(t, s, newBucket(t, "x"))
		want := buckets.Expect{ID: mine.ID, OwnerApp: mine.OwnerApp, Version: mine.Version}
		start := make(chan struct{})
		errc := make(chan error, 3)
		for range 2 {
			go func() {
				<-start
				err := s.Delete(ctx, alice, "x", want)
				if err != nil && !errors.Is(err, errs.ErrNotFound) {
					errc <- fmt.Errorf("delete: %w", err)
					return
				}
				errc <- nil
			}()
		}
		go func() {
			<-start
			for i := 0; ; i++ {
				b := &buckets.Bucket{Name: "x", OwnerApp: "search", MaxPermits: 5, Rate: rate(t, "1/s")}
				err := s.Create(ctx, bob, b)
				if err == nil {
					errc <- nil
					return
				}
				if !errors.Is(err, errs.ErrConflict) || i > 100000 {
					errc <- fmt.Errorf("re-create: %w", err)
					return
				}
			}
		}()
		close(start)
		for range 3 {
			if err := <-errc; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		got, err := s.Get(ctx, "x")
		switch {
		case errors.Is(err, errs.ErrNotFound):
			lost++
		case err != nil:
			t.Fatal(err)
		case got.OwnerApp != "search":
			t.Fatalf("round %d: x owned by %s after the race", round, got.OwnerApp)
		}
	}
	if lost > 0 {
		t.Fatalf("a stale delete removed the other app's new bucket in %d of %d rounds", lost, rounds)
	}
}

// WithDefinition holds the bucket's row while fn runs: a change or delete
// of the bucket, or of one of its overrides, commits only after fn, so
// what the sync worker writes inside fn cannot reach Redis after a change
// that replaced it.
func TestWithDefinitionHoldsTheRow(t *testing.T) {
	t.Parallel()
	db, s := setup(t)
	b := create(t, s, newBucket(t, "held", "search"))
	held := func() bool { return rowHeld(t, db, "held") }
	calls := 0
	err := s.WithDefinition(ctx, "held", func(got *buckets.Bucket) error {
		calls++
		if got == nil || got.ID != b.ID || got.Version != 1 || !slices.Equal(got.AllowedApps, []string{"search"}) {
			t.Errorf("definition %+v", got)
		}
		if !held() {
			t.Error("the row is not held while fn runs")
		}
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("WithDefinition: %v after %d calls", err, calls)
	}
	if held() {
		t.Fatal("the row is still held after fn returned")
	}
	// fn's error is WithDefinition's, and the row is let go.
	boom := errors.New("boom")
	if err := s.WithDefinition(ctx, "held", func(*buckets.Bucket) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("WithDefinition = %v, want fn's error", err)
	}
	if err := s.Delete(ctx, alice, "held", buckets.Expect{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"held", "Not A Name"} {
		err := s.WithDefinition(ctx, name, func(got *buckets.Bucket) error {
			if got != nil {
				t.Errorf("%q: definition %+v of a bucket that is gone", name, got)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
	}
}

// rowHeld reports whether another transaction holds the row of bucket
// name: the locking read every change begins with fails without waiting.
func rowHeld(t *testing.T, db *sqlx.DB, name string) bool {
	t.Helper()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var id int64
	err = tx.GetContext(ctx, &id, `SELECT id FROM buckets WHERE name = ? FOR UPDATE NOWAIT`, name)
	var me *mysql.MySQLError
	// MariaDB answers a lock it would wait for with 1205, MySQL with 3572.
	if errors.As(err, &me) && (me.Number == 1205 || me.Number == 3572) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
