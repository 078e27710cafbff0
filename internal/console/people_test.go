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
	wantBody(t, "list", b.get("/tokens"), "never expires", `<span title="`+day+` 00:00:00 UTC">expires in `)

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

// TestChangeOwnPassword: a signed-in user changes their password with the
// current one and the new one twice, under the rules of every password.
// Refusals come back inline and change nothing; a wrong current password
// is audited and counted like a failed sign-in, so that guessing is
// throttled. Success ends the user's other sessions, not this one, keeps
// their API tokens and is audited.
func TestChangeOwnPassword(t *testing.T) {
	e := newEnv(t)
	u := e.user("olga", false)
	ctx := context.Background()
	here, there := e.browser(), e.browser()
	here.signIn(u)
	there.signIn(u)
	secret, _, err := e.acc.CreateToken(ctx, e.system, u.ID, "ci", nil)
	if err != nil {
		t.Fatal(err)
	}
	const next = "a brand new passphrase"
	form := func(cur, n, rep string) url.Values {
		return url.Values{"current_password": {cur}, "new_password": {n}, "repeat_password": {rep}}
	}

	r := here.get("/account")
	wantStatus(t, "account page", r, http.StatusOK)
	wantBody(t, "account page", r, `action="/account/password"`, `autocomplete="current-password"`, `href="/account"`)

	for _, c := range []struct {
		form  url.Values
		field string
		text  string
	}{
		{form("", next, next), "current_password", "is required"},
		{form(testPassword, "short", "short"), "new_password", "at least 10 characters"},
		{form(testPassword, testPassword, testPassword), "new_password", "must differ from your current password"},
		{form(testPassword, next, next+"!"), "repeat_password", "does not match"},
	} {
		r := here.post("/account/password", c.form)
		wantStatus(t, c.text, r, http.StatusUnprocessableEntity)
		wantBody(t, c.text, r, `id="`+c.field+`-error"`, c.text, `aria-invalid="true"`)
		if strings.Contains(r.body, testPassword) || strings.Contains(r.body, next) {
			t.Fatalf("%s: a password is sent back in the page", c.text)
		}
	}
	if n := e.auditCount("user.password.failure"); n != 0 {
		t.Fatalf("form mistakes were audited as failed password checks (%d)", n)
	}

	r = here.post("/account/password", form("not my password", next, next))
	wantStatus(t, "wrong current", r, http.StatusUnprocessableEntity)
	wantBody(t, "wrong current", r, `id="current_password-error"`, "is not your current password")
	if e.auditCount("user.password.failure") != 1 {
		t.Fatal("a wrong current password is not audited")
	}
	if _, err := e.acc.Authenticate(ctx, "olga", testPassword); err != nil {
		t.Fatalf("the password changed after a refusal: %v", err)
	}

	r = here.post("/account/password", form(testPassword, next, next))
	wantStatus(t, "change", r, http.StatusSeeOther)
	if r.location != "/account" {
		t.Fatalf("change redirects to %q", r.location)
	}
	wantBody(t, "after", here.get("/account"), "Password changed. Your other sessions have ended")
	if r := there.get("/account"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/login") {
		t.Fatalf("the other session survived: %d %q", r.status, r.location)
	}
	if _, err := e.acc.Authenticate(ctx, "olga", next); err != nil {
		t.Fatalf("the new password does not work: %v", err)
	}
	if _, err := e.acc.Authenticate(ctx, "olga", testPassword); err == nil {
		t.Fatal("the old password still works")
	}
	if _, _, err := e.acc.AuthenticateToken(ctx, secret); err != nil {
		t.Fatalf("the API token stopped working: %v", err)
	}
	if e.auditCount("user.password") != 1 {
		t.Fatal("the change is not audited")
	}
}

