package console

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/sso"
	"github.com/sluicehq/sluice/internal/testenv"
)

// ssoEnv is a console whose sign-in goes through a provider the test runs
// (testOP): members of sluice-admins are admins, of shop-owners owners of
// the app shop, of search-viewers viewers of the app search.
func ssoEnv(t *testing.T, localOff bool) (*env, *testOP) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	callback := "http://" + ln.Addr().String() + sso.CallbackPath
	o := newTestOP(t, "sluice-console", "console-secret")
	o.setRedirect(callback)
	appRoles, err := sso.ParseAppRoles([]string{"shop-owners=shop:owner", "search-viewers=search:viewer"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := sso.NewProvider(sso.Config{Issuer: o.issuer, ClientID: "sluice-console", ClientSecret: "console-secret",
		RedirectURL: callback, Scopes: []string{"profile", "email"},
		Roles: sso.Mapping{AdminGroups: []string{"sluice-admins"}, Apps: appRoles}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, testenv.MySQL(t), func(s *setup) {
		s.manage.SSO, s.manage.LocalSignInOff, s.listener = p, localOff, ln
	})
	return e, o
}

// ssoSignIn signs in through the provider as user, from the console's
// sign-in page.
func (tb *tab) ssoSignIn(user string) {
	tb.t.Helper()
	tb.open("/login")
	tb.submit("#sso")
	tb.wantText("h1", "Test provider")
	tb.fill("op-user", user)
	tb.submit("#op-submit")
}

// auditDetails returns the details of the audit rows with action, oldest
// first.
func (e *env) auditDetails(action string) []string {
	e.t.Helper()
	var out []string
	if err := e.db.Select(&out, `SELECT detail FROM audit_log WHERE action = ? ORDER BY id`, action); err != nil {
		e.t.Fatalf("read audit rows: %v", err)
	}
	return out
}

// wantAudited fails unless the last row of action mentions each of parts.
func (e *env) wantAudited(t *testing.T, action string, parts ...string) {
	t.Helper()
	rows := e.auditDetails(action)
	if len(rows) == 0 {
		t.Fatalf("no %s row in the audit log", action)
	}
	last := rows[len(rows)-1]
	for _, p := range parts {
		if !strings.Contains(last, p) {
			t.Fatalf("the last %s row reads %q, want it to mention %q", action, last, p)
		}
	}
}

// TestBrowserSSO signs in through a real OpenID Connect provider (zitadel's
// op package, run by the test) in Chromium: the account is created at the
// first sign-in with the roles its groups give, a group removed at the
// provider removes its role at the next sign-in while a role granted in
// the console stays, and a replayed callback, an ID token for another
// client and an expired ID token are refused and audited.
func TestBrowserSSO(t *testing.T) {
	e, o := ssoEnv(t, false)
	e.user("olga", true) // a local admin: ada is never the last one
	e.app("shop", "olga")
	e.app("search", "olga")
	e.app("billing", "olga")
	o.setUser("ada", "sub-ada-1", "sluice-admins", "shop-owners", "search-viewers")
	o.setUser("max", "sub-max-1", "search-viewers")
	browser := startBrowser(t)

	t.Run("sign in with the roles the groups give", func(t *testing.T) {
		ada := newTab(t, browser, e.srv.URL)
		ada.open("/login")
		ada.wantText("#sso", "Sign in with single sign-on")
		if ada.count("#password") != 1 {
			t.Fatal("the password form is gone while local sign-in is on")
		}
		ada.shot(t, "sign-in-page")
		ada.ssoSignIn("ada")
		ada.wantText(".who", "ada")
		ada.wantText("h1", "Buckets")
		if !e.enf.IsAdmin("ada") {
			t.Fatal("ada is not an admin; her groups include sluice-admins")
		}
		if got := e.enf.Apps("ada"); got["shop"] != rbac.RoleOwner || got["search"] != rbac.RoleViewer || len(got) != 2 {
			t.Fatalf("ada's roles: %v, want owner of shop and viewer of search", got)
		}
		ada.open("/users")
		ada.wantText("h1", "Users")
		ada.wantText("table", "ada", "olga")
		ada.open("/apps/search")
		ada.wantText("table", "ada", "viewer")
		ada.open("/account")
		ada.wantText("#no-password", "single sign-on")
		if ada.count("form[action='/account/password']") != 0 {
			t.Fatal("an account without a password is offered to change it")
		}
		ada.shot(t, "signed-in")
		e.wantAudited(t, "login.success", "single sign-on", "sluice-admins", "shop-owners", "account created")
		if e.auditCount("member.grant") < 2 || e.auditCount("user.admin") < 1 {
			t.Fatal("the roles given by the groups are not audited")
		}

		t.Run("replayed callback", func(t *testing.T) {
			before := e.auditCount("login.failure")
			ada.open(strings.TrimPrefix(o.lastCallback(), e.srv.URL))
			ada.wantText("#login-error", "Single sign-on did not complete")
			ada.shot(t, "replayed")
			if e.auditCount("login.failure") != before+1 {
				t.Fatal("the replayed callback is not audited")
			}
			e.wantAudited(t, "login.failure", "unknown, used or expired state")
		})

		t.Run("sign out ends the session on the server", func(t *testing.T) {
			ada.ssoSignIn("ada")
			ada.wantText(".who", "ada")
			var live int
			if err := e.db.Get(&live, `SELECT COUNT(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.username = 'ada'`); err != nil || live != 1 {
				t.Fatalf("ada's live sessions: %d %v, want 1 (the replayed callback must not have made one)", live, err)
			}
			ada.submit("form[action='/logout'] button[type=submit]")
			if err := e.db.Get(&live, `SELECT COUNT(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.username = 'ada'`); err != nil || live != 0 {
				t.Fatalf("ada's sessions after signing out: %d %v, want 0", live, err)
			}
			ada.open("/buckets")
			ada.wantText("h1", "Sign in")
		})
	})

	t.Run("a removed group removes its role at the next sign-in", func(t *testing.T) {
		max := newTab(t, browser, e.srv.URL)
		max.ssoSignIn("max")
		max.wantText(".who", "max")
		if got := e.enf.Apps("max"); got["search"] != rbac.RoleViewer {
			t.Fatalf("max's roles: %v, want viewer of search", got)
		}
		// An owner grants max a role in the console: it is not the
		// provider's to take away.
		e.grant("max", "billing", rbac.RoleViewer)
		o.setUser("max", "sub-max-1") // no group any more
		max.submit("form[action='/logout'] button[type=submit]")
		max.ssoSignIn("max")
		max.wantText(".who", "max")
		got := e.enf.Apps("max")
		if _, still := got["search"]; still {
			t.Fatalf("max's roles: %v; the search role went with the group", got)
		}
		if got["billing"] != rbac.RoleViewer {
			t.Fatalf("max's roles: %v; the role granted in the console must stay", got)
		}
		max.open("/apps/search")
		max.wantText("h1", "Not")
		max.shot(t, "group-removed")
		var revoked int
		if err := e.db.Get(&revoked, `SELECT COUNT(*) FROM audit_log WHERE action = 'member.revoke' AND object_name = 'max'
			AND app = 'search' AND detail LIKE '%identity provider%'`); err != nil || revoked != 1 {
			t.Fatalf("revocations of max on search audited: %d %v, want 1", revoked, err)
		}

		t.Run("and an admin group likewise", func(t *testing.T) {
			o.setUser("ada", "sub-ada-1", "shop-owners")
			ada := newTab(t, browser, e.srv.URL)
			ada.ssoSignIn("ada")
			ada.wantText(".who", "ada")
			if e.enf.IsAdmin("ada") {
				t.Fatal("ada is still an admin after leaving sluice-admins")
			}
			ada.open("/users")
			ada.wantText("h1", "Not allowed")
		})
	})

	t.Run("an ID token for another client is refused", func(t *testing.T) {
		o.setIssueFor("another-client")
		defer o.setIssueFor("")
		mallory := newTab(t, browser, e.srv.URL)
		mallory.ssoSignIn("max")
		mallory.wantText("#login-error", "Single sign-on did not complete")
		mallory.shot(t, "audience")
		e.wantAudited(t, "login.failure", "audience")
		mallory.open("/buckets")
		mallory.wantText("h1", "Sign in")
	})

	t.Run("an expired ID token is refused", func(t *testing.T) {
		o.setLifetime(-time.Hour)
		defer o.setLifetime(5 * time.Minute)
		late := newTab(t, browser, e.srv.URL)
		late.ssoSignIn("max")
		late.wantText("#login-error", "Single sign-on did not complete")
		e.wantAudited(t, "login.failure", "expired")
		late.open("/buckets")
		late.wantText("h1", "Sign in")
	})

}

// TestSSOStateBoundToBrowser: a callback whose state was issued to another
// browser (no binding cookie) is refused and audited, and the state is
// spent: the browser it was issued to cannot use it afterwards either.
func TestSSOStateBoundToBrowser(t *testing.T) {
	e, o := ssoEnv(t, false)
	o.setUser("max", "sub-max")
	victim := e.browser()
	r := victim.get("/login/sso?next=/buckets")
	wantStatus(t, "begin", r, http.StatusSeeOther)
	if victim.cookie(ssoCookie) != "" {
		t.Fatal("the binding cookie is sent to every path; it belongs to the callback only")
	}
	callback := o.walk(t, r.location, "max")
	thief := e.browser()
	r = thief.get(strings.TrimPrefix(callback, e.srv.URL))
	wantStatus(t, "the callback in another browser", r, http.StatusUnauthorized)
	if thief.cookie(sessionCookie) != "" {
		t.Fatal("the stolen callback gave a session")
	}
	e.wantAudited(t, "login.failure", "another browser")
	r = victim.get(strings.TrimPrefix(callback, e.srv.URL))
	wantStatus(t, "the spent state", r, http.StatusUnauthorized)
	e.wantAudited(t, "login.failure", "unknown, used or expired state")
}

// TestBrowserSSOOnly: with password sign-in turned off, the sign-in page
// shows only the provider's button, a posted password is refused on the
// server (and audited) even for a valid local account, and single sign-on
// works.
func TestBrowserSSOOnly(t *testing.T) {
	e, o := ssoEnv(t, true)
	e.user("olga", true)
	e.app("search", "olga")
	o.setUser("vera", "sub-vera", "search-viewers")
	browser := startBrowser(t)
	vera := newTab(t, browser, e.srv.URL)
	vera.open("/login")
	vera.wantText("#sso", "Sign in with single sign-on")
	if vera.count("#password") != 0 || vera.count("form[action='/login']") != 0 {
		t.Fatal("the password form is offered while local sign-in is off")
	}
	vera.shot(t, "sso-only")

	b := e.browser()
	before := e.auditCount("login.failure")
	r := b.post("/login", url.Values{"username": {"olga"}, "password": {testPassword}})
	wantStatus(t, "a password sign-in while they are off", r, http.StatusForbidden)
	wantBody(t, "the refusal", r, "turned off")
	if b.cookie(sessionCookie) != "" {
		t.Fatal("a password sign-in gave a session while they are off")
	}
	if e.auditCount("login.failure") != before+1 {
		t.Fatal("the refused password sign-in is not audited")
	}
	e.wantAudited(t, "login.failure", "turned off")

	vera.ssoSignIn("vera")
	vera.wantText(".who", "vera")
	if got := e.enf.Apps("vera"); got["search"] != rbac.RoleViewer {
		t.Fatalf("vera's roles: %v, want viewer of search", got)
	}
}
