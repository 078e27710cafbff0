package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
)

func TestAppRegisterAndMembers(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.user("vera", false)
	b := e.browser()
	b.signIn(olga)

	wantBody(t, "empty list", b.get("/apps"), "not a member of any app")
	r := b.post("/apps", url.Values{"name": {"Not Valid"}, "description": {"x"}})
	wantStatus(t, "invalid app", r, http.StatusUnprocessableEntity)
	wantBody(t, "invalid app", r, `id="name-error"`, `aria-describedby="name-hint name-error"`, `value="Not Valid"`)

	r = b.post("/apps", url.Values{"name": {"checkout"}, "description": {"Checkout service"}})
	wantStatus(t, "register", r, http.StatusSeeOther)
	r = b.get(r.location)
	wantBody(t, "app page", r, "App checkout registered", "Checkout service", "olga", "Grant role")

	r = b.post("/apps", url.Values{"name": {"checkout"}})
	wantStatus(t, "duplicate", r, http.StatusConflict)
	wantBody(t, "duplicate", r, "already exists")

	r = b.post("/apps/checkout/members", url.Values{"user": {"ghost"}, "role": {"viewer"}})
	wantStatus(t, "unknown user", r, http.StatusUnprocessableEntity)
	wantBody(t, "unknown user", r, `id="user-error"`)

	r = b.post("/apps/checkout/members", url.Values{"user": {"vera"}, "role": {"viewer"}})
	wantStatus(t, "grant", r, http.StatusSeeOther)
	wantBody(t, "members", b.get("/apps/checkout"), "vera is now viewer of checkout.", "Remove vera from checkout")

	// The rules (the creator owns, the last owner stays, changes are
	// audited) are the application layer's (internal/manage tests); here:
	// how a refusal is shown.
	r = b.post("/apps/checkout/members/olga/revoke", nil)
	wantStatus(t, "last owner", r, http.StatusConflict)
	wantBody(t, "last owner", r, `role="alert"`, "owner")

	r = b.post("/apps/checkout/members/vera/revoke", nil)
	wantStatus(t, "revoke", r, http.StatusSeeOther)
}

func TestAuditLogPage(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.user("stan", false)
	e.app("alpha", "olga")
	e.app("beta", "stan")
	e.bucket("alpha-api", "alpha")
	e.bucket("alpha-web", "alpha")
	e.bucket("beta-api", "beta")
	b := e.browser()
	b.signIn(olga)

	r := b.post("/buckets/alpha-api", url.Values{"max_permits": {"42"}, "rate": {"1/s"}, "allowed_apps": {"alpha"}, "version": {"1"}})
	wantStatus(t, "edit", r, http.StatusSeeOther)

	r = b.get("/audit")
	wantStatus(t, "audit", r, http.StatusOK)
	// The change is a field-by-field diff, the raw JSON one click away.
	wantBody(t, "audit", r, "bucket.update", "olga", `<span class="field mono">max_permits</span>`,
		`<del class="was mono">10</del>`, `<ins class="now mono">42</ins>`, "raw JSON", "&#34;max_permits&#34;: 42", "alpha-web")

	if strings.Contains(r.body, "beta-api") {
		t.Fatal("olga sees the audit trail of an app she has no role on")
	}
	r = b.get("/audit?bucket=alpha-api")
	if strings.Contains(r.body, "alpha-web") || !strings.Contains(r.body, "alpha-api") {
		t.Fatal("bucket filter does not filter")
	}
	// Part of a name matches; LIKE wildcards are plain characters.
	r = b.get("/audit?bucket=a-w")
	if strings.Contains(r.body, "alpha-api") || !strings.Contains(r.body, "alpha-web") || !strings.Contains(r.body, "1 entry") {
		t.Fatal("a part of a bucket name does not filter")
	}
	r = b.get("/audit?bucket=alpha_")
	wantBody(t, "wildcard filter", r, "No entries.", "0 entries")
	// A deleted bucket is found by its whole name.
	web, err := e.bkts.Get(context.Background(), "alpha-web")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.bkts.Delete(context.Background(), e.system, "alpha-web", buckets.Expect{ID: web.ID, OwnerApp: "alpha", Version: web.Version}); err != nil {
		t.Fatal(err)
	}
	wantBody(t, "deleted bucket", b.get("/audit?bucket=alpha-web"), "bucket.delete", "bucket.create", "2 entries")
	r = b.get("/audit?app=beta")
	if strings.Contains(r.body, "beta-api") {
		t.Fatal("filtering by a foreign app reveals its entries")
	}
	admin := e.browser()
	admin.signIn(e.user("ada", true))
	wantBody(t, "admin audit", admin.get("/audit?app=beta"), "beta-api")
}

