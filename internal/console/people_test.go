package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/accounts"
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

// TestTokenExpiryForm: the token form offers an expiry (90 days unless
// chosen otherwise), takes a date, refuses a past or malformed one next to
// the field with the rest of the form kept, and the list says when each
// token expires.
func TestTokenExpiryForm(t *testing.T) {
	e := newEnv(t)
	u := e.user("olga", false)
	b := e.browser()
	b.signIn(u)
	ctx := context.Background()

	r := b.get("/tokens")
	wantBody(t, "form", r, `<select id="expires" name="expires"`, `<option value="90" selected>in 90 days</option>`,
		`<option value="never">never</option>`, `type="date" id="expires_at"`)

	before := time.Now()
	r = b.post("/tokens", url.Values{"name": {"ci"}, "expires": {"30"}})
	wantStatus(t, "30 days", r, http.StatusOK)
	wantBody(t, "30 days", r, "expires in 30 days")
	tokens, err := e.acc.Tokens(ctx, u.ID)
	if err != nil || len(tokens) != 1 || tokens[0].ExpiresAt == nil {
		t.Fatalf("token %+v %v, want one with an expiry", tokens, err)
	}
	if got := tokens[0].ExpiresAt.Sub(before); got < 30*24*time.Hour-time.Minute || got > 30*24*time.Hour+time.Minute {
		t.Fatalf("30 days gave an expiry %v away", got)
	}

	day := time.Now().UTC().AddDate(0, 0, 10).Format("2006-01-02")
	wantStatus(t, "date", b.post("/tokens", url.Values{"name": {"deploy"}, "expires": {"date"}, "expires_at": {day}}), http.StatusOK)
	wantStatus(t, "never", b.post("/tokens", url.Values{"name": {"forever"}, "expires": {"never"}}), http.StatusOK)
	tokens, _ = e.acc.Tokens(ctx, u.ID)
	byName := map[string]*accounts.Token{}
	for _, tk := range tokens {
		byName[tk.Name] = tk
	}
	if d := byName["deploy"]; d == nil || d.ExpiresAt == nil || d.ExpiresAt.UTC().Format("2006-01-02 15:04") != day+" 00:00" {
		t.Fatalf("a date expiry gave %+v", d)
	}
	if f := byName["forever"]; f == nil || f.ExpiresAt != nil {
		t.Fatalf("never gave %+v", f)
	}
	wantBody(t, "list", b.get("/tokens"), "never expires", `<time datetime="`+day+`T00:00:00Z"`)

	for _, c := range []struct {
		form  url.Values
		field string
		text  string
	}{
		{url.Values{"name": {"old"}, "expires": {"date"}, "expires_at": {"2001-01-01"}}, "expires_at", "must be in the future"},
		{url.Values{"name": {"bad"}, "expires": {"date"}, "expires_at": {"next week"}}, "expires_at", "must be a date like"},
		{url.Values{"name": {"none"}, "expires": {"date"}}, "expires_at", "is required"},
		{url.Values{"name": {"odd"}, "expires": {"12"}}, "expires", "must be one of the listed choices"},
	} {
		r := b.post("/tokens", c.form)
		wantStatus(t, c.text, r, http.StatusUnprocessableEntity)
		wantBody(t, c.text, r, `id="`+c.field+`-error"`, c.text, `aria-invalid="true"`, `value="`+c.form.Get("name")+`"`)
	}
	if tokens, _ := e.acc.Tokens(ctx, u.ID); len(tokens) != 3 {
		t.Fatalf("%d tokens after refused forms, want 3", len(tokens))
	}
}
