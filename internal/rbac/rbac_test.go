package rbac_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/migrations"
)

var (
	ctx   = context.Background()
	boss  = audit.Actor{User: "boss", Via: "console", Addr: "192.0.2.1"}
	every = []rbac.Action{rbac.ActionView, rbac.ActionEdit, rbac.ActionManage}
)

// setup returns a migrated database holding the users and apps named, and
// an Enforcer on it.
func setup(t *testing.T, users, apps []string) (*sqlx.DB, *rbac.Enforcer) {
	t.Helper()
	db := testenv.MySQL(t)
	addUsers(t, db, users...)
	for _, a := range apps {
		addApp(t, db, a)
	}
	e, err := rbac.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return db, e
}

func addUsers(t *testing.T, db *sqlx.DB, names ...string) {
	t.Helper()
	now := time.Now().UTC()
	for _, u := range names {
		if _, err := db.ExecContext(ctx, `INSERT INTO users (username, password_hash, created_at, updated_at)
			VALUES (?, 'x', ?, ?)`, u, now, now); err != nil {
			t.Fatal(err)
		}
	}
}

func addApp(t *testing.T, db sqlx.ExecerContext, name string) {
	t.Helper()
	now := time.Now().UTC()
	if _, err := db.ExecContext(ctx, `INSERT INTO apps (name, created_by, created_at, updated_by, updated_at)
		VALUES (?, 'boss', ?, 'boss', ?)`, name, now, now); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func lastAudit(t *testing.T, db *sqlx.DB) audit.Entry {
	t.Helper()
	page, err := audit.NewStore(db).List(ctx, audit.Filter{Limit: 1})
	if err != nil || len(page.Entries) != 1 {
		t.Fatalf("last audit entry: %+v, %v", page, err)
	}
	return page.Entries[0]
}

func TestRoleMatrix(t *testing.T) {
	db, e := setup(t, []string{"root", "olga", "vera", "otto", "nobody", "both"}, []string{"shop", "pay", "mail"})
	must(t, e.SetAdmin(ctx, boss, "root", true))
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))
	must(t, e.Grant(ctx, boss, "vera", "shop", rbac.RoleViewer))
	must(t, e.Grant(ctx, boss, "otto", "pay", rbac.RoleOwner))
	must(t, e.Grant(ctx, boss, "both", "pay", rbac.RoleViewer))
	must(t, e.Grant(ctx, boss, "both", "mail", rbac.RoleOwner))

	// Check this instance (changed in memory) and a fresh one (loaded
	// from MySQL): both must give the same answers.
	fresh, err := rbac.New(ctx, db)
	must(t, err)
	want := map[string][]rbac.Action{ // on app "shop"
		"root":   every,
		"olga":   every,
		"vera":   {rbac.ActionView},
		"otto":   nil,
		"nobody": nil,
		"both":   nil,
	}
	for name, enf := range map[string]*rbac.Enforcer{"changed": e, "loaded": fresh} {
		for user, allowed := range want {
			for _, a := range every {
				if got := enf.Can(user, "shop", a); got != slices.Contains(allowed, a) {
					t.Errorf("%s: Can(%s, shop, %s) = %v", name, user, a, got)
				}
			}
		}
		if !enf.Can("otto", "pay", rbac.ActionEdit) || enf.Can("both", "pay", rbac.ActionEdit) ||
			!enf.Can("both", "pay", rbac.ActionView) || !enf.Can("both", "mail", rbac.ActionManage) {
			t.Errorf("%s: roles on other apps are wrong", name)
		}
		// Admins may do everything, on any app, even one not registered.
		if !enf.Can("root", "anything", rbac.ActionManage) || enf.Can("olga", "anything", rbac.ActionView) {
			t.Errorf("%s: admin or unknown app wrong", name)
		}
		// Names that are not valid names never match, even "*".
		if enf.Can("olga", "*", rbac.ActionView) || enf.Can("*", "shop", rbac.ActionView) ||
			enf.Can("root", "*", rbac.ActionView) || enf.Can("olga", "shop", "delete") {
			t.Errorf("%s: invalid input allowed", name)
		}
		if !enf.IsAdmin("root") || enf.IsAdmin("olga") {
			t.Errorf("%s: IsAdmin wrong", name)
		}
		if v := enf.Visible("root"); v != nil {
			t.Errorf("%s: Visible(root) = %v, want nil", name, v)
		}
		if v := enf.Visible("nobody"); v == nil || len(v) != 0 {
			t.Errorf("%s: Visible(nobody) = %#v, want empty", name, v)
		}
		if v := enf.Visible("both"); !slices.Equal(v, []string{"mail", "pay"}) {
			t.Errorf("%s: Visible(both) = %v", name, v)
		}
		if got := enf.Apps("both"); !maps.Equal(got, map[string]rbac.Role{"pay": rbac.RoleViewer, "mail": rbac.RoleOwner}) {
			t.Errorf("%s: Apps(both) = %v", name, got)
		}
		if got := enf.Apps("root"); len(got) != 0 {
			t.Errorf("%s: Apps(root) = %v, want none: admin is not a membership", name, got)
		}
		// A bucket of shop usable by pay: members of either see it.
		for user, ok := range map[string]bool{"root": true, "olga": true, "vera": true, "otto": true, "both": true, "nobody": false} {
			if got := enf.CanSeeBucket(user, "shop", []string{"shop", "pay"}); got != ok {
				t.Errorf("%s: CanSeeBucket(%s) = %v, want %v", name, user, got, ok)
			}
		}
		if enf.CanSeeBucket("otto", "shop", []string{"shop"}) {
			t.Errorf("%s: otto sees a bucket pay may not use", name)
		}
	}

	ms, err := e.Members(ctx, "shop")
	must(t, err)
	if fmt.Sprint(ms) != "[{olga owner} {vera viewer}]" {
		t.Fatalf("Members(shop) = %v", ms)
	}
	if ms, err := e.Members(ctx, "ghost"); err != nil || ms == nil || len(ms) != 0 {
		t.Fatalf("Members(ghost) = %#v, %v", ms, err)
	}

	// Grant replaces the role: vera becomes owner, then viewer again.
	must(t, e.Grant(ctx, boss, "vera", "shop", rbac.RoleOwner))
	if !e.Can("vera", "shop", rbac.ActionManage) || e.Apps("vera")["shop"] != rbac.RoleOwner {
		t.Fatal("vera is not owner after grant")
	}
	if ent := lastAudit(t, db); ent.Action != "member.grant" || ent.ObjectName != "vera" || ent.App != "shop" ||
		ent.Actor != boss.User || ent.RemoteAddr != boss.Addr ||
		!strings.Contains(ent.Before, `"viewer"`) || !strings.Contains(ent.After, `"owner"`) {
		t.Fatalf("grant audit = %+v", ent)
	}
	must(t, e.Grant(ctx, boss, "vera", "shop", rbac.RoleViewer))
	if e.Can("vera", "shop", rbac.ActionEdit) || !e.Can("vera", "shop", rbac.ActionView) {
		t.Fatal("vera kept the owner role")
	}
	var n int
	must(t, db.GetContext(ctx, &n, `SELECT COUNT(*) FROM casbin_rule WHERE ptype = 'g' AND v0 = 'user:vera'`))
	if n != 1 {
		t.Fatalf("vera has %d stored roles, want 1", n)
	}

	must(t, e.Revoke(ctx, boss, "vera", "shop"))
	if e.Can("vera", "shop", rbac.ActionView) || len(e.Apps("vera")) != 0 {
		t.Fatal("vera still sees shop after revoke")
	}
	if ent := lastAudit(t, db); ent.Action != "member.revoke" || ent.ObjectName != "vera" || ent.App != "shop" || ent.After != "" {
		t.Fatalf("revoke audit = %+v", ent)
	}
	if err := e.Revoke(ctx, boss, "vera", "shop"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("second revoke = %v, want not found", err)
	}
}

