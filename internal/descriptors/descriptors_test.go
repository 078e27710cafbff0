package descriptors_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	ctx   = context.Background()
	alice = audit.Actor{User: "alice", Via: "test"}
)

func fields(err error) []string {
	var out []string
	if v := errs.Fields(err); v != nil {
		for _, f := range v.Fields {
			out = append(out, f.Field)
		}
	}
	return out
}

func TestValidate(t *testing.T) {
	ok := func() descriptors.Mapping {
		return descriptors.Mapping{App: "edge", Domain: "edge", Bucket: "checkout",
			Entries: []descriptors.Entry{{Key: "generic_key", Value: "checkout"}, {Key: "remote_address"}}}
	}
	m := ok()
	if err := m.Validate(); err != nil {
		t.Fatalf("valid mapping: %v", err)
	}
	m.KeyFrom = "remote_address"
	if err := m.Validate(); err != nil {
		t.Fatalf("key from an any-value entry: %v", err)
	}
	long := strings.Repeat("x", descriptors.MaxText+1)
	for _, tc := range []struct {
		name  string
		edit  func(*descriptors.Mapping)
		field string
	}{
		{"no app", func(m *descriptors.Mapping) { m.App = "" }, "app"},
		{"bad app", func(m *descriptors.Mapping) { m.App = "Edge" }, "app"},
		{"no domain", func(m *descriptors.Mapping) { m.Domain = "" }, "domain"},
		{"long domain", func(m *descriptors.Mapping) { m.Domain = long }, "domain"},
		{"space in domain", func(m *descriptors.Mapping) { m.Domain = "a b" }, "domain"},
		{"no entries", func(m *descriptors.Mapping) { m.Entries = nil }, "entries"},
		{"too many entries", func(m *descriptors.Mapping) {
			m.Entries = slices.Repeat([]descriptors.Entry{{Key: "k"}}, descriptors.MaxEntries+1)
		}, "entries"},
		{"empty key", func(m *descriptors.Mapping) { m.Entries[0].Key = "" }, "entries"},
		{"control char value", func(m *descriptors.Mapping) { m.Entries[0].Value = "a\x00" }, "entries"},
		{"invalid utf8", func(m *descriptors.Mapping) { m.Entries[0].Value = "\xff" }, "entries"},
		{"bad bucket", func(m *descriptors.Mapping) { m.Bucket = "{x}" }, "bucket"},
		{"key from missing entry", func(m *descriptors.Mapping) { m.KeyFrom = "user" }, "key_from"},
		{"key from fixed value", func(m *descriptors.Mapping) { m.KeyFrom = "generic_key" }, "key_from"},
		{"key from repeated entry", func(m *descriptors.Mapping) {
			m.Entries = []descriptors.Entry{{Key: "ip"}, {Key: "ip"}}
			m.KeyFrom = "ip"
		}, "key_from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ok()
			tc.edit(&m)
			err := m.Validate()
			if !errors.Is(err, errs.ErrInvalid) || !slices.Contains(fields(err), tc.field) {
				t.Fatalf("err = %v, want a field error on %s", err, tc.field)
			}
		})
	}
}

