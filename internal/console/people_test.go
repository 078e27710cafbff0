package console

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/rbac"
)

// TestRemoveMemberAsksFirst: the Remove link of the members table leads to
// a confirmation page that changes nothing; only its form removes, then
// redirects. The only owner's page says why they cannot be removed and
// offers no form; a viewer cannot reach the page.
func TestRemoveMemberAsksFirst(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	vera := e.user("vera", false)
	e.app("shop", "olga")
	e.grant("vera", "shop", rbac.RoleViewer)
	b := e.browser()
	b.signIn(olga)

	r := b.get("/apps/shop")
	wantBody(t, "members", r, `href="/apps/shop/members/vera/revoke"`)
	if strings.Contains(r.body, `method="post" action="/apps/shop/members/vera/revoke"`) {
		t.Fatal("the members table removes without asking")
	}
	r = b.get("/apps/shop/members/vera/revoke")
	wantStatus(t, "confirm", r, http.StatusOK)
	wantBody(t, "confirm", r, "Remove vera from shop?", "vera is viewer of shop", manage.RoleDescription("viewer"),
		`<form method="post" action="/apps/shop/members/vera/revoke">`, "Keep vera")
	if e.enf.Apps("vera")["shop"] != rbac.RoleViewer {
		t.Fatal("opening the confirmation removed the member")
	}

	r = b.get("/apps/shop/members/olga/revoke")
	wantStatus(t, "confirm the only owner", r, http.StatusOK)
	wantBody(t, "confirm the only owner", r, "the only owner of shop")
	if strings.Contains(r.body, `action="/apps/shop/members/olga/revoke"`) {
		t.Fatal("the only owner's removal is offered")
	}

	wantStatus(t, "no such member", b.get("/apps/shop/members/ghost/revoke"), http.StatusNotFound)

	v := e.browser()
	v.signIn(vera)
	denied := e.auditCount("access.denied")
	wantStatus(t, "viewer asks", v.get("/apps/shop/members/olga/revoke"), http.StatusForbidden)
	if e.auditCount("access.denied") <= denied {
		t.Fatal("a viewer's attempt is not audited")
	}

	r = b.post("/apps/shop/members/vera/revoke", nil)
	wantStatus(t, "remove", r, http.StatusSeeOther)
	if r.location != "/apps/shop" {
		t.Fatalf("remove redirects to %q", r.location)
	}
	if _, ok := e.enf.Apps("vera")["shop"]; ok {
		t.Fatal("vera still has a role")
	}
	wantBody(t, "after", b.get(r.location), "vera no longer has a role on shop.")
}

// TestRoleDescriptions: the role choice and the role shown say what each
// role lets its holder do, in the permission model's words.
func TestRoleDescriptions(t *testing.T) {
	for _, r := range []string{"owner", "viewer", "admin"} {
		if manage.RoleDescription(r) == "" {
			t.Fatalf("role %s has no description", r)
		}
	}
	if manage.RoleDescription("root") != "" {
		t.Fatal("a made-up role has a description")
	}
	e := newEnv(t)
	olga := e.user("olga", false)
	ada := e.user("ada", true)
	e.app("shop", "olga")
	b := e.browser()
	b.signIn(olga)
	r := b.get("/apps/shop")
	wantBody(t, "owner's app page", r, `id="role-help"`, `aria-describedby="role-help"`,
		manage.RoleDescription("owner"), manage.RoleDescription("viewer"), manage.RoleDescription("admin"),
		"<strong>owner</strong>: "+manage.RoleDescription("owner"))
	a := e.browser()
	a.signIn(ada)
	wantBody(t, "admin's app page", a.get("/apps/shop"), "<strong>admin</strong>: "+manage.RoleDescription("admin"))
	wantBody(t, "users page", a.get("/users"), `id="admin-hint"`, manage.RoleDescription("admin"))
}

// TestViewerSeesReadOnlyHint: a viewer is told why the app and bucket
// pages offer no changes, and whom to ask; an owner sees no such hint.
func TestViewerSeesReadOnlyHint(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	vera := e.user("vera", false)
	sam := e.user("sam", false)
	e.app("shop", "olga")
	e.app("search", "sam")
	e.grant("vera", "shop", rbac.RoleViewer)
	e.bucket("shop-api", "shop", "shop", "search")

	v := e.browser()
	v.signIn(vera)
	r := v.get("/apps/shop")
	wantBody(t, "viewer's app page", r, `id="readonly-hint"`, "You are <strong>viewer</strong> of shop",
		manage.RoleDescription("viewer"), "ask olga")
	r = v.get("/buckets/shop-api")
	wantBody(t, "viewer's bucket page", r, `id="readonly-hint"`, "You are <strong>viewer</strong> of shop",
		`Only owners of <a href="/apps/shop">shop</a> and admins can edit or delete it.`)

	// Sam sees the bucket through an allowed app, with no role on shop.
	s := e.browser()
	s.signIn(sam)
	wantBody(t, "allowed app's bucket page", s.get("/buckets/shop-api"), `id="readonly-hint"`,
		"because an app you belong to may take tokens from it")

	o := e.browser()
	o.signIn(olga)
	for _, p := range []string{"/apps/shop", "/buckets/shop-api"} {
		if r := o.get(p); strings.Contains(r.body, `id="readonly-hint"`) {
			t.Fatalf("the owner is shown the read-only hint on %s", p)
		}
	}
}