func TestValidation(t *testing.T) {
	db, e := setup(t, []string{"olga"}, []string{"shop"})
	tests := []struct {
		name       string
		err        error
		field      string
		isNotFound bool
	}{
		{name: "bad user", err: e.Grant(ctx, boss, "Olga Smith", "shop", rbac.RoleOwner), field: "user"},
		{name: "star user", err: e.Grant(ctx, boss, "*", "shop", rbac.RoleOwner), field: "user"},
		{name: "bad app", err: e.Grant(ctx, boss, "olga", "shop,pay", rbac.RoleOwner), field: "app"},
		{name: "global domain", err: e.Grant(ctx, boss, "olga", "*", rbac.RoleOwner), field: "app"},
		{name: "bad role", err: e.Grant(ctx, boss, "olga", "shop", "admin"), field: "role"},
		{name: "empty role", err: e.Grant(ctx, boss, "olga", "shop", ""), field: "role"},
		{name: "unknown user", err: e.Grant(ctx, boss, "ghost", "shop", rbac.RoleViewer), field: "user"},
		{name: "unknown app", err: e.Grant(ctx, boss, "olga", "ghost", rbac.RoleViewer), isNotFound: true},
		{name: "revoke bad app", err: e.Revoke(ctx, boss, "olga", ""), field: "app"},
		{name: "admin bad user", err: e.SetAdmin(ctx, boss, "ol ga", true), field: "user"},
		{name: "admin unknown user", err: e.SetAdmin(ctx, boss, "ghost", true), field: "user"},
	}
	for _, tt := range tests {
		if tt.isNotFound {
			if !errors.Is(tt.err, errs.ErrNotFound) {
				t.Errorf("%s: err = %v, want not found", tt.name, tt.err)
			}
			continue
		}
		if v := errs.Fields(tt.err); v == nil || v.For(tt.field) == "" {
			t.Errorf("%s: err = %v, want a validation of %q", tt.name, tt.err, tt.field)
		}
	}
	var n int
	must(t, db.GetContext(ctx, &n, `SELECT COUNT(*) FROM casbin_rule WHERE ptype = 'g'`))
	if n != 0 {
		t.Fatalf("%d role assignments stored after refused changes", n)
	}
}

