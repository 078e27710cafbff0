package rbac_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/migrations"
)

// TestEmbeddedEngine runs the policy store on the in-process engine of
// -dev mode, through its single connection.
func TestEmbeddedEngine(t *testing.T) {
	dsn, stop, err := devdb.Start(ctx)
	must(t, err)
	t.Cleanup(stop)
	must(t, migrations.Up(dsn))
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	must(t, err)
	defer db.Close()
	addUsers(t, db, "root", "olga", "vera")
	addApp(t, db, "shop")

	e, err := rbac.New(ctx, db)
	must(t, err)
	must(t, e.SetAdmin(ctx, boss, "root", true))
	must(t, database.InTx(ctx, db, func(tx *database.Tx) error {
		addApp(t, tx, "pay")
		return e.GrantTx(ctx, tx, "olga", "pay", rbac.RoleOwner)
	}))
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))
	must(t, e.Grant(ctx, boss, "vera", "shop", rbac.RoleViewer))
	if err := e.Revoke(ctx, boss, "olga", "pay"); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("revoke last owner = %v", err)
	}
	must(t, e.Revoke(ctx, boss, "vera", "shop"))
	fresh, err := rbac.New(ctx, db)
	must(t, err)
	for _, enf := range []*rbac.Enforcer{e, fresh} {
		if !enf.IsAdmin("root") || !enf.Can("olga", "pay", rbac.ActionManage) || !enf.Can("olga", "shop", rbac.ActionEdit) ||
			enf.Can("vera", "shop", rbac.ActionView) {
			t.Fatal("wrong policy on the embedded engine")
		}
	}
	ms, err := e.Members(ctx, "shop")
	must(t, err)
	if len(ms) != 1 || ms[0].User != "olga" {
		t.Fatalf("members = %v", ms)
	}
}
