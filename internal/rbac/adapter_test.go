package rbac

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestRulesRoundTrip writes rules the way the Enforcer's changes do and
// reads them back the way a reload does: what is stored decides alike, and
// every change bumps the policy revision.
func TestRulesRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	a := &adapter{db: db}
	r0, err := revision(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	grants := [][]string{{"user:olga", "role:owner", "shop"}, {"user:vera", "role:viewer", "shop"}, {"user:olga", "role:viewer", "pay"}}
	err = database.InTx(ctx, db, func(tx *database.Tx) error {
		if err := bump(ctx, tx); err != nil {
			return err
		}
		for _, r := range rules {
			if err := insertRule(ctx, tx, r[0], r[1:]); err != nil {
				return err
			}
		}
		for _, g := range grants {
			if err := insertRule(ctx, tx, "g", g); err != nil {
				return err
			}
		}
		// A rule stored twice is one rule.
		return insertRule(ctx, tx, "g", grants[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	if r1, _ := revision(ctx, db); r1 <= r0 {
		t.Fatalf("revision %d after a change from %d", r1, r0)
	}
	stored, err := a.rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		if !slices.ContainsFunc(stored, func(r []string) bool { return slices.Equal(r, append([]string{"g"}, g...)) }) {
			t.Errorf("rule %q not stored: %q", g, stored)
		}
	}
	ce, _, err := build(stored)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sub, dom, act string
		want          bool
	}{
		{"user:olga", "shop", "manage", true},
		{"user:vera", "shop", "view", true},
		{"user:vera", "shop", "edit", false},
		{"user:olga", "pay", "edit", false},
		{"user:nobody", "shop", "view", false},
	} {
		if ok, err := ce.Enforce(q.sub, q.dom, q.act); err != nil || ok != q.want {
			t.Errorf("Enforce(%s, %s, %s) = %v, %v", q.sub, q.dom, q.act, ok, err)
		}
	}

	err = database.InTx(ctx, db, func(tx *database.Tx) error {
		gone, err := deleteRule(ctx, tx, "g", grants[1])
		if err != nil || !gone {
			t.Errorf("delete a stored rule: %v %v", gone, err)
		}
		gone, err = deleteRule(ctx, tx, "g", grants[1])
		if err != nil || gone {
			t.Errorf("delete it again: %v %v", gone, err)
		}
		// Rules too long for the table are refused, not cut.
		if err := insertRule(ctx, tx, "g", []string{"1", "2", "3", "4", "5", "6", "7"}); err == nil {
			t.Error("a rule with 7 values was accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
