package console

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/rbac"
)

// TestAppPageListsItsBuckets: an app's page lists the buckets it owns or
// may take from; an app without any offers its owner to create the first
// one (prefilled with the app), and a viewer no button.
func TestAppPageListsItsBuckets(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	vera := e.user("vera", false)
	e.app("alpha", "olga")
	e.app("empty", "olga")
	e.grant("vera", "empty", rbac.RoleViewer)
	e.bucket("alpha-api", "alpha")
	e.bucket("beta-shared", "empty", "empty", "alpha")

	ob := e.browser()
	ob.signIn(olga)
	r := ob.get("/apps/alpha")
	wantStatus(t, "alpha", r, http.StatusOK)
	wantBody(t, "alpha", r, `<tr data-bucket="alpha-api">`, `<tr data-bucket="beta-shared">`, `href="/buckets/new?app=alpha">New bucket</a>`,
		`id="mapping-example"`, `key from <code>remote_address</code>`)

	e.app("bare", "olga")
	r = ob.get("/apps/bare")
	wantBody(t, "empty app", r, `id="app-no-buckets"`, `href="/buckets/new?app=bare" id="create-first-bucket">Create the first bucket</a>`)
	r = ob.get("/buckets/new?app=bare")
	wantBody(t, "prefilled form", r, `value="bare" selected`)

	vb := e.browser()
	vb.signIn(vera)
	r = vb.get("/apps/empty")
	wantStatus(t, "viewer", r, http.StatusOK)
	if !strings.Contains(r.body, `<tr data-bucket="beta-shared">`) || strings.Contains(r.body, "create-first-bucket") || strings.Contains(r.body, "New bucket</a>") {
		t.Error("a viewer's app page lacks its bucket or offers to create one")
	}
}