func TestLastOwner(t *testing.T) {
	db, e := setup(t, []string{"olga", "omar"}, []string{"shop"})
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))

	if err := e.Revoke(ctx, boss, "olga", "shop"); !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "last owner") {
		t.Fatalf("revoke last owner = %v", err)
	}
	if err := e.Grant(ctx, boss, "olga", "shop", rbac.RoleViewer); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("demote last owner = %v", err)
	}
	if !e.Can("olga", "shop", rbac.ActionManage) {
		t.Fatal("refused changes took the owner role away")
	}

	// With a second owner, either may go, but not both.
	must(t, e.Grant(ctx, boss, "omar", "shop", rbac.RoleOwner))
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleViewer))
	if err := e.Revoke(ctx, boss, "omar", "shop"); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("revoke the other last owner = %v", err)
	}
	must(t, e.Revoke(ctx, boss, "olga", "shop"))

	// Two concurrent revocations of two owners: the revision lock
	// serializes them, so exactly one succeeds.
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))
	other, err := rbac.New(ctx, db)
	must(t, err)
	var wg sync.WaitGroup
	errs2 := make([]error, 2)
	for i, enf := range []*rbac.Enforcer{e, other} {
		user := []string{"olga", "omar"}[i]
		wg.Go(func() { errs2[i] = enf.Revoke(ctx, boss, user, "shop") })
	}
	wg.Wait()
	if (errs2[0] == nil) == (errs2[1] == nil) {
		t.Fatalf("concurrent revokes of both owners: %v, %v; want exactly one refused", errs2[0], errs2[1])
	}
	ms, err := e.Members(ctx, "shop")
	must(t, err)
	if len(ms) != 1 || ms[0].Role != rbac.RoleOwner {
		t.Fatalf("members after concurrent revokes = %v", ms)
	}
}

