package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/rbac"
)

// Roles of the access-control matrix.
const (
	anonymous = "anonymous"
	viewer    = "viewer"   // viewer of alpha
	stranger  = "stranger" // owner of beta, nothing on alpha
	owner     = "owner"    // owner of alpha
	admin     = "admin"
)

var roles = []string{anonymous, viewer, stranger, owner, admin}

// matrixFixture is the data every probe runs against.
type matrixFixture struct {
	e     *env
	users map[string]*accounts.User
	n     int // a counter for unique names
}

// probe is how the matrix calls one route, and who may call it.
type probe struct {
	// public routes are open to everyone and not classified.
	public bool
	// signsOut marks the sign-out route, whose success is a redirect to
	// the sign-in page that clears the session cookie.
	signsOut bool
	// allow lists the roles that must be let through; all others must be refused.
	allow []string
	// prepare runs before the call (as the system) and returns the path
	// and form to send.
	prepare func(fx *matrixFixture, role string) (path string, form url.Values)
}

func everyone(...string) []string { return []string{viewer, stranger, owner, admin} }

// probes lists every route of the console. A route missing here fails the
// test: nobody can add a route without saying who may call it.
func probes() map[string]probe {
	static := func(p string) func(*matrixFixture, string) (string, url.Values) {
		return func(*matrixFixture, string) (string, url.Values) { return p, nil }
	}
	alphaOwners := []string{owner, admin}
	alphaMembers := []string{viewer, owner, admin}
	bucketForm := func(fx *matrixFixture, name string) url.Values {
		b, err := fx.e.bkts.Get(context.Background(), name)
		version := "1"
		if err == nil {
			version = strconv.FormatInt(b.Version, 10)
		}
		return url.Values{"max_permits": {"20"}, "rate": {"5 per second"}, "allowed_apps": {"alpha"},
			"owner_app": {"alpha"}, "version": {version}}
	}
	return map[string]probe{
		"GET /static/*file": {public: true, prepare: static("/static/app.css")},
		"GET /healthz":      {public: true, prepare: static("/healthz")},
		"GET /login":        {public: true, prepare: static("/login")},
		"POST /login": {public: true, prepare: func(*matrixFixture, string) (string, url.Values) {
			return "/login", url.Values{"username": {"nobody"}, "password": {"wrong password"}}
		}},
		"GET /login/sso":          {public: true, prepare: static("/login/sso")},
		"GET /login/sso/callback": {public: true, prepare: static("/login/sso/callback?state=x&code=y")},
		"POST /logout":            {allow: everyone(), signsOut: true, prepare: static("/logout")},
		"GET /":                   {allow: everyone(), prepare: static("/")},
		"GET /apps":               {allow: everyone(), prepare: static("/apps")},
		"GET /apps/new":           {allow: everyone(), prepare: static("/apps/new")},
		"POST /apps": {allow: everyone(), prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/apps", url.Values{"name": {fx.unique("m-app")}}
		}},
		"GET /apps/:app": {allow: alphaMembers, prepare: static("/apps/alpha")},
		"POST /apps/:app/members": {allow: alphaOwners, prepare: func(*matrixFixture, string) (string, url.Values) {
			return "/apps/alpha/members", url.Values{"user": {"extra"}, "role": {"viewer"}}
		}},
		"GET /apps/:app/members/:user/revoke": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			fx.e.grant("extra", "alpha", rbac.RoleViewer)
			return "/apps/alpha/members/extra/revoke", nil
		}},
		"POST /apps/:app/members/:user/revoke": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			fx.e.grant("extra", "alpha", rbac.RoleViewer)
			return "/apps/alpha/members/extra/revoke", nil
		}},
		"POST /apps/:app/mappings": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/apps/alpha/mappings", url.Values{"domain": {fx.unique("d")}, "entries": {"generic_key"}, "bucket": {"alpha-api"}}
		}},
		"GET /apps/:app/mappings/:id/delete": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/apps/alpha/mappings/" + fx.mapping() + "/delete", nil
		}},
		"POST /apps/:app/mappings/:id/delete": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/apps/alpha/mappings/" + fx.mapping() + "/delete", url.Values{"version": {"1"}}
		}},
		"POST /apps/:app/tokens": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/apps/alpha/tokens", url.Values{"name": {fx.unique("at")}}
		}},
		"GET /apps/:app/tokens/:id/revoke": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/apps/alpha/tokens/" + fx.appToken() + "/revoke", nil
		}},
		"POST /apps/:app/tokens/:id/revoke": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/apps/alpha/tokens/" + fx.appToken() + "/revoke", nil
		}},
		"GET /buckets":     {allow: everyone(), prepare: static("/buckets")},
		"GET /buckets/new": {allow: []string{stranger, owner, admin}, prepare: static("/buckets/new")},
		"POST /buckets": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			f := bucketForm(fx, "")
			f.Set("name", fx.unique("m-bucket"))
			return "/buckets", f
		}},
		"GET /buckets/:bucket":            {allow: alphaMembers, prepare: static("/buckets/alpha-api")},
		"GET /buckets/:bucket/state.json": {allow: alphaMembers, prepare: static("/buckets/alpha-api/state.json")},
		// Everyone gets an answer: a list of the named buckets they may see.
		"GET /live/buckets.json":    {allow: everyone(), prepare: static("/live/buckets.json?names=alpha-api,beta-api")},
		"GET /buckets/:bucket/edit": {allow: alphaOwners, prepare: static("/buckets/alpha-api/edit")},
		"POST /buckets/:bucket": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/buckets/alpha-api", bucketForm(fx, "alpha-api")
		}},
		"GET /buckets/:bucket/delete": {allow: alphaOwners, prepare: static("/buckets/alpha-api/delete")},
		"POST /buckets/:bucket/delete": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			name := fx.unique("m-del")
			fx.e.bucket(name, "alpha")
			return "/buckets/" + name + "/delete", url.Values{"version": {"1"}}
		}},
		"POST /buckets/:bucket/overrides": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/buckets/alpha-keys/overrides", url.Values{"match": {"exact"}, "key": {fx.unique("k")},
				"max_permits": {"5"}, "rate": {"1/s"}}
		}},
		"GET /buckets/:bucket/overrides/:id/edit": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return fmt.Sprintf("/buckets/alpha-keys/overrides/%d/edit", fx.override()), nil
		}},
		"POST /buckets/:bucket/overrides/:id/edit": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return fmt.Sprintf("/buckets/alpha-keys/overrides/%d/edit", fx.override()), url.Values{"version": {"1"},
				"max_permits": {"6"}, "rate": {"1/s"}}
		}},
		"GET /buckets/:bucket/overrides/:id/delete": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return fmt.Sprintf("/buckets/alpha-keys/overrides/%d/delete", fx.override()), nil
		}},
		"POST /buckets/:bucket/overrides/:id/delete": {allow: alphaOwners, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return fmt.Sprintf("/buckets/alpha-keys/overrides/%d/delete", fx.override()), url.Values{"version": {"1"}}
		}},
		"GET /usage":  {allow: everyone(), prepare: static("/usage")},
		"GET /audit":  {allow: everyone(), prepare: static("/audit")},
		"GET /tokens": {allow: everyone(), prepare: static("/tokens")},
		"POST /tokens": {allow: everyone(), prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/tokens", url.Values{"name": {fx.unique("t")}}
		}},
		"POST /tokens/:id/revoke": {allow: everyone(), prepare: func(fx *matrixFixture, role string) (string, url.Values) {
			// Each user revokes a token of their own; anonymous callers aim
			// at the owner's.
			u := fx.users[role]
			if u == nil {
				u = fx.users[owner]
			}
			_, tok, err := fx.e.acc.CreateToken(context.Background(), fx.e.system, u.ID, fx.unique("t"), nil)
			if err != nil {
				fx.e.t.Fatalf("create token: %v", err)
			}
			return "/tokens/" + strconv.FormatInt(tok.ID, 10) + "/revoke", nil
		}},
		"GET /account": {allow: everyone(), prepare: static("/account")},
		"POST /account/password": {allow: everyone(), prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			p := fx.unique("a new long password")
			return "/account/password", url.Values{"current_password": {testPassword}, "new_password": {p}, "repeat_password": {p}}
		}},
		"GET /users": {allow: []string{admin}, prepare: static("/users")},
		"POST /users": {allow: []string{admin}, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			return "/users", url.Values{"username": {fx.unique("u")}, "password": {testPassword}}
		}},
		"POST /users/:user/disable": {allow: []string{admin}, prepare: static("/users/extra/disable")},
		"POST /users/:user/enable":  {allow: []string{admin}, prepare: static("/users/extra/enable")},
		"POST /users/:user/admin": {allow: []string{admin}, prepare: func(*matrixFixture, string) (string, url.Values) {
			return "/users/extra/admin", url.Values{"admin": {"false"}}
		}},
		"POST /users/:user/password": {allow: []string{admin}, prepare: func(*matrixFixture, string) (string, url.Values) {
			return "/users/extra/password", url.Values{"password": {"another long password"}}
		}},
		"POST /users/:user/tokens/:id/revoke": {allow: []string{admin}, prepare: func(fx *matrixFixture, _ string) (string, url.Values) {
			u, err := fx.e.acc.UserByName(context.Background(), "extra")
			if err != nil {
				fx.e.t.Fatalf("user extra: %v", err)
			}
			_, tok, err := fx.e.acc.CreateToken(context.Background(), fx.e.system, u.ID, fx.unique("t"), nil)
			if err != nil {
				fx.e.t.Fatalf("create token: %v", err)
			}
			return "/users/extra/tokens/" + strconv.FormatInt(tok.ID, 10) + "/revoke", nil
		}},
		"POST /users/:user/unlock": {allow: []string{admin}, prepare: static("/users/extra/unlock")},
		"POST /users/unlock-address": {allow: []string{admin}, prepare: func(*matrixFixture, string) (string, url.Values) {
			return "/users/unlock-address", url.Values{"address": {"192.0.2.77"}}
		}},
	}
}