// TestChangePasswordThrottled: wrong current passwords count against the
// sign-in throttle of the user name: after the allowance the form answers
// 429 without checking, and so does the sign-in page.
func TestChangePasswordThrottled(t *testing.T) {
	e := newEnv(t)
	u := e.user("olga", false)
	b := e.browser()
	b.signIn(u)
	wrong := url.Values{"current_password": {"a wrong guess"}, "new_password": {"a brand new passphrase"},
		"repeat_password": {"a brand new passphrase"}}
	var r response
	for i := 0; i < 20; i++ {
		if r = b.post("/account/password", wrong); r.status != http.StatusUnprocessableEntity {
			break
		}
	}
	wantStatus(t, "guessing", r, http.StatusTooManyRequests)
	wantBody(t, "guessing", r, `id="current_password-error"`, "too many wrong passwords")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	// Even the right password is not checked now.
	right := url.Values{"current_password": {testPassword}, "new_password": {"a brand new passphrase"},
		"repeat_password": {"a brand new passphrase"}}
	wantStatus(t, "right password while locked", b.post("/account/password", right), http.StatusTooManyRequests)
	login := e.browser().post("/login", url.Values{"username": {"olga"}, "password": {testPassword}})
	wantStatus(t, "sign-in while locked", login, http.StatusTooManyRequests)
}

// TestAllowedAppsPicker: the bucket form lists every app as a checkbox
// (teams allow other teams' apps), ticks the bucket's allowed apps, saves
// the ticked ones together with names typed under "other apps", and keeps
// an unknown typed name in its field with the error.
func TestAllowedAppsPicker(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.user("sam", false)
	e.app("shop", "olga")
	for _, a := range []string{"search", "mobile", "billing"} {
		e.app(a, "sam")
	}
	b := e.browser()
	b.signIn(olga)

	r := b.get("/buckets/new")
	for _, a := range []string{"billing", "mobile", "search", "shop"} {
		wantBody(t, "new form", r, `<li data-app="`+a+`"><label class="check"><input type="checkbox" name="allowed_apps" value="`+a+`">`)
	}
	wantBody(t, "new form", r, `data-picker-filter`, `id="allowed_apps_other" name="allowed_apps" value=""`)

	form := url.Values{"name": {"shop-api"}, "owner_app": {"shop"}, "max_permits": {"10"}, "rate": {"5/s"},
		"allowed_apps": {"search", "mobile", "ghost"}}
	r = b.post("/buckets", form)
	wantStatus(t, "unknown app", r, http.StatusUnprocessableEntity)
	wantBody(t, "unknown app", r, `id="allowed_apps-error"`, "ghost",
		`value="search" checked>`, `value="mobile" checked>`, `value="billing">`, `id="allowed_apps_other" name="allowed_apps" value="ghost"`)

	form["allowed_apps"] = []string{"search", "mobile", ""}
	wantStatus(t, "create", b.post("/buckets", form), http.StatusSeeOther)
	bk, err := e.bkts.Get(context.Background(), "shop-api")
	if err != nil || strings.Join(bk.AllowedApps, ",") != "mobile,search" {
		t.Fatalf("allowed apps %v (%v), want mobile and search", bk.AllowedApps, err)
	}

	r = b.get("/buckets/shop-api/edit")
	wantBody(t, "edit form", r, `value="mobile" checked>`, `value="search" checked>`, `value="billing">`)
	// Untick search, add billing by name: the old text form still works.
	wantStatus(t, "edit", b.post("/buckets/shop-api", url.Values{"max_permits": {"10"}, "rate": {"5/s"},
		"allowed_apps": {"mobile", "billing, shop"}, "version": {"1"}}), http.StatusSeeOther)
	bk, _ = e.bkts.Get(context.Background(), "shop-api")
	if strings.Join(bk.AllowedApps, ",") != "billing,mobile,shop" {
		t.Fatalf("allowed apps after edit %v", bk.AllowedApps)
	}

	// Without a bucket to edit or create, no app list is handed out.
	names, _, err := e.s.svc.AppChoices(context.Background(), manage.Caller{User: e.user("nobody", false)})
	if err != nil || names != nil {
		t.Fatalf("a user owning nothing gets app choices %v (%v)", names, err)
	}
}
