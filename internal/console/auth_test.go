package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/signin"
)

func TestSignInRotatesSessionAndSignOutEndsIt(t *testing.T) {
	e := newEnv(t)
	u := e.user("alice", false)
	b := e.browser()

	// A session id the browser already holds (planted, or left over) must
	// not survive the sign-in.
	old, err := e.acc.NewSession(context.Background(), u.ID, "127.0.0.1", "test")
	if err != nil {
		t.Fatal(err)
	}
	b.setCookie(sessionCookie, old)

	r := b.get("/login?next=/apps")
	wantStatus(t, "sign-in page", r, http.StatusOK)
	wantBody(t, "sign-in page", r, `<label for="username">`, `<label for="password">`, `name="next" value="/apps"`)

	r = b.post("/login", url.Values{"username": {"alice"}, "password": {testPassword}, "next": {"/apps"}})
	wantStatus(t, "sign in", r, http.StatusSeeOther)
	if r.location != "/apps" {
		t.Fatalf("sign in redirects to %q, want /apps", r.location)
	}
	cookie := ""
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			cookie = c.Raw
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
				t.Fatalf("session cookie lacks HttpOnly, SameSite=Lax or Path=/: %s", c.Raw)
			}
		}
	}
	if cookie == "" {
		t.Fatal("sign in set no session cookie")
	}
	current := b.cookie(sessionCookie)
	if current == "" || current == old {
		t.Fatalf("session id not rotated at sign-in: %q", current)
	}
	if _, _, err := e.acc.Session(context.Background(), old); err == nil {
		t.Fatal("the session held before sign-in still works")
	}
	wantStatus(t, "apps page", b.get("/apps"), http.StatusOK)
	if e.auditCount("login.success") != 1 {
		t.Fatal("sign-in not audited")
	}

	r = b.post("/logout", nil)
	wantStatus(t, "sign out", r, http.StatusSeeOther)
	if _, _, err := e.acc.Session(context.Background(), current); err == nil {
		t.Fatal("the session still works on the server after sign-out")
	}
	// Replaying the old cookie gets nothing.
	replay := e.browser()
	replay.setCookie(sessionCookie, current)
	r = replay.get("/buckets")
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/login") {
		t.Fatalf("replayed session after sign-out: status %d location %q", r.status, r.location)
	}
}

func TestSignInFailureIsAuditedAndGeneric(t *testing.T) {
	e := newEnv(t)
	e.user("alice", false)
	b := e.browser()
	for _, form := range []url.Values{
		{"username": {"alice"}, "password": {"not the password"}},
		{"username": {"nobody"}, "password": {testPassword}},
	} {
		r := b.post("/login", form)
		wantStatus(t, "wrong credentials", r, http.StatusUnauthorized)
		wantBody(t, "wrong credentials", r, "Wrong user name or password.")
		if b.cookie(sessionCookie) != "" {
			t.Fatal("a failed sign-in set a session cookie")
		}
	}
	if n := e.auditCount("login.failure"); n != 2 {
		t.Fatalf("%d sign-in failures audited, want 2", n)
	}
}