// override creates an override of the keyed bucket alpha-keys and
// returns its id.
func (fx *matrixFixture) override() int64 {
	o := &buckets.Override{Bucket: "alpha-keys", Match: buckets.MatchExact, Key: fx.unique("ov"), MaxPermits: 5,
		Rate: buckets.Rate{PermitsMicro: 1_000_000, Period: time.Second}}
	if err := fx.e.bkts.CreateOverride(context.Background(), fx.e.system, o); err != nil {
		fx.e.t.Fatalf("create override: %v", err)
	}
	return o.ID
}

// mapping makes a descriptor mapping of alpha and returns its id.
func (fx *matrixFixture) mapping() string {
	m := &descriptors.Mapping{App: "alpha", Domain: fx.unique("d"), Entries: []descriptors.Entry{{Key: "generic_key"}}, Bucket: "alpha-api"}
	if err := descriptors.NewStore(fx.e.db).Create(context.Background(), fx.e.system, m); err != nil {
		fx.e.t.Fatalf("create mapping: %v", err)
	}
	return strconv.FormatInt(m.ID, 10)
}

// appToken makes a token of alpha and returns its id.
func (fx *matrixFixture) appToken() string {
	_, tok, err := apptokens.NewStore(fx.e.db).Create(context.Background(), fx.e.system, "alpha", fx.unique("at"), nil)
	if err != nil {
		fx.e.t.Fatalf("create app token: %v", err)
	}
	return strconv.FormatInt(tok.ID, 10)
}