func TestLastAdmin(t *testing.T) {
	db, e := setup(t, []string{"root", "rita"}, nil)
	must(t, e.SetAdmin(ctx, boss, "root", true))
	if ent := lastAudit(t, db); ent.Action != "user.admin" || ent.ObjectName != "root" || !strings.Contains(ent.After, "true") {
		t.Fatalf("admin audit = %+v", ent)
	}
	if err := e.SetAdmin(ctx, boss, "root", false); !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "last admin") {
		t.Fatalf("removing the last admin = %v", err)
	}
	// Asking for the current state is no change and no audit row.
	before := lastAudit(t, db).ID
	must(t, e.SetAdmin(ctx, boss, "root", true))
	must(t, e.SetAdmin(ctx, boss, "rita", false))
	if lastAudit(t, db).ID != before {
		t.Fatal("a no-op SetAdmin wrote an audit row")
	}
	must(t, e.SetAdmin(ctx, boss, "rita", true))
	must(t, e.SetAdmin(ctx, boss, "root", false))
	if e.IsAdmin("root") || !e.IsAdmin("rita") || e.Visible("root") == nil {
		t.Fatal("admin role did not move from root to rita")
	}
	if err := e.SetAdmin(ctx, boss, "rita", false); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("removing the new last admin = %v", err)
	}
}

// TestRevokeSeenByOtherInstance: a revoke on one console instance takes
// effect on another (polling) within a second (BRIEF section 2).
func TestRevokeSeenByOtherInstance(t *testing.T) {
	db, a := setup(t, []string{"olga", "vera"}, []string{"shop"})
	b, err := rbac.New(ctx, db)
	must(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()

	must(t, a.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))
	must(t, a.Grant(ctx, boss, "vera", "shop", rbac.RoleViewer))
	waitFor(t, "grant", func() bool { return b.Can("vera", "shop", rbac.ActionView) })

	start := time.Now()
	must(t, a.Revoke(ctx, boss, "vera", "shop"))
	delay := waitFor(t, "revoke", func() bool { return !b.Can("vera", "shop", rbac.ActionView) })
	t.Logf("revoke took effect on the other instance after %v (measured from before the revoke: %v)", delay, time.Since(start))

	must(t, a.SetAdmin(ctx, boss, "olga", true))
	waitFor(t, "admin", func() bool { return b.IsAdmin("olga") && b.Visible("olga") == nil })
}

