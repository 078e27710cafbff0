package buckets_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
)

func keyedBucket(t *testing.T, s *buckets.Store, name string) *buckets.Bucket {
	t.Helper()
	b := newBucket(t, name)
	b.Keyed = true
	return create(t, s, b)
}

func newOverride(t *testing.T, bucket string, m buckets.Match, key string, capacity int64) *buckets.Override {
	return &buckets.Override{Bucket: bucket, Match: m, Key: key, MaxPermits: capacity, Rate: rate(t, "100/min")}
}

func TestOverrideValidate(t *testing.T) {
	good := newOverride(t, "api", buckets.MatchExact, "tenant:acme", 10)
	if err := good.Validate(); err != nil {
		t.Fatalf("valid override refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(o *buckets.Override)
		field string
	}{
		{"empty key", func(o *buckets.Override) { o.Key = "" }, "key"},
		{"long key", func(o *buckets.Override) { o.Key = strings.Repeat("k", 257) }, "key"},
		{"invalid utf8", func(o *buckets.Override) { o.Key = "a\xffb" }, "key"},
		{"control char", func(o *buckets.Override) { o.Key = "a\nb" }, "key"},
		{"match", func(o *buckets.Override) { o.Match = "suffix" }, "match"},
		{"capacity", func(o *buckets.Override) { o.MaxPermits = 0 }, "max_permits"},
		{"rate", func(o *buckets.Override) { o.Rate = buckets.Rate{} }, "rate"},
		{"bucket", func(o *buckets.Override) { o.Bucket = "Bad Name" }, "bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := *good
			tc.edit(&o)
			err := o.Validate()
			if !errors.Is(err, errs.ErrInvalid) || errs.Fields(err).For(tc.field) == "" {
				t.Fatalf("Validate = %v; want a problem on %s", err, tc.field)
			}
		})
	}
	// 256 bytes of multi-byte text are fine.
	o := *good
	o.Key = strings.Repeat("é", 128)
	if err := o.Validate(); err != nil {
		t.Fatalf("256-byte key refused: %v", err)
	}
}

func TestMostSpecific(t *testing.T) {
	os := []*buckets.Override{
		{ID: 1, Match: buckets.MatchPrefix, Key: "t"},
		{ID: 2, Match: buckets.MatchPrefix, Key: "tenant:"},
		{ID: 3, Match: buckets.MatchExact, Key: "tenant:acme"},
		{ID: 4, Match: buckets.MatchPrefix, Key: "tenant:acme"},
	}
	for key, want := range map[string]int64{"tenant:acme": 3, "tenant:acme2": 4, "tenant:x": 2, "top": 1, "x": 0} {
		got := buckets.MostSpecific(os, key)
		if (got == nil && want != 0) || (got != nil && got.ID != want) {
			t.Errorf("MostSpecific(%q) = %v; want id %d", key, got, want)
		}
	}
}

func TestKeyedIsFixed(t *testing.T) {
	_, s := setup(t)
	b := keyedBucket(t, s, "api")
	got, err := s.Get(ctx, "api")
	if err != nil || !got.Keyed {
		t.Fatalf("Get = %+v, %v; want keyed", got, err)
	}
	unkeyed := *got
	unkeyed.Keyed = false
	if err := unkeyed.CheckFixed(got); errs.Fields(err).For("keyed") == "" {
		t.Fatalf("CheckFixed unkeying = %v; want a problem on keyed", err)
	}
	// The store saves only what may change: keyed stays as stored.
	if err := s.Update(ctx, alice, &unkeyed); err != nil || !unkeyed.Keyed {
		t.Fatalf("Update unkeying = %+v, %v; want the bucket saved keyed", unkeyed, err)
	}
	evs, err := s.PendingEvents(ctx, 10)
	if err != nil || len(evs) != 2 || !evs[1].Keyed || evs[1].BucketID != b.ID {
		t.Fatalf("events = %+v, %v; want two keyed upserts", evs, err)
	}
}