func TestUsersAdmin(t *testing.T) {
	e := newEnv(t)
	ada := e.user("ada", true)
	b := e.browser()
	b.signIn(ada)

	r := b.post("/users", url.Values{"username": {"x y"}, "password": {"short"}})
	wantStatus(t, "invalid user", r, http.StatusUnprocessableEntity)
	wantBody(t, "invalid user", r, `id="username-error"`, `id="password-error"`)

	r = b.post("/users", url.Values{"username": {"bob"}, "password": {testPassword}, "admin": {"true"}})
	wantStatus(t, "create user", r, http.StatusSeeOther)
	wantBody(t, "users", b.get("/users"), "User bob created.", "bob", "Remove admin")

	bob, err := e.acc.UserByName(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	bb := e.browser()
	bb.signIn(bob)
	wantStatus(t, "bob signed in", bb.get("/users"), http.StatusOK)

	wantStatus(t, "remove admin", b.post("/users/bob/admin", url.Values{"admin": {"false"}}), http.StatusSeeOther)
	wantStatus(t, "bob no longer admin", bb.get("/users"), http.StatusForbidden)

	wantStatus(t, "disable", b.post("/users/bob/disable", nil), http.StatusSeeOther)
	r = bb.get("/buckets")
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/login") {
		t.Fatalf("a disabled user's session still works: %d %q", r.status, r.location)
	}
	wantStatus(t, "enable", b.post("/users/bob/enable", nil), http.StatusSeeOther)

	// An admin cannot lock themselves out from here.
	wantStatus(t, "disable self", b.post("/users/ada/disable", nil), http.StatusUnprocessableEntity)
	wantStatus(t, "reset password", b.post("/users/bob/password", url.Values{"password": {"a brand new password"}}), http.StatusSeeOther)
	if _, err := e.acc.Authenticate(context.Background(), "bob", "a brand new password"); err != nil {
		t.Fatalf("new password does not work: %v", err)
	}
}

func TestAPITokens(t *testing.T) {
	e := newEnv(t)
	u := e.user("olga", false)
	other := e.user("stan", false)
	b := e.browser()
	b.signIn(u)

	r := b.post("/tokens", url.Values{"name": {""}})
	wantStatus(t, "unnamed token", r, http.StatusUnprocessableEntity)
	wantBody(t, "unnamed token", r, `id="name-error"`)

	r = b.post("/tokens", url.Values{"name": {"ci-deploy"}})
	wantStatus(t, "create token", r, http.StatusOK)
	secret := regexp.MustCompile(`slc_[A-Za-z0-9_-]+`).FindString(r.body)
	if secret == "" {
		t.Fatalf("new token not shown\n%s", excerpt(r.body))
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatal("the page with a secret may be cached")
	}
	if _, _, err := e.acc.AuthenticateToken(context.Background(), secret); err != nil {
		t.Fatalf("shown token does not work: %v", err)
	}
	r = b.get("/tokens")
	wantBody(t, "list", r, "ci-deploy", secret[:12])
	if strings.Contains(r.body, secret) {
		t.Fatal("the secret is shown again")
	}

	// Another user cannot revoke it; the attempt looks like a missing token.
	tokens, _ := e.acc.Tokens(context.Background(), u.ID)
	id := tokens[0].ID
	ob := e.browser()
	ob.signIn(other)
	// That the refusal is audited and a revoked token refused is the
	// application layer's (internal/manage tests).
	wantStatus(t, "foreign revoke", ob.post("/tokens/"+itoa(id)+"/revoke", nil), http.StatusNotFound)
	wantStatus(t, "revoke", b.post("/tokens/"+itoa(id)+"/revoke", nil), http.StatusSeeOther)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// BenchmarkBucketList measures the most used page: a signed-in user's
// first page of 25 buckets, with the session check, the permission filter,
// two queries and the template.
func BenchmarkBucketList(b *testing.B) {
	e := newEnv(b)
	u := e.user("olga", false)
	e.app("alpha", "olga")
	for i := 0; i < 40; i++ {
		e.bucket("bench-"+itoa(int64(i)), "alpha")
	}
	br := e.browser()
	br.signIn(u)
	for b.Loop() {
		if r := br.get("/buckets"); r.status != http.StatusOK {
			b.Fatalf("status %d", r.status)
		}
	}
}