func TestIndexMatch(t *testing.T) {
	e := func(kv ...string) []descriptors.Entry {
		var out []descriptors.Entry
		for i := 0; i < len(kv); i += 2 {
			out = append(out, descriptors.Entry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	any1 := &descriptors.Mapping{ID: 1, App: "edge", Domain: "d", Bucket: "any", Entries: e("generic_key", "")}
	fixed := &descriptors.Mapping{ID: 2, App: "edge", Domain: "d", Bucket: "fixed", Entries: e("generic_key", "checkout")}
	pairAny := &descriptors.Mapping{ID: 3, App: "edge", Domain: "d", Bucket: "pair-any", Entries: e("a", "", "b", "x")}
	pairFirst := &descriptors.Mapping{ID: 4, App: "edge", Domain: "d", Bucket: "pair-first", Entries: e("a", "1", "b", "")}
	keyed := &descriptors.Mapping{ID: 5, App: "edge", Domain: "d", Bucket: "per-ip", KeyFrom: "remote_address",
		Entries: e("remote_address", "")}
	other := &descriptors.Mapping{ID: 6, App: "other", Domain: "d", Bucket: "theirs", Entries: e("generic_key", "checkout")}
	invalid := &descriptors.Mapping{ID: 7, App: "edge", Domain: "d", Bucket: "{bad}", Entries: e("z", "")}
	ix := descriptors.NewIndex([]*descriptors.Mapping{any1, fixed, pairAny, pairFirst, keyed, other, invalid, nil})
	if ix.Len() != 6 {
		t.Fatalf("indexed %d mappings, want 6 (invalid and nil left out)", ix.Len())
	}
	for _, tc := range []struct {
		app, domain string
		entries     []descriptors.Entry
		want        string
	}{
		{"edge", "d", e("generic_key", "checkout"), "fixed"},
		{"edge", "d", e("generic_key", "search"), "any"},
		{"other", "d", e("generic_key", "checkout"), "theirs"},
		{"other", "d", e("generic_key", "search"), ""},
		{"edge", "other-domain", e("generic_key", "checkout"), ""},
		{"edge", "d", e("generic_key", "checkout", "x", "y"), ""}, // more entries: no match
		{"edge", "d", e("a", "1", "b", "x"), "pair-first"},        // first entry decides
		{"edge", "d", e("a", "2", "b", "x"), "pair-any"},
		{"edge", "d", e("a", "2", "b", "y"), ""},
		{"edge", "d", e("b", "x", "a", "1"), ""}, // order matters
		{"edge", "d", e("z", "1"), ""},
	} {
		got := ix.Match(tc.app, tc.domain, tc.entries)
		name := ""
		if got != nil {
			name = got.Bucket
		}
		if name != tc.want {
			t.Errorf("Match(%s, %s, %v) = %q, want %q", tc.app, tc.domain, tc.entries, name, tc.want)
		}
	}
	got := ix.Match("edge", "d", e("remote_address", "10.0.0.1"))
	if got != keyed || got.Key(e("remote_address", "10.0.0.1")) != "10.0.0.1" {
		t.Fatalf("keyed match %+v", got)
	}
	if fixed.Key(e("generic_key", "checkout")) != "" {
		t.Fatal("a mapping without key_from has no key")
	}
}

func count(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.GetContext(ctx, &n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func seed(t *testing.T, db *sqlx.DB) {
	t.Helper()
	for _, name := range []string{"edge", "other"} {
		if err := apps.NewStore(db).Create(ctx, alice, &apps.App{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	rate, _ := buckets.ParseRate("10/s")
	for _, b := range []*buckets.Bucket{
		{Name: "checkout", OwnerApp: "edge", MaxPermits: 10, Rate: rate},
		{Name: "theirs", OwnerApp: "other", MaxPermits: 10, Rate: rate},
	} {
		if err := buckets.NewStore(db).Create(ctx, alice, b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	seed(t, db)
	s := descriptors.NewStore(db)
	rev0, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := &descriptors.Mapping{App: "edge", Domain: "edge", Bucket: "checkout", Description: "checkout route",
		Entries: []descriptors.Entry{{Key: "generic_key", Value: "checkout"}}}
	if err := s.Create(ctx, alice, m); err != nil {
		t.Fatal(err)
	}
	if m.ID == 0 || m.Version != 1 || m.CreatedBy != "alice" {
		t.Fatalf("created %+v", m)
	}
	if rev, _ := s.Revision(ctx); rev != rev0+1 {
		t.Fatalf("revision %d after a create, want %d", rev, rev0+1)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE action = 'mapping.create' AND app = 'edge'`); n != 1 {
		t.Fatalf("%d audit rows for the create", n)
	}

	// Same match again: conflict; another app with the same match is fine.
	dup := *m
	dup.ID = 0
	if err := s.Create(ctx, alice, &dup); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	// A bucket the app may not use, an unknown bucket, an unknown app.
	for _, tc := range []struct {
		app, bucket, field string
	}{{"edge", "theirs", "bucket"}, {"edge", "nope", "bucket"}, {"ghost", "checkout", "app"}} {
		bad := &descriptors.Mapping{App: tc.app, Domain: "edge", Bucket: tc.bucket,
			Entries: []descriptors.Entry{{Key: "generic_key", Value: "x"}}}
		if err := s.Create(ctx, alice, bad); !slices.Contains(fields(err), tc.field) {
			t.Fatalf("create %s -> %s: %v, want a field error on %s", tc.app, tc.bucket, err, tc.field)
		}
	}

	got, err := s.Get(ctx, m.ID)
	if err != nil || got.Bucket != "checkout" || !slices.Equal(got.Entries, m.Entries) || got.App != "edge" {
		t.Fatalf("get: %+v %v", got, err)
	}

	// Update with the version read; a stale version conflicts.
	upd := *got
	upd.Entries = []descriptors.Entry{{Key: "generic_key", Value: "checkout"}, {Key: "remote_address"}}
	upd.KeyFrom = "remote_address"
	if err := s.Update(ctx, alice, &upd); err != nil {
		t.Fatal(err)
	}
	if upd.Version != 2 {
		t.Fatalf("version after update %d", upd.Version)
	}
	stale := *got
	if err := s.Update(ctx, alice, &stale); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	moved := upd
	moved.App = "other"
	if err := s.Update(ctx, alice, &moved); !slices.Contains(fields(err), "app") {
		t.Fatalf("moving to another app: %v", err)
	}

	all, rev, err := s.All(ctx)
	if err != nil || len(all) != 1 || all[0].KeyFrom != "remote_address" {
		t.Fatalf("all: %+v %v", all, err)
	}
	if rev != rev0+2 {
		t.Fatalf("All's revision %d, want %d", rev, rev0+2)
	}
	if list, err := s.List(ctx, "other"); err != nil || len(list) != 0 {
		t.Fatalf("other's list: %v %v", list, err)
	}

	if err := s.Delete(ctx, alice, m.ID, 1); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("delete with a stale version: %v", err)
	}
	if err := s.Delete(ctx, alice, m.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, m.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := s.Delete(ctx, alice, m.ID, 0); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if rev, _ := s.Revision(ctx); rev != rev0+3 {
		t.Fatalf("revision %d after delete, want %d", rev, rev0+3)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE object_type = 'mapping'`); n != 3 {
		t.Fatalf("%d mapping audit rows, want 3", n)
	}
}

// Any input validates or is refused with field errors, and matching never
// panics, whatever the descriptor.
func FuzzMapping(f *testing.F) {
	f.Add("edge", "edge", "generic_key", "checkout", "remote_address", "", "remote_address", "10.0.0.1")
	f.Add("", "a b", "", "\xff", "k", "v", "k", "")
	f.Fuzz(func(t *testing.T, app, domain, k1, v1, k2, v2, keyFrom, value string) {
		m := &descriptors.Mapping{App: app, Domain: domain, Bucket: "b", KeyFrom: keyFrom,
			Entries: []descriptors.Entry{{Key: k1, Value: v1}, {Key: k2, Value: v2}}}
		err := m.Validate()
		if err != nil && len(fields(err)) == 0 {
			t.Fatalf("error without field errors: %v", err)
		}
		ix := descriptors.NewIndex([]*descriptors.Mapping{m})
		got := ix.Match(app, domain, []descriptors.Entry{{Key: k1, Value: value}, {Key: k2, Value: value}})
		if err != nil && got != nil {
			t.Fatal("an invalid mapping matched")
		}
		if got != nil {
			_ = got.Key([]descriptors.Entry{{Key: k1, Value: value}, {Key: k2, Value: value}})
		}
	})
}