func TestSignInThrottle(t *testing.T) {
	t.Run("per user, and a known device passes", func(t *testing.T) {
		e := newEnv(t)
		e.user("alice", false)
		// alice's own browser signed in before and keeps its device cookie.
		mine := e.browser()
		wantStatus(t, "sign in", mine.post("/login", url.Values{"username": {"alice"}, "password": {testPassword}}), http.StatusSeeOther)
		if mine.cookie(deviceCookie) == "" {
			t.Fatal("no device cookie after a sign-in")
		}
		// Each guess comes from its own address (through a trusted
		// proxy), so only the user name's allowance runs dry.
		if err := e.rt.SetTrustedProxies([]string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		from := func(i int) map[string]string {
			return map[string]string{"X-Forwarded-For": "10.0.0." + strconv.Itoa(i), "Sec-Fetch-Site": "same-origin"}
		}
		for i := 1; i <= signin.DefaultPolicy.User.Failures; i++ {
			r := e.browser().postWith("/login", url.Values{"username": {"alice"}, "password": {"wrong password!"}}, from(i))
			wantStatus(t, "attempt", r, http.StatusUnauthorized)
		}
		// The next is refused even with the right password, without checking it.
		r := e.browser().postWith("/login", url.Values{"username": {"alice"}, "password": {testPassword}}, from(50))
		wantStatus(t, "attempt after the failures", r, http.StatusTooManyRequests)
		wantBody(t, "attempt after the failures", r, "Too many sign-in attempts")
		if r.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After on a throttled sign-in")
		}
		// alice's browser gets in all the same.
		r = mine.postWith("/login", url.Values{"username": {"alice"}, "password": {testPassword}}, from(51))
		wantStatus(t, "known device during the lock", r, http.StatusSeeOther)
		// The addresses are not exhausted: another user signs in from one.
		e.user("bob", false)
		r = e.browser().postWith("/login", url.Values{"username": {"bob"}, "password": {testPassword}}, from(1))
		wantStatus(t, "another user from a used address", r, http.StatusSeeOther)
	})
	t.Run("per address counts failures only", func(t *testing.T) {
		e := newEnv(t)
		e.user("alice", false)
		// Successes from one address never count.
		for range signin.DefaultPolicy.Addr.Failures + 5 {
			r := e.browser().post("/login", url.Values{"username": {"alice"}, "password": {testPassword}})
			wantStatus(t, "success", r, http.StatusSeeOther)
		}
		for i := 1; i <= signin.DefaultPolicy.Addr.Failures; i++ {
			r := e.browser().post("/login", url.Values{"username": {"user" + strconv.Itoa(i)}, "password": {"wrong password!"}})
			wantStatus(t, "attempt", r, http.StatusUnauthorized)
		}
		r := e.browser().post("/login", url.Values{"username": {"alice"}, "password": {testPassword}})
		wantStatus(t, "attempt from an address over its failures", r, http.StatusTooManyRequests)
	})
	t.Run("device cookie", func(t *testing.T) {
		e := newEnv(t)
		e.user("alice", false)
		r := e.browser().post("/login", url.Values{"username": {"alice"}, "password": {testPassword}})
		wantStatus(t, "sign in", r, http.StatusSeeOther)
		var set string
		for _, v := range r.header.Values("Set-Cookie") {
			if strings.HasPrefix(v, deviceCookie+"=") {
				set = v
			}
		}
		for _, want := range []string{"HttpOnly", "SameSite=Lax", "Max-Age=7776000", "Path=/"} {
			if !strings.Contains(set, want) {
				t.Fatalf("device cookie %q lacks %s", set, want)
			}
		}
		if strings.Contains(set, "Secure") {
			t.Fatalf("device cookie %q is Secure on a plain-HTTP deployment", set)
		}
		// A failed sign-in sets none.
		r = e.browser().post("/login", url.Values{"username": {"alice"}, "password": {"wrong password!"}})
		for _, v := range r.header.Values("Set-Cookie") {
			if strings.HasPrefix(v, deviceCookie+"=") {
				t.Fatalf("a failed sign-in set %q", v)
			}
		}
	})
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	e := newEnv(t)
	u := e.user("alice", false)
	b := e.browser()
	b.signIn(u)
	before := e.auditCount("access.denied")
	for name, h := range map[string]map[string]string{
		"sec-fetch-site cross-site": {"Sec-Fetch-Site": "cross-site"},
		"sec-fetch-site same-site":  {"Sec-Fetch-Site": "same-site"},
		"foreign origin":            {"Origin": "https://evil.example"},
	} {
		r := b.postWith("/apps", url.Values{"name": {"stolen"}}, h)
		wantStatus(t, name, r, http.StatusForbidden)
		wantBody(t, name, r, "sent from another site")
	}
	if _, err := e.apps.Get(context.Background(), "stolen"); err == nil {
		t.Fatal("a cross-origin form created an app")
	}
	if got := e.auditCount("access.denied"); got < before+3 {
		t.Fatalf("cross-origin refusals audited %d times, want 3", got-before)
	}
	// The same form from this origin works.
	wantStatus(t, "same origin", b.post("/apps", url.Values{"name": {"mine"}}), http.StatusSeeOther)
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	e := newEnv(t)
	u := e.user("alice", false)
	b := e.browser()
	b.signIn(u)
	anon := e.browser()
	cases := map[string]response{
		"page":         b.get("/buckets"),
		"sign-in":      anon.get("/login"),
		"redirect":     anon.get("/buckets"),
		"not found":    b.get("/no/such/page"),
		"static":       anon.get("/static/app.css"),
		"static 404":   anon.get("/static/nope.css"),
		"405":          anon.postWith("/healthz", nil, nil),
		"cross-origin": b.postWith("/apps", url.Values{"name": {"x"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}),
		"health":       anon.get("/healthz"),
	}
	for name, r := range cases {
		h := r.header
		csp := h.Get("Content-Security-Policy")
		if csp == "" || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s (%d): bad CSP %q", name, r.status, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", name)
		}
		if h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: no X-Frame-Options DENY", name)
		}
		if h.Get("Referrer-Policy") == "" {
			t.Errorf("%s: no Referrer-Policy", name)
		}
	}
	if cases["not found"].status != http.StatusNotFound || cases["405"].status != http.StatusMethodNotAllowed {
		t.Fatalf("404 page %d, 405 page %d", cases["not found"].status, cases["405"].status)
	}
	// Pages carry no inline script or style for the CSP to refuse.
	for _, bad := range []string{"<script>", "style=", "<style", "onclick=", "javascript:"} {
		if strings.Contains(cases["page"].body, bad) || strings.Contains(cases["sign-in"].body, bad) {
			t.Errorf("a page contains %q, which the CSP blocks", bad)
		}
	}
}

