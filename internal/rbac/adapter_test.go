package rbac

import (
	"context"
	"slices"
	"testing"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestAdapterRoundTrip drives the adapter through Casbin's own enforcer
// with auto-save on: what one enforcer saves, a fresh one loads, and every
// write bumps the policy revision.
func TestAdapterRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	a := &adapter{db: db}
	newEnforcer := func() *casbin.Enforcer {
		t.Helper()
		m, err := model.NewModelFromString(modelText)
		if err != nil {
			t.Fatal(err)
		}
		ce, err := casbin.NewEnforcer(m, a)
		if err != nil {
			t.Fatal(err)
		}
		return ce
	}
	rev := func() int64 {
		t.Helper()
		r, err := revision(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	stored := func() [][]string {
		t.Helper()
		r, err := a.rules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	ce := newEnforcer()
	r0 := rev()
	for _, r := range rules {
		if _, err := ce.AddPolicy(r[1], r[2]); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range [][]string{{"user:olga", "role:owner", "shop"}, {"user:vera", "role:viewer", "shop"}, {"user:olga", "role:viewer", "pay"}, {"user:root", "role:admin", "*"}} {
		if _, err := ce.AddGroupingPolicy(g[0], g[1], g[2]); err != nil {
			t.Fatal(err)
		}
	}
	if got := rev(); got != r0+int64(len(rules))+4 {
		t.Fatalf("revision %d after %d writes from %d", got, len(rules)+4, r0)
	}
	if got := stored(); len(got) != len(rules)+4 || !slices.Equal(got[0], []string{"p", "role:admin", "*"}) ||
		!slices.Equal(got[len(got)-1], []string{"g", "user:root", "role:admin", "*"}) {
		t.Fatalf("stored rules = %q", got)
	}

	// A fresh enforcer loads the same policy and decides alike.
	loaded := newEnforcer()
	for _, q := range []struct {
		sub, dom, act string
		want          bool
	}{
		{"user:olga", "shop", "manage", true},
		{"user:vera", "shop", "view", true},
		{"user:vera", "shop", "edit", false},
		{"user:olga", "pay", "edit", false},
		{"user:root", "mail", "manage", true},
		{"user:nobody", "shop", "view", false},
	} {
		if ok, err := loaded.Enforce(q.sub, q.dom, q.act); err != nil || ok != q.want {
			t.Errorf("loaded Enforce(%s, %s, %s) = %v, %v", q.sub, q.dom, q.act, ok, err)
		}
	}

	// Removing one rule and a filtered set goes to the table too.
	if _, err := ce.RemoveGroupingPolicy("user:vera", "role:viewer", "shop"); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.RemoveFilteredGroupingPolicy(2, "pay"); err != nil {
		t.Fatal(err)
	}
	if got := stored(); len(got) != len(rules)+2 {
		t.Fatalf("stored after removals = %q", got)
	}
	if err := loaded.LoadPolicy(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := loaded.Enforce("user:vera", "shop", "view"); ok {
		t.Fatal("removed role still loaded")
	}

	// SavePolicy replaces the table with the enforcer's policy.
	r1 := rev()
	if _, err := loaded.AddGroupingPolicy("user:otto", "role:owner", "pay"); err != nil {
		t.Fatal(err)
	}
	loaded.ClearPolicy()
	if _, err := loaded.AddPolicy("role:viewer", "view"); err != nil {
		t.Fatal(err)
	}
	// ClearPolicy is memory only; the save makes the table match.
	if err := loaded.SavePolicy(); err != nil {
		t.Fatal(err)
	}
	if got := stored(); len(got) != 1 || !slices.Equal(got[0], []string{"p", "role:viewer", "view"}) {
		t.Fatalf("stored after SavePolicy = %q", got)
	}
	if rev() <= r1 {
		t.Fatal("SavePolicy did not bump the revision")
	}

	// Rules too long for the table are refused, not cut.
	if err := a.AddPolicy("g", "g", []string{"1", "2", "3", "4", "5", "6", "7"}); err == nil {
		t.Fatal("a rule with 7 values was accepted")
	}
	if err := a.RemoveFilteredPolicy("g", "g", 5, "a", "b"); err == nil {
		t.Fatal("a filter past v5 was accepted")
	}
}
