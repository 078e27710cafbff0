package rbac_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/rbac"
)

// TestIdentityRoles: the provider's groups grant and revoke only the roles
// the provider gave; roles set in the console stay, a console change takes
// a role over, and the last owner and the last admin keep their roles.
func TestIdentityRoles(t *testing.T) {
	db, e := setup(t, []string{"ada", "olga"}, []string{"shop", "search", "billing", "solo"})
	idp := audit.Actor{User: "ada", Via: "single sign-on"}
	apply := func(want rbac.IdentityRoles) []string {
		t.Helper()
		notes, err := e.ApplyIdentityRoles(ctx, idp, "ada", want)
		must(t, err)
		return notes
	}
	wantApps := func(want map[string]rbac.Role) {
		t.Helper()
		if got := e.Apps("ada"); !maps.Equal(got, want) {
			t.Fatalf("ada's roles: %v, want %v", got, want)
		}
	}
	must(t, e.Grant(ctx, boss, "olga", "shop", rbac.RoleOwner))
	must(t, e.Grant(ctx, boss, "olga", "search", rbac.RoleOwner))
	must(t, e.SetAdmin(ctx, boss, "olga", true))
	must(t, e.Grant(ctx, boss, "ada", "billing", rbac.RoleViewer)) // the console's

	apply(rbac.IdentityRoles{Admin: true, Apps: map[string]rbac.Role{"shop": rbac.RoleOwner, "search": rbac.RoleViewer,
		"billing": rbac.RoleOwner, "nowhere": rbac.RoleViewer}})
	wantApps(map[string]rbac.Role{"shop": rbac.RoleOwner, "search": rbac.RoleViewer, "billing": rbac.RoleViewer})
	if !e.IsAdmin("ada") {
		t.Fatal("the admin group did not make ada an admin")
	}

	// An owner changes the provider's role on search in the console: it is
	// the console's from now on and the groups no longer touch it.
	must(t, e.Grant(ctx, boss, "ada", "search", rbac.RoleOwner))
	apply(rbac.IdentityRoles{Admin: true, Apps: map[string]rbac.Role{"shop": rbac.RoleOwner}})
	wantApps(map[string]rbac.Role{"shop": rbac.RoleOwner, "search": rbac.RoleOwner, "billing": rbac.RoleViewer})
	apply(rbac.IdentityRoles{})
	wantApps(map[string]rbac.Role{"search": rbac.RoleOwner, "billing": rbac.RoleViewer})
	if e.IsAdmin("ada") {
		t.Fatal("ada is still an admin after leaving the admin group")
	}
	if a := lastAudit(t, db); a.Action != "user.admin" || !strings.Contains(a.Detail, "identity provider") {
		t.Fatalf("the last audit row is %+v, want the admin role taken", a)
	}

	// The provider makes ada the only owner of solo; the groups cannot
	// take the last owner away, nor the last admin.
	apply(rbac.IdentityRoles{Admin: true, Apps: map[string]rbac.Role{"solo": rbac.RoleOwner}})
	must(t, e.SetAdmin(ctx, boss, "olga", false)) // olga leaves: ada is the last admin
	notes := apply(rbac.IdentityRoles{})
	if got := e.Apps("ada"); got["solo"] != rbac.RoleOwner || !e.IsAdmin("ada") {
		t.Fatalf("ada's roles: %v, admin %v; the last owner and the last admin must stay", got, e.IsAdmin("ada"))
	}
	if text := strings.Join(notes, "; "); !strings.Contains(text, "last owner") || !strings.Contains(text, "last admin") {
		t.Fatalf("notes %q do not say why roles were kept", text)
	}
}