func TestStaticFilesAreChecksummed(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	page := b.get("/login").body
	url := e.s.views.assets["app.css"]
	if !strings.Contains(page, `href="`+url+`"`) || !strings.Contains(url, "?v=") {
		t.Fatalf("page does not link the checksummed stylesheet %q", url)
	}
	r := b.get(url)
	wantStatus(t, "stylesheet", r, http.StatusOK)
	if !strings.Contains(r.header.Get("Cache-Control"), "immutable") || !strings.HasPrefix(r.header.Get("Content-Type"), "text/css") {
		t.Fatalf("stylesheet headers: %v", r.header)
	}
	r = b.get("/static/app.css?v=old")
	if strings.Contains(r.header.Get("Cache-Control"), "immutable") {
		t.Fatal("a stale checksum is cached as immutable")
	}
	wantStatus(t, "escape attempt", b.get("/static/../templates/layout.html"), http.StatusNotFound)
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "/buckets",
		"/apps?q=x":            "/apps?q=x",
		"//evil.example/":      "/buckets",
		"https://evil.example": "/buckets",
		"/\\evil.example":      "/buckets",
		"/login":               "/buckets",
		"apps":                 "/buckets",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAnonymousRefusalsSampled: a flood of requests without a session is
// counted in full but writes a bounded sample to the audit log (600 such
// requests used to write 600 rows).
func TestAnonymousRefusalsSampled(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	before := e.s.svc.AnonymousRefusals()
	for range 200 {
		wantStatus(t, "anonymous", b.get("/buckets"), http.StatusSeeOther)
	}
	if got := e.s.svc.AnonymousRefusals() - before; got != 200 {
		t.Fatalf("counted %d refusals, want 200", got)
	}
	if rows := e.auditCount("access.denied"); rows > audit.DefaultSample+1 {
		t.Fatalf("200 anonymous refusals wrote %d audit rows, want at most %d", rows, audit.DefaultSample+1)
	}
}

func TestAdminsSeeRevokeTokensAndClearLocks(t *testing.T) {
	e := newEnv(t)
	root := e.user("root", true)
	alice := e.user("alice", false)
	bob := e.user("bob", false)
	_, tok, err := e.acc.CreateToken(context.Background(), e.system, alice.ID, "deploy bot", nil)
	if err != nil {
		t.Fatal(err)
	}
	// alice's name is locked by wrong guesses.
	for range signin.DefaultPolicy.User.Failures {
		e.browser().post("/login", url.Values{"username": {"alice"}, "password": {"wrong password!"}})
	}
	admin := e.browser()
	admin.signIn(root)
	r := admin.get("/users")
	wantStatus(t, "users page", r, http.StatusOK)
	revoke := "/users/alice/tokens/" + strconv.FormatInt(tok.ID, 10) + "/revoke"
	wantBody(t, "users page", r, "deploy bot", `action="`+revoke+`"`, "sign-in locked for", `action="/users/alice/unlock"`)

	other := e.browser()
	other.signIn(bob)
	wantStatus(t, "non-admin revoke", other.post(revoke, nil), http.StatusForbidden)
	wantStatus(t, "non-admin unlock", other.post("/users/alice/unlock", nil), http.StatusForbidden)

	// What revoking and unlocking do, and their audit rows, are the
	// application layer's (internal/manage tests); here: the pages' answers.
	wantStatus(t, "revoke", admin.post(revoke, nil), http.StatusSeeOther)
	wantStatus(t, "unlock", admin.post("/users/alice/unlock", nil), http.StatusSeeOther)
	r = e.browser().post("/login", url.Values{"username": {"alice"}, "password": {testPassword}})
	wantStatus(t, "sign in after the unlock", r, http.StatusSeeOther)
	r = admin.post("/users/unlock-address", url.Values{"address": {"not an address"}})
	wantStatus(t, "bad address", r, http.StatusUnprocessableEntity)
	wantBody(t, "bad address", r, "is not an IP address")
	wantStatus(t, "address unlock", admin.post("/users/unlock-address", url.Values{"address": {"127.0.0.1"}}), http.StatusSeeOther)
}

func TestMemberPickerOffersUserNames(t *testing.T) {
	e := newEnv(t)
	owner := e.user("olga", false)
	viewer := e.user("vic", false)
	e.user("zed", false)
	e.app("alpha", "olga")
	e.grant("vic", "alpha", "viewer")
	b := e.browser()
	b.signIn(owner)
	r := b.get("/apps/alpha")
	wantStatus(t, "app page", r, http.StatusOK)
	wantBody(t, "app page", r, `list="user-names"`, `<datalist id="user-names">`, `<option value="zed">`)
	// Viewers cannot add members and get no picker.
	v := e.browser()
	v.signIn(viewer)
	r = v.get("/apps/alpha")
	wantStatus(t, "app page as a viewer", r, http.StatusOK)
	if strings.Contains(r.body, "<datalist") {
		t.Fatal("a viewer got the member picker")
	}
}