// waitFor polls ok until it holds, failing after one second, and returns
// how long it took.
func waitFor(t *testing.T, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > time.Second {
			t.Fatalf("%s not seen by the other instance within 1 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func TestGrantTxWithAppCreation(t *testing.T) {
	db, e := setup(t, []string{"olga", "omar"}, nil)
	// The package function: the role is stored with the app; this
	// instance sees it after a reload.
	must(t, database.InTx(ctx, db, func(tx *database.Tx) error {
		addApp(t, tx, "shop")
		return rbac.GrantTx(ctx, tx, "olga", "shop", rbac.RoleOwner)
	}))
	must(t, e.Reload(ctx))
	if !e.Can("olga", "shop", rbac.ActionManage) {
		t.Fatal("GrantTx role missing after reload")
	}
	// The method: seen at once, before any reload.
	must(t, database.InTx(ctx, db, func(tx *database.Tx) error {
		addApp(t, tx, "pay")
		return e.GrantTx(ctx, tx, "omar", "pay", rbac.RoleOwner)
	}))
	if !e.Can("omar", "pay", rbac.ActionEdit) {
		t.Fatal("Enforcer.GrantTx role not applied at once")
	}
	// A stale reload (older revision) must not drop it; a current one keeps it.
	must(t, e.Reload(ctx))
	if !e.Can("omar", "pay", rbac.ActionEdit) {
		t.Fatal("role lost on reload")
	}
	// Granting on an app created in the same, uncommitted transaction
	// works; on an app that does not exist it does not.
	err := database.InTx(ctx, db, func(tx *database.Tx) error {
		return rbac.GrantTx(ctx, tx, "omar", "ghost", rbac.RoleOwner)
	})
	if !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("GrantTx on a missing app = %v", err)
	}
}

// TestGrantTxRolledBack: a role granted in a transaction that rolls back
// never applies, not even for a moment.
func TestGrantTxRolledBack(t *testing.T) {
	db, e := setup(t, []string{"olga"}, nil)
	boom := errors.New("boom")
	err := database.InTx(ctx, db, func(tx *database.Tx) error {
		addApp(t, tx, "shop")
		if err := e.GrantTx(ctx, tx, "olga", "shop", rbac.RoleOwner); err != nil {
			return err
		}
		if e.Can("olga", "shop", rbac.ActionView) || len(e.Apps("olga")) != 0 {
			t.Error("role applied in memory before its transaction committed")
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if e.Can("olga", "shop", rbac.ActionView) || len(e.Apps("olga")) != 0 || len(e.Visible("olga")) != 0 {
		t.Fatal("rolled-back role applied in memory")
	}
}

// TestFailedCommit: the transaction's connection dies between the grant
// and the commit, so the commit fails. Neither the Casbin policy nor the
// index (apps, visibility, admins) may hold the grant.
func TestFailedCommit(t *testing.T) {
	db, e := setup(t, []string{"olga", "root"}, []string{"pay"})
	kill := func(tx *database.Tx) {
		var id int64
		must(t, tx.GetContext(ctx, &id, `SELECT CONNECTION_ID()`))
		if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
			t.Fatal(err)
		}
	}
	err := database.InTx(ctx, db, func(tx *database.Tx) error {
		addApp(t, tx, "shop")
		if err := e.GrantTx(ctx, tx, "olga", "shop", rbac.RoleOwner); err != nil {
			return err
		}
		if err := e.GrantTx(ctx, tx, "olga", "pay", rbac.RoleViewer); err != nil {
			return err
		}
		kill(tx)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("commit on a killed connection = %v, want a commit error", err)
	}
	var n int
	must(t, db.GetContext(ctx, &n, `SELECT COUNT(*) FROM casbin_rule WHERE ptype = 'g'`))
	if n != 0 {
		t.Fatalf("%d role assignments stored by a failed commit", n)
	}
	if e.Can("olga", "shop", rbac.ActionView) || e.Can("olga", "pay", rbac.ActionView) {
		t.Fatal("Casbin policy holds a grant whose commit failed")
	}
	if len(e.Apps("olga")) != 0 || len(e.Visible("olga")) != 0 {
		t.Fatalf("index holds a grant whose commit failed: apps %v, visible %v", e.Apps("olga"), e.Visible("olga"))
	}
}

// TestUserNamedLikeRole: users named like roles are users, nothing more.
// A user named "viewer" made owner must not make every viewer an owner,
// and users named "owner" or "admin" gain nothing by their name.
func TestUserNamedLikeRole(t *testing.T) {
	db, e := setup(t, []string{"olga", "vera", "viewer", "owner", "admin", "root"}, []string{"shop", "pay"})
	must(t, e.SetAdmin(ctx, boss, "root", true))
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))
	must(t, e.Grant(ctx, boss, "vera", "shop", rbac.RoleViewer))
	must(t, e.Grant(ctx, boss, "viewer", "shop", rbac.RoleOwner))
	must(t, e.Grant(ctx, boss, "owner", "pay", rbac.RoleViewer))
	must(t, e.Grant(ctx, boss, "admin", "pay", rbac.RoleViewer))
	fresh, err := rbac.New(ctx, db)
	must(t, err)
	for name, enf := range map[string]*rbac.Enforcer{"changed": e, "loaded": fresh} {
		if enf.Can("vera", "shop", rbac.ActionEdit) || enf.Can("vera", "shop", rbac.ActionManage) {
			t.Errorf("%s: the viewer vera became an owner because a user is named \"viewer\"", name)
		}
		if !enf.Can("viewer", "shop", rbac.ActionManage) || !enf.Can("vera", "shop", rbac.ActionView) {
			t.Errorf("%s: granted roles missing", name)
		}
		if enf.Can("owner", "pay", rbac.ActionEdit) || enf.Can("owner", "shop", rbac.ActionView) {
			t.Errorf("%s: the user \"owner\" holds the owner role", name)
		}
		if enf.IsAdmin("admin") || enf.Can("admin", "shop", rbac.ActionView) || enf.Visible("admin") == nil {
			t.Errorf("%s: the user \"admin\" holds the admin role", name)
		}
		if got := enf.Apps("vera"); !maps.Equal(got, map[string]rbac.Role{"shop": rbac.RoleViewer}) {
			t.Errorf("%s: Apps(vera) = %v", name, got)
		}
	}
	ms, err := e.Members(ctx, "shop")
	must(t, err)
	if fmt.Sprint(ms) != "[{olga owner} {vera viewer} {viewer owner}]" {
		t.Fatalf("Members(shop) = %v", ms)
	}
	// Rows that bypass the typed subjects (a role given a role, a bare
	// name) are ignored, not obeyed.
	for _, r := range [][]string{
		{rbac.RoleSubject("viewer"), rbac.RoleSubject("owner"), "shop"},
		{"vera", "owner", "shop"},
		{rbac.UserSubject("vera"), "owner", "shop"},
	} {
		_, err := db.ExecContext(ctx, `INSERT INTO casbin_rule (ptype, v0, v1, v2) VALUES ('g', ?, ?, ?)`, r[0], r[1], r[2])
		must(t, err)
	}
	must(t, e.Reload(ctx))
	if e.Can("vera", "shop", rbac.ActionEdit) || e.Apps("vera")["shop"] != rbac.RoleViewer {
		t.Fatal("untyped or role-to-role rows were obeyed")
	}
	if ms, err := e.Members(ctx, "shop"); err != nil || len(ms) != 3 {
		t.Fatalf("Members(shop) with stray rows = %v, %v", ms, err)
	}
}

// TestMigrationTypesSubjects: rules stored before subjects were typed are
// rewritten by the migration and mean what they meant.
func TestMigrationTypesSubjects(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	must(t, migrations.To(dsn, 1))
	db, err := database.Open(ctx, dsn, database.Options{})
	must(t, err)
	defer db.Close()
	addUsers(t, db, "olga", "vera", "viewer", "root")
	addApp(t, db, "shop")
	for _, r := range [][]string{
		{"p", "admin", "*", ""}, {"p", "owner", "view", ""}, {"p", "owner", "edit", ""},
		{"p", "owner", "manage", ""}, {"p", "viewer", "view", ""},
		{"g", "root", "admin", "*"}, {"g", "olga", "owner", "shop"},
		{"g", "vera", "viewer", "shop"}, {"g", "viewer", "owner", "shop"},
	} {
		_, err := db.ExecContext(ctx, `INSERT INTO casbin_rule (ptype, v0, v1, v2) VALUES (?, ?, ?, ?)`, r[0], r[1], r[2], r[3])
		must(t, err)
	}
	var rev0 int64
	must(t, db.GetContext(ctx, &rev0, `SELECT revision FROM policy_revision`))
	must(t, migrations.Up(dsn))
	var rev1 int64
	must(t, db.GetContext(ctx, &rev1, `SELECT revision FROM policy_revision`))
	if rev1 <= rev0 {
		t.Fatal("the migration did not bump the policy revision")
	}
	var g []string
	must(t, db.SelectContext(ctx, &g, `SELECT CONCAT(v0, ' ', v1, ' ', v2) FROM casbin_rule WHERE ptype = 'g' ORDER BY 1`))
	want := []string{"user:olga role:owner shop", "user:root role:admin *", "user:vera role:viewer shop", "user:viewer role:owner shop"}
	if !slices.Equal(g, want) {
		t.Fatalf("migrated assignments = %q, want %q", g, want)
	}
	e, err := rbac.New(ctx, db)
	must(t, err)
	if !e.IsAdmin("root") || !e.Can("olga", "shop", rbac.ActionManage) || !e.Can("viewer", "shop", rbac.ActionEdit) ||
		!e.Can("vera", "shop", rbac.ActionView) || e.Can("vera", "shop", rbac.ActionEdit) {
		t.Fatal("migrated policy means something else")
	}
	// And back: the down migration restores the untyped rows.
	must(t, migrations.To(dsn, 1))
	g = nil
	must(t, db.SelectContext(ctx, &g, `SELECT CONCAT(v0, ' ', v1, ' ', v2) FROM casbin_rule WHERE ptype = 'g' ORDER BY 1`))
	if !slices.Equal(g, []string{"olga owner shop", "root admin *", "vera viewer shop", "viewer owner shop"}) {
		t.Fatalf("assignments after down = %q", g)
	}
}

func TestRulesStoredOnce(t *testing.T) {
	db, _ := setup(t, nil, nil)
	// Extra or changed rules in the table are replaced on start-up.
	_, err := db.ExecContext(ctx, `INSERT INTO casbin_rule (ptype, v0, v1) VALUES ('p', 'viewer', 'edit')`)
	must(t, err)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := rbac.New(ctx, db); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var rules []string
	must(t, db.SelectContext(ctx, &rules, `SELECT CONCAT(v0, ' ', v1) FROM casbin_rule WHERE ptype = 'p' ORDER BY 1`))
	want := []string{"role:admin *", "role:owner edit", "role:owner manage", "role:owner view", "role:viewer view"}
	if !slices.Equal(rules, want) {
		t.Fatalf("stored rules = %q, want %q", rules, want)
	}
}

// TestConcurrentUse runs checks while roles change and reloads run; under
// -race it proves the enforcer safe for concurrent use.
func TestConcurrentUse(t *testing.T) {
	users := []string{"u0", "u1", "u2", "u3"}
	_, e := setup(t, append(users, "olga"), []string{"shop"})
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = e.Run(runCtx) }()

	var wg sync.WaitGroup
	deadline := time.Now().Add(500 * time.Millisecond)
	for i := range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				u := users[i]
				_ = e.Can(u, "shop", rbac.ActionView)
				_ = e.Apps(u)
				_ = e.Visible(u)
				_ = e.CanSeeBucket(u, "shop", []string{"shop"})
				if !e.Can("olga", "shop", rbac.ActionManage) {
					t.Error("owner lost the manage action during concurrent changes")
					return
				}
			}
		})
	}
	for _, u := range users {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := e.Grant(ctx, boss, u, "shop", rbac.RoleViewer); err != nil {
					t.Error(err)
					return
				}
				if err := e.Revoke(ctx, boss, u, "shop"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for time.Now().Before(deadline) {
			if err := e.Reload(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	must(t, e.Reload(ctx))
	for _, u := range users {
		if e.Can(u, "shop", rbac.ActionView) {
			t.Errorf("%s still a member after its last revoke", u)
		}
	}
}

// BenchmarkCan measures two checks per op, one allowed and one denied,
// with 1000 role assignments loaded.
func BenchmarkCan(b *testing.B) {
	db := testenv.MySQL(b)
	now := time.Now().UTC()
	e, err := rbac.New(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	// 1000 users with a role on one of 200 apps each.
	for i := range 200 {
		if _, err := db.ExecContext(ctx, `INSERT INTO apps (name, created_by, created_at, updated_by, updated_at)
			VALUES (?, 'boss', ?, 'boss', ?)`, fmt.Sprintf("app%d", i), now, now); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		if _, err := db.ExecContext(ctx, `INSERT INTO casbin_rule (ptype, v0, v1, v2) VALUES ('g', ?, 'role:viewer', ?)`,
			fmt.Sprintf("user:user%d", i), fmt.Sprintf("app%d", i%200)); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.Reload(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !e.Can("user7", "app7", rbac.ActionView) || e.Can("user7", "app8", rbac.ActionView) {
				b.Fatal("wrong answer")
			}
		}
	})
}
