package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/rbac"
)

// The callers of the role matrix. alpha is the app under test: olivia owns
// it, victor views it, oscar owns only beta. olivia also holds a revoked
// and an expired token.
var matrixCallers = []string{"anonymous", "unknown", "revoked", "expired", "viewer", "other", "owner", "admin"}

// TestRoleMatrix calls every route as every kind of caller and checks the
// exact status: an unexpected 2xx is an unexpected allow, and an
// unexpected 404/403 a broken check.
func TestRoleMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tokens := map[string]string{
		"anonymous": "",
		"unknown":   "slc_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"owner":     e.user("olivia"),
		"viewer":    e.user("victor"),
		"other":     e.user("oscar"),
		"admin":     e.admin("root"),
	}
	olivia, err := e.accounts.UserByName(ctx, "olivia")
	if err != nil {
		t.Fatal(err)
	}
	revoked, tok, err := e.accounts.CreateToken(ctx, setup, olivia.ID, "revoked", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.accounts.RevokeToken(ctx, setup, olivia.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	tokens["revoked"] = revoked
	// A store whose clock is two hours behind accepts an expiry one hour
	// ago; the API's store sees the token as expired.
	past := accounts.NewStore(e.db)
	past.Now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	expiry := time.Now().Add(-time.Hour)
	if tokens["expired"], _, err = past.CreateToken(ctx, setup, olivia.ID, "expired", &expiry); err != nil {
		t.Fatal(err)
	}

	e.app("alpha", "olivia")
	e.app("beta", "oscar")
	e.grant("victor", "alpha", rbac.RoleViewer)
	e.bucket("alpha-main", "alpha")
	e.bucket("beta-shared", "beta", "alpha", "beta")
	ovKeys := []string{"main"}
	for _, c := range matrixCallers {
		ovKeys = append(ovKeys, "del:"+c)
	}
	ovIDs := e.keyedBucket("alpha-keyed", "alpha", ovKeys...)
	for _, c := range matrixCallers {
		e.bucket("del-"+c, "alpha")
		for _, u := range []string{"temp-" + c, "gone-" + c} {
			if _, err := e.accounts.CreateUser(ctx, setup, u, "correct horse battery"); err != nil {
				t.Fatal(err)
			}
		}
		e.grant("gone-"+c, "alpha", rbac.RoleViewer)
	}
	// Per caller, a mapping and an app token to delete ({mapping} and
	// {token} in a path), and one mapping everybody tries to replace.
	ids := map[string]map[string]int64{"{mapping}": {}, "{token}": {}}
	mappings, appTokens := descriptors.NewStore(e.db), apptokens.NewStore(e.db)
	for _, c := range append([]string{"shared"}, matrixCallers...) {
		m := &descriptors.Mapping{App: "alpha", Domain: "del-" + c, Entries: []descriptors.Entry{{Key: "generic_key"}}, Bucket: "alpha-main"}
		if err := mappings.Create(ctx, setup, m); err != nil {
			t.Fatal(err)
		}
		ids["{mapping}"][c] = m.ID
		_, tok, err := appTokens.Create(ctx, setup, "alpha", "del-"+c, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids["{token}"][c] = tok.ID
	}
	mappingBody := func(c string) any {
		return map[string]any{"domain": "new-" + c, "entries": []map[string]string{{"key": "generic_key"}}, "bucket": "alpha-main"}
	}

	// Expected status per caller for the callers that hold a valid token;
	// the others always get 401 (except on the public document).
	type want struct{ viewer, other, owner, admin int }
	everyone := func(s int) want { return want{s, s, s, s} }
	bucketBody := func(c string) map[string]any {
		return map[string]any{"name": "new-" + c, "owner_app": "alpha", "max_permits": 5, "rate": "1/s"}
	}
	cases := []struct {
		method, path string
		body         func(caller string) any
		ifMatch      bool
		want         want
		public       bool
	}{
		{method: "GET", path: "/api/v1/openapi.json", want: everyone(200), public: true},
		{method: "GET", path: "/api/v1/me", want: everyone(200)},
		{method: "GET", path: "/api/v1/apps", want: everyone(200)},
		{method: "POST", path: "/api/v1/apps", body: func(c string) any { return map[string]string{"name": "new-" + c} }, want: everyone(201)},
		{method: "GET", path: "/api/v1/apps/alpha", want: want{200, 404, 200, 200}},
		{method: "GET", path: "/api/v1/apps/alpha/members", want: want{200, 404, 200, 200}},
		{method: "PUT", path: "/api/v1/apps/alpha/members/temp-{caller}", body: func(string) any { return map[string]string{"role": "viewer"} }, want: want{403, 404, 200, 200}},
		{method: "DELETE", path: "/api/v1/apps/alpha/members/gone-{caller}", want: want{403, 404, 204, 204}},
		{method: "GET", path: "/api/v1/buckets", want: everyone(200)},
		{method: "POST", path: "/api/v1/buckets", body: func(c string) any { return bucketBody(c) }, want: want{403, 403, 201, 201}},
		{method: "GET", path: "/api/v1/buckets/alpha-main", want: want{200, 404, 200, 200}},
		{method: "PUT", path: "/api/v1/buckets/alpha-main", ifMatch: true, body: func(c string) any {
			return map[string]any{"max_permits": 7, "rate": "2/s", "description": "put by " + c}
		}, want: want{403, 404, 200, 200}},
		{method: "PATCH", path: "/api/v1/buckets/alpha-main", ifMatch: true, body: func(c string) any { return map[string]any{"description": "by " + c} }, want: want{403, 404, 200, 200}},
		{method: "DELETE", path: "/api/v1/buckets/del-{caller}", ifMatch: true, want: want{403, 404, 204, 204}},
		{method: "GET", path: "/api/v1/buckets/alpha-main/state", want: want{200, 404, 200, 200}},
		// Allowed on a bucket of another app: visible, not editable.
		{method: "GET", path: "/api/v1/buckets/beta-shared", want: everyone(200)},
		{method: "PATCH", path: "/api/v1/buckets/beta-shared", ifMatch: true, body: func(c string) any { return map[string]any{"description": "by " + c} }, want: want{403, 200, 403, 200}},
		{method: "GET", path: "/api/v1/buckets/beta-shared/state", want: everyone(200)},
		{method: "GET", path: "/api/v1/buckets/alpha-keyed/overrides", want: want{200, 404, 200, 200}},
		{method: "POST", path: "/api/v1/buckets/alpha-keyed/overrides", body: func(c string) any {
			return map[string]any{"match": "exact", "key": "new:" + c, "max_permits": 5, "rate": "1/s"}
		}, want: want{403, 404, 201, 201}},
		{method: "GET", path: "/api/v1/buckets/alpha-keyed/overrides/{main}", want: want{200, 404, 200, 200}},
		{method: "PUT", path: "/api/v1/buckets/alpha-keyed/overrides/{main}", ifMatch: true, body: func(c string) any {
			return map[string]any{"max_permits": 7, "rate": "2/s", "description": "put by " + c}
		}, want: want{403, 404, 200, 200}},
		{method: "PATCH", path: "/api/v1/buckets/alpha-keyed/overrides/{main}", ifMatch: true, body: func(c string) any {
			return map[string]any{"description": "by " + c}
		}, want: want{403, 404, 200, 200}},
		{method: "DELETE", path: "/api/v1/buckets/alpha-keyed/overrides/{del}", ifMatch: true, want: want{403, 404, 204, 204}},
		{method: "GET", path: "/api/v1/audit", want: everyone(200)},
		{method: "GET", path: "/api/v1/apps/alpha/mappings", want: want{200, 404, 200, 200}},
		{method: "POST", path: "/api/v1/apps/alpha/mappings", body: mappingBody, want: want{403, 404, 201, 201}},
		{method: "GET", path: "/api/v1/apps/alpha/mappings/{mapping}", want: want{200, 404, 200, 200}},
		{method: "PUT", path: "/api/v1/apps/alpha/mappings/{shared-mapping}", ifMatch: true, body: func(c string) any {
			return map[string]any{"domain": "put-" + c, "entries": []map[string]string{{"key": "generic_key"}}, "bucket": "alpha-main"}
		}, want: want{403, 404, 200, 200}},
		{method: "DELETE", path: "/api/v1/apps/alpha/mappings/{mapping}", ifMatch: true, want: want{403, 404, 204, 204}},
		{method: "GET", path: "/api/v1/apps/alpha/tokens", want: want{403, 404, 200, 200}},
		{method: "POST", path: "/api/v1/apps/alpha/tokens", body: func(c string) any { return map[string]string{"name": "new-" + c} }, want: want{403, 404, 201, 201}},
		{method: "DELETE", path: "/api/v1/apps/alpha/tokens/{token}", want: want{403, 404, 204, 204}},
	}
	ovPath := func(path, caller string) string {
		path = strings.ReplaceAll(path, "{main}", fmt.Sprint(ovIDs["main"]))
		return strings.ReplaceAll(path, "{del}", fmt.Sprint(ovIDs["del:"+caller]))
	}

	routes := map[string]bool{}
	for _, tc := range cases {
		routes[tc.method+" "+strings.ReplaceAll(tc.path, "{caller}", "x")] = true
		for _, c := range matrixCallers {
			path := ovPath(strings.ReplaceAll(tc.path, "{caller}", c), c)
			path = strings.ReplaceAll(path, "{shared-mapping}", fmt.Sprint(ids["{mapping}"]["shared"]))
			for ph, byCaller := range ids {
				path = strings.ReplaceAll(path, ph, fmt.Sprint(byCaller[c]))
			}
			var body any
			if tc.body != nil {
				body = tc.body(c)
			}
			var headers []string
			if tc.ifMatch {
				headers = []string{"If-Match", "*"}
			}
			expected := 401
			switch {
			case tc.public:
				expected = 200
			case c == "viewer":
				expected = tc.want.viewer
			case c == "other":
				expected = tc.want.other
			case c == "owner":
				expected = tc.want.owner
			case c == "admin":
				expected = tc.want.admin
			}
			r := e.call(tokens[c], tc.method, path, body, headers...)
			if r.status != expected {
				kind := "wrong status"
				if r.status < 300 {
					kind = "UNEXPECTED ALLOW"
				}
				t.Errorf("%s: %s %s as %s: %d, want %d: %s", kind, tc.method, path, c, r.status, expected, r.body)
				continue
			}
			if r.status >= 400 {
				b := r.errorBody(t)
				if r.status == 401 && b.Error.Code != "unauthenticated" {
					t.Errorf("%s %s as %s: code %q", tc.method, path, c, b.Error.Code)
				}
			}
		}
	}
	if len(routes) < 27 {
		t.Fatalf("the matrix covers only %d routes", len(routes))
	}

	// Nothing refused changed anything: alpha-main was changed exactly by
	// the owner's and the admin's PUT and PATCH.
	b, err := e.buckets.Get(ctx, "alpha-main")
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != 5 || b.Description != "by admin" {
		t.Errorf("alpha-main: version %d, description %q; want 5 and %q", b.Version, b.Description, "by admin")
	}
	for _, c := range []string{"viewer", "other", "anonymous", "revoked", "expired", "unknown"} {
		if _, err := e.buckets.Get(ctx, "del-"+c); err != nil {
			t.Errorf("bucket del-%s was deleted by a refused caller: %v", c, err)
		}
		if _, err := e.buckets.Get(ctx, "new-"+c); err == nil {
			t.Errorf("bucket new-%s was created by a refused caller", c)
		}
		if _, err := e.buckets.GetOverride(ctx, "alpha-keyed", ovIDs["del:"+c]); err != nil {
			t.Errorf("override del:%s was deleted by a refused caller: %v", c, err)
		}
		if o, _ := e.buckets.EffectiveOverride(ctx, "alpha-keyed", "new:"+c); o != nil {
			t.Errorf("override new:%s was created by a refused caller", c)
		}
	}
	if o, err := e.buckets.GetOverride(ctx, "alpha-keyed", ovIDs["main"]); err != nil || o.Version != 5 || o.Description != "by admin" {
		t.Errorf("override main: %+v %v; want version 5 described %q", o, err, "by admin")
	}

	// Refusals are audited as access.denied with the API token as actor.
	denied := e.auditEntries(audit.Filter{Action: "access.denied"})
	var byOscar, byVictor int
	for _, d := range denied {
		switch d.Actor {
		case "oscar (api token ci)":
			byOscar++
		case "victor (api token ci)":
			byVictor++
		}
	}
	// oscar: 2 app reads, grant, revoke, create, get, put, patch, delete, state.
	if byOscar < 10 || byVictor < 6 {
		t.Errorf("access.denied rows: oscar %d (want >= 10), victor %d (want >= 6)", byOscar, byVictor)
	}
}

// TestListsShowOnlyVisible checks that lists apply the visibility rules,
// not only the single-object routes.
func TestListsShowOnlyVisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, other, admin := e.user("olivia"), e.user("oscar"), e.admin("root")
	loner := e.user("lena")
	e.app("alpha", "olivia")
	e.app("beta", "oscar")
	e.app("gamma", "oscar")
	e.bucket("a1", "alpha")
	e.bucket("b1", "beta")
	e.bucket("g-shared", "gamma", "alpha", "gamma")
	// Audit rows about each app.
	e.must(200, owner, "PATCH", "/api/v1/buckets/a1", map[string]any{"description": "x"}, "If-Match", "*")
	e.must(200, other, "PATCH", "/api/v1/buckets/b1", map[string]any{"description": "y"}, "If-Match", "*")

	names := func(token, path string) []string {
		var out struct {
			Apps    []struct{ Name string } `json:"apps"`
			Buckets []struct{ Name string } `json:"buckets"`
			Entries []struct {
				App string `json:"app"`
			} `json:"entries"`
		}
		e.must(200, token, "GET", path, nil).decode(t, &out)
		var n []string
		for _, a := range out.Apps {
			n = append(n, a.Name)
		}
		for _, b := range out.Buckets {
			n = append(n, b.Name)
		}
		for _, en := range out.Entries {
			if !slices.Contains(n, en.App) {
				n = append(n, en.App)
			}
		}
		slices.Sort(n)
		return n
	}
	tests := []struct {
		token, path string
		want        []string
	}{
		{owner, "/api/v1/apps", []string{"alpha"}},
		{other, "/api/v1/apps", []string{"beta", "gamma"}},
		{admin, "/api/v1/apps", []string{"alpha", "beta", "gamma"}},
		{loner, "/api/v1/apps", nil},
		{owner, "/api/v1/buckets", []string{"a1", "g-shared"}},
		{other, "/api/v1/buckets", []string{"b1", "g-shared"}},
		{admin, "/api/v1/buckets", []string{"a1", "b1", "g-shared"}},
		{loner, "/api/v1/buckets", nil},
		{owner, "/api/v1/buckets?app=beta", nil},
		{owner, "/api/v1/audit?object_type=bucket", []string{"alpha"}},
		{other, "/api/v1/audit?object_type=bucket", []string{"beta", "gamma"}},
		{loner, "/api/v1/audit", nil},
	}
	for _, tt := range tests {
		if got := names(tt.token, tt.path); !slices.Equal(got, tt.want) {
			t.Errorf("GET %s: %v, want %v", tt.path, got, tt.want)
		}
	}
	// An admin sees entries without an app too (user and token changes).
	var all struct {
		Entries []struct {
			Action string `json:"action"`
		} `json:"entries"`
	}
	e.must(200, admin, "GET", "/api/v1/audit?object_type=user", nil).decode(t, &all)
	if len(all.Entries) < 4 {
		t.Errorf("admin sees %d user entries, want >= 4", len(all.Entries))
	}
	var me struct {
		User  string   `json:"user"`
		Admin bool     `json:"admin"`
		Apps  []string `json:"apps"`
		Token struct {
			Name string `json:"name"`
		} `json:"token"`
	}
	e.must(200, other, "GET", "/api/v1/me", nil).decode(t, &me)
	if me.User != "oscar" || me.Admin || fmt.Sprint(me.Apps) != "[beta gamma]" || me.Token.Name != "ci" {
		t.Errorf("me = %+v", me)
	}
}