func TestOverrideLifecycle(t *testing.T) {
	db, s := setup(t)
	keyedBucket(t, s, "api")
	create(t, s, newBucket(t, "plain"))

	// Only keyed buckets have overrides.
	if err := s.CreateOverride(ctx, alice, newOverride(t, "plain", buckets.MatchExact, "k", 5)); errs.Fields(err).For("bucket") == "" {
		t.Fatalf("override of a plain bucket = %v; want a problem on bucket", err)
	}
	if err := s.CreateOverride(ctx, alice, newOverride(t, "nope", buckets.MatchExact, "k", 5)); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("override of a missing bucket = %v; want not found", err)
	}

	o := newOverride(t, "api", buckets.MatchExact, "tenant:acme", 10000)
	if err := s.CreateOverride(ctx, alice, o); err != nil {
		t.Fatal(err)
	}
	if o.ID == 0 || o.Version != 1 || o.CreatedBy != "alice" {
		t.Fatalf("created = %+v", o)
	}
	// Same key, same match: conflict; same key as a prefix: fine.
	if err := s.CreateOverride(ctx, alice, newOverride(t, "api", buckets.MatchExact, "tenant:acme", 1)); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate = %v; want conflict", err)
	}
	p := newOverride(t, "api", buckets.MatchPrefix, "tenant:acme", 7)
	if err := s.CreateOverride(ctx, alice, p); err != nil {
		t.Fatal(err)
	}

	// Keys compare as bytes: a differently cased key is another key.
	upper := newOverride(t, "api", buckets.MatchExact, "TENANT:ACME", 3)
	if err := s.CreateOverride(ctx, alice, upper); err != nil {
		t.Fatalf("key differing in case: %v", err)
	}

	// Update with the version read; a stale version conflicts.
	stale := *o
	o.MaxPermits = 20000
	if err := s.UpdateOverride(ctx, bob, o); err != nil {
		t.Fatal(err)
	}
	if o.Version != 2 || o.UpdatedBy != "bob" {
		t.Fatalf("updated = %+v", o)
	}
	stale.MaxPermits = 1
	if err := s.UpdateOverride(ctx, alice, &stale); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale update = %v; want conflict", err)
	}
	moved := *o
	moved.Key = "tenant:other"
	if err := moved.CheckFixed(o); errs.Fields(err).For("key") == "" {
		t.Fatalf("changing the key = %v; want a problem on key", err)
	}
	// An override id of another bucket is not found through this one.
	keyedBucket(t, s, "other")
	wrong := *o
	wrong.Bucket = "other"
	if err := s.UpdateOverride(ctx, alice, &wrong); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("update through another bucket = %v; want not found", err)
	}

	for key, want := range map[string]int64{"tenant:acme": o.ID, "tenant:acme:eu": p.ID, "tenant:x": 0} {
		got, err := s.EffectiveOverride(ctx, "api", key)
		if err != nil {
			t.Fatal(err)
		}
		if (got == nil && want != 0) || (got != nil && got.ID != want) {
			t.Errorf("EffectiveOverride(%q) = %+v; want id %d", key, got, want)
		}
	}

	if err := s.DeleteOverride(ctx, alice, "api", o.ID, 1); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("delete with a stale version = %v; want conflict", err)
	}
	if err := s.DeleteOverride(ctx, alice, "api", o.ID, o.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetOverride(ctx, "api", o.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("get after delete = %v; want not found", err)
	}
	if got, _ := s.EffectiveOverride(ctx, "api", "tenant:acme"); got == nil || got.ID != p.ID {
		t.Fatalf("after deleting the exact override the prefix must apply, got %+v", got)
	}

	// Events in commit order, each carrying the override.
	evs, err := s.PendingEvents(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, e := range evs {
		if o := e.Override; o != nil {
			ops = append(ops, fmt.Sprintf("%s %d v%d %s %q", e.Op, o.ID, e.Version, o.Match, o.Key))
		}
	}
	want := []string{
		fmt.Sprintf("override_upsert %d v1 exact %q", o.ID, "tenant:acme"),
		fmt.Sprintf("override_upsert %d v1 prefix %q", p.ID, "tenant:acme"),
		fmt.Sprintf("override_upsert %d v1 exact %q", upper.ID, "TENANT:ACME"),
		fmt.Sprintf("override_upsert %d v2 exact %q", o.ID, "tenant:acme"),
		fmt.Sprintf("override_delete %d v3 exact %q", o.ID, "tenant:acme"),
	}
	if strings.Join(ops, "\n") != strings.Join(want, "\n") {
		t.Fatalf("override events:\n%s\nwant:\n%s", strings.Join(ops, "\n"), strings.Join(want, "\n"))
	}

	var audited []string
	if err := db.SelectContext(ctx, &audited, `SELECT action FROM audit_log WHERE object_type = 'override' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(audited, ",") != "override.create,override.create,override.create,override.update,override.delete" {
		t.Fatalf("audit = %v", audited)
	}

	// Deleting the bucket deletes its overrides.
	if err := s.Delete(ctx, alice, "api", buckets.Expect{}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM bucket_overrides o JOIN buckets b ON b.id = o.bucket_id WHERE b.name = 'api'`); err != nil || n != 0 {
		t.Fatalf("overrides left = %d, %v", n, err)
	}
}

func TestOverrideBinaryKeys(t *testing.T) {
	_, s := setup(t)
	keyedBucket(t, s, "api")
	// LIKE wildcards and the escape character are literal in searches;
	// quotes, braces and backslashes are just bytes.
	for _, k := range []string{"a%b", "a_b", "a!b", `x'"{}\`, "é:1"} {
		if err := s.CreateOverride(ctx, alice, newOverride(t, "api", buckets.MatchExact, k, 1)); err != nil {
			t.Fatalf("create %q: %v", k, err)
		}
	}
	for search, want := range map[string]int{"a%": 1, "a_": 1, "a!": 1, "a": 3, `x'"{}\`: 1, "é": 1, "zz": 0} {
		page, err := s.ListOverrides(ctx, "api", buckets.OverrideFilter{Search: search})
		if err != nil || len(page.Overrides) != want || page.Total != want {
			t.Errorf("search %q = %d/%d, %v; want %d", search, len(page.Overrides), page.Total, err, want)
		}
	}
	if _, err := s.ListOverrides(ctx, "api", buckets.OverrideFilter{After: "!!garbage"}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("bad cursor = %v; want invalid", err)
	}
}

func TestPrefixOverrideCap(t *testing.T) {
	db, s := setup(t)
	b := keyedBucket(t, s, "api")
	seedOverrides(t, db, b.ID, buckets.MatchPrefix, buckets.MaxPrefixOverrides)
	err := s.CreateOverride(ctx, alice, newOverride(t, "api", buckets.MatchPrefix, "one-more:", 1))
	if errs.Fields(err).For("match") == "" {
		t.Fatalf("prefix past the cap = %v; want a problem on match", err)
	}
	if err := s.CreateOverride(ctx, alice, newOverride(t, "api", buckets.MatchExact, "one-more:", 1)); err != nil {
		t.Fatalf("exact overrides are not capped: %v", err)
	}
}

// seedOverrides inserts n overrides keyed key-000000, key-000001, ...
// straight into the table (as a bulk import would), without events.
func seedOverrides(t testing.TB, db *sqlx.DB, bucketID int64, m buckets.Match, n int) {
	t.Helper()
	const chunk = 2000
	for start := 0; start < n; start += chunk {
		var rows []string
		var args []any
		for i := start; i < min(n, start+chunk); i++ {
			rows = append(rows, "(?, ?, ?, 5, 1, 1, 1, 'seed', NOW(6), 'seed', NOW(6))")
			args = append(args, bucketID, string(m), fmt.Sprintf("key-%06d", i))
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO bucket_overrides (bucket_id, match_kind, override_key,
			max_permits, rate_permits, rate_period_seconds, version, created_by, created_at, updated_by, updated_at)
			VALUES `+strings.Join(rows, ","), args...); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOverrideListScales(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 100,000 overrides")
	}
	db, s := setup(t)
	b := keyedBucket(t, s, "api")
	const n = 100_000
	seedOverrides(t, db, b.ID, buckets.MatchExact, n)

	start := time.Now()
	page, err := s.ListOverrides(ctx, "api", buckets.OverrideFilter{Limit: 100})
	if err != nil || len(page.Overrides) != 100 || page.Total != n || page.Next == "" {
		t.Fatalf("first page = %d of %d, next %q, %v", len(page.Overrides), page.Total, page.Next, err)
	}
	// Walk a few pages: keys strictly increase across pages.
	last := page.Overrides[len(page.Overrides)-1].Key
	for range 5 {
		page, err = s.ListOverrides(ctx, "api", buckets.OverrideFilter{Limit: 100, After: page.Next})
		if err != nil || len(page.Overrides) != 100 {
			t.Fatalf("next page = %d, %v", len(page.Overrides), err)
		}
		if page.Overrides[0].Key <= last {
			t.Fatalf("page starts at %q after %q", page.Overrides[0].Key, last)
		}
		last = page.Overrides[len(page.Overrides)-1].Key
	}
	page, err = s.ListOverrides(ctx, "api", buckets.OverrideFilter{Search: "key-09999"})
	if err != nil || page.Total != 10 {
		t.Fatalf("search = %d, %v; want 10", page.Total, err)
	}
	got, err := s.EffectiveOverride(ctx, "api", "key-054321")
	if err != nil || got == nil || got.Key != "key-054321" {
		t.Fatalf("EffectiveOverride = %+v, %v", got, err)
	}
	t.Logf("7 pages, a search and a match over %d overrides took %v", n, time.Since(start))
}

// WithOverrides returns those of the asked overrides the bucket still has,
// and holds the bucket's row (which every override change takes) while fn
// runs.
func TestWithOverridesHoldsTheBucket(t *testing.T) {
	t.Parallel()
	db, s := setup(t)
	b := keyedBucket(t, s, "api")
	create(t, s, newBucket(t, "plain"))
	var ids []int64
	for _, key := range []string{"a", "b", "c"} {
		o := newOverride(t, "api", buckets.MatchExact, key, 5)
		if err := s.CreateOverride(ctx, alice, o); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	if err := s.DeleteOverride(ctx, alice, "api", ids[1], 0); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := s.WithOverrides(ctx, "api", append(ids, 99999), func(got *buckets.Bucket, os []*buckets.Override) error {
		calls++
		if got == nil || got.ID != b.ID || len(os) != 2 || os[0].ID != ids[0] || os[1].ID != ids[2] || os[1].Key != "c" {
			t.Errorf("bucket %+v, overrides %+v; want a and c", got, os)
		}
		if !rowHeld(t, db, "api") {
			t.Error("the bucket's row is not held while fn runs")
		}
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("WithOverrides: %v after %d calls", err, calls)
	}
	if rowHeld(t, db, "api") {
		t.Fatal("the row is still held after fn returned")
	}
	// A bucket that is gone or not keyed has no overrides: nil.
	for _, name := range []string{"plain", "gone"} {
		err := s.WithOverrides(ctx, name, ids, func(got *buckets.Bucket, os []*buckets.Override) error {
			if got != nil || os != nil {
				t.Errorf("%s: %+v, %+v", name, got, os)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
