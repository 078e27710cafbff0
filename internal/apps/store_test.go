package apps_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	ctx   = context.Background()
	alice = audit.Actor{User: "alice"}
)

func count(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.GetContext(ctx, &n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func lastAudit(t *testing.T, db *sqlx.DB) audit.Entry {
	t.Helper()
	page, err := audit.NewStore(db).List(ctx, audit.Filter{Limit: 1})
	if err != nil || len(page.Entries) != 1 {
		t.Fatalf("last audit entry: %v %v", page, err)
	}
	return page.Entries[0]
}

func TestCreateGetUpdate(t *testing.T) {
	db := testenv.MySQL(t)
	s := apps.NewStore(db)
	a := &apps.App{Name: "shop", Description: "the shop"}
	if err := s.Create(ctx, alice, a); err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || a.Version != 1 || a.CreatedBy != "alice" || a.CreatedAt.IsZero() || !a.UpdatedAt.Equal(a.CreatedAt) {
		t.Fatalf("created %+v", a)
	}
	if e := lastAudit(t, db); e.Action != "app.create" || e.ObjectType != "app" || e.ObjectName != "shop" || e.App != "shop" ||
		!strings.Contains(e.After, `"description":"the shop"`) {
		t.Fatalf("create audit %+v", e)
	}
	got, err := s.Get(ctx, "shop")
	if err != nil || fmt.Sprint(*got) != fmt.Sprint(*a) {
		t.Fatalf("Get = %+v, %v; want %+v", got, err, a)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	if _, err := s.Get(ctx, "NOT VALID"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Get invalid name: %v", err)
	}

	err = s.Create(ctx, alice, &apps.App{Name: "shop"})
	if !errors.Is(err, errs.ErrConflict) || err.Error() != `an app named "shop" already exists` {
		t.Fatalf("duplicate: %v", err)
	}
	if err := s.Create(ctx, alice, &apps.App{Name: "Bad"}); errs.Fields(err).For("name") == "" {
		t.Fatalf("invalid name: %v", err)
	}
}

func TestCreateAlsoRunsInTransaction(t *testing.T) {
	db := testenv.MySQL(t)
	s := apps.NewStore(db)
	grant := func(app string) func(ctx context.Context, tx *database.Tx) error {
		return func(ctx context.Context, tx *database.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO casbin_rule (ptype, v0, v1, v2) VALUES ('g', 'alice', 'owner', ?)`, app)
			return err
		}
	}
	if err := s.Create(ctx, alice, &apps.App{Name: "shop"}, grant("shop")); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM casbin_rule WHERE v2 = 'shop'`); n != 1 {
		t.Fatalf("grant rows = %d; want 1", n)
	}
	// A failing step rolls the whole registration back.
	boom := errors.New("boom")
	a := &apps.App{Name: "search"}
	err := s.Create(ctx, alice, a, grant("search"), func(context.Context, *database.Tx) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Create = %v; want the step's error", err)
	}
	if a.ID != 0 || a.Version != 0 {
		t.Fatalf("failed Create changed its argument: %+v", a)
	}
	if _, err := s.Get(ctx, "search"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("app of a failed Create exists: %v", err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM casbin_rule WHERE v2 = 'search'`); n != 0 {
		t.Fatalf("failed Create kept %d grant rows", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE object_name = 'search'`); n != 0 {
		t.Fatalf("failed Create left %d audit rows", n)
	}
}

func TestList(t *testing.T) {
	db := testenv.MySQL(t)
	s := apps.NewStore(db)
	all := []string{"a_b", "axb", "billing", "search", "shop", "shop-eu", "zeta"}
	for _, n := range []string{"zeta", "shop", "search", "billing", "shop-eu", "axb", "a_b"} {
		if err := s.Create(ctx, alice, &apps.App{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for range 10 {
		page, err := s.List(ctx, apps.Filter{After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != len(all) {
			t.Fatalf("Total = %d", page.Total)
		}
		for _, a := range page.Apps {
			got = append(got, a.Name)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if !slices.Equal(got, all) {
		t.Fatalf("paged %v; want %v", got, all)
	}
	for _, tt := range []struct {
		f    apps.Filter
		want []string
	}{
		{apps.Filter{Search: "SHOP"}, []string{"shop", "shop-eu"}},
		{apps.Filter{Search: "_"}, []string{"a_b"}},
		{apps.Filter{Search: "%"}, []string{}},
		{apps.Filter{Names: []string{"shop", "zeta", "ghost"}}, []string{"shop", "zeta"}},
		{apps.Filter{Names: []string{}}, []string{}},
		{apps.Filter{Names: []string{"\xff", "Bad Name"}}, []string{}},
		{apps.Filter{Search: "\xff"}, []string{}},
		{apps.Filter{After: "\xff"}, []string{}},
		{apps.Filter{Names: []string{"shop", "shop-eu", "search"}, Search: "sh", After: "shop"}, []string{"shop-eu"}},
	} {
		page, err := s.List(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, a := range page.Apps {
			got = append(got, a.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("List(%+v) = %v; want %v", tt.f, got, tt.want)
		}
	}
}