func (fx *matrixFixture) unique(prefix string) string {
	fx.n++
	return fmt.Sprintf("%s-%d", prefix, fx.n)
}

// TestAccessMatrix walks every route registered in the router for every
// kind of caller (BRIEF Q9): no unexpected allow, no unexpected refusal,
// and every refusal audited as "access.denied".
func TestAccessMatrix(t *testing.T) {
	e := newEnv(t)
	fx := &matrixFixture{e: e, users: map[string]*accounts.User{
		viewer:   e.user("vera", false),
		stranger: e.user("stan", false),
		owner:    e.user("olga", false),
		admin:    e.user("ada", true),
	}}
	e.user("extra", false)
	e.app("alpha", "olga")
	e.app("beta", "stan")
	e.grant("vera", "alpha", rbac.RoleViewer)
	e.bucket("alpha-api", "alpha")
	e.bucket("beta-api", "beta")
	e.keyedBucket("alpha-keys", "alpha")

	table := probes()
	routes := e.rt.Engine().Routes()
	if len(routes) < 20 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	seen := map[string]bool{}
	var cases, refusals int
	for _, rt := range routes {
		key := rt.Method + " " + rt.Path
		seen[key] = true
		p, ok := table[key]
		if !ok {
			t.Errorf("route %s has no entry in the access matrix: say who may call it", key)
			continue
		}
		for _, role := range roles {
			cases++
			t.Run(strings.NewReplacer("/", "_", ":", "", "*", "").Replace(key)+"/"+role, func(t *testing.T) {
				b := e.browser()
				if u := fx.users[role]; u != nil {
					b.signIn(u)
				}
				path, form := p.prepare(fx, role)
				denials := e.auditCount("access.denied")
				counted := e.s.svc.AnonymousRefusals()
				var r response
				if rt.Method == http.MethodGet {
					r = b.get(path)
				} else {
					r = b.post(path, form)
				}
				if r.status >= 500 {
					t.Fatalf("%s as %s: status %d\n%s", key, role, r.status, excerpt(r.body))
				}
				if p.public {
					return
				}
				allowed := r.status == http.StatusOK || r.status == http.StatusSeeOther && !strings.HasPrefix(r.location, "/login")
				refused := r.status == http.StatusUnauthorized || r.status == http.StatusForbidden ||
					r.status == http.StatusNotFound || r.status == http.StatusSeeOther && strings.HasPrefix(r.location, "/login")
				if p.signsOut && r.status == http.StatusSeeOther && b.cookie(sessionCookie) == "" {
					allowed, refused = true, false
				}
				want := contains(p.allow, role)
				switch {
				case want && !allowed:
					t.Errorf("%s %s as %s: refused (status %d, location %q), want allowed\n%s", rt.Method, path, role, r.status, r.location, excerpt(r.body))
				case !want && !refused:
					t.Errorf("UNEXPECTED ALLOW: %s %s as %s: status %d, location %q", rt.Method, path, role, r.status, r.location)
				case !want:
					refusals++
					// Refusals without a session are counted and only
					// sampled into the log; the others are logged each.
					if role == anonymous {
						if e.s.svc.AnonymousRefusals() <= counted {
							t.Errorf("%s %s as %s: refused with %d but not counted", rt.Method, path, role, r.status)
						}
					} else if got := e.auditCount("access.denied"); got <= denials {
						t.Errorf("%s %s as %s: refused with %d but not audited", rt.Method, path, role, r.status)
					}
				}
			})
		}
	}
	for key := range table {
		if !seen[key] {
			t.Errorf("the matrix lists %s, which is not a registered route", key)
		}
	}
	t.Logf("%d routes x %d callers: %d cases, %d expected refusals", len(routes), len(roles), cases, refusals)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
