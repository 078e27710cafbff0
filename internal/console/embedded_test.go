//go:build dev

package console

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/migrations"
)

// embeddedDB is the in-process engine of -dev with the schema, opened as
// the development stack opens it.
func embeddedDB(t testing.TB) *sqlx.DB {
	t.Helper()
	ctx := context.Background()
	dsn, stop, err := devdb.Start(ctx)
	if err != nil {
		t.Fatalf("start embedded engine: %v", err)
	}
	t.Cleanup(stop)
	if err := migrations.Up(dsn); err != nil {
		t.Fatalf("migrate embedded engine: %v", err)
	}
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("open embedded engine: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestPagesOnEmbeddedEngine walks every page the console serves, as an
// admin over the same seeded data (apps, a plain and a keyed bucket, an
// override, a mapping, tokens, audit rows), on MariaDB and on the embedded
// engine of -dev: every page answers the same status on both, and none
// fails.
func TestPagesOnEmbeddedEngine(t *testing.T) {
	stacks := map[string]*env{"mariadb": newEnv(t), "embedded": newEnvOn(t, embeddedDB(t))}
	// Paths beyond the route table's: filters and cursors of the lists,
	// the bucket history (one bucket name) and the audit log's bucket
	// filter (several names).
	extra := []string{
		"/audit?bucket=alpha-api", "/audit?bucket=alpha", "/audit?bucket=alpha&app=alpha",
		"/audit?bucket=nothing", "/audit?app=alpha", "/audit?before=1000000", "/audit?after=1",
		"/audit?bucket=alpha&before=1000000", "/audit?bucket=alpha&after=1",
		"/buckets?q=alpha", "/buckets?app=alpha", "/buckets?after=alpha-api", "/buckets?before=alpha-keys",
		"/buckets/alpha-keys", "/buckets/alpha-keys/edit", "/usage?app=alpha", "/apps/beta",
	}
	status := map[string]map[string]int{}
	for name, e := range stacks {
		fx := &matrixFixture{e: e, users: map[string]*accounts.User{
			owner: e.user("olga", false),
			admin: e.user("ada", true),
		}}
		e.user("extra", false)
		e.app("alpha", "olga")
		e.app("beta", "ada")
		e.bucket("alpha-api", "alpha")
		e.bucket("alpha-web", "alpha", "alpha", "beta")
		e.bucket("beta-api", "beta")
		e.keyedBucket("alpha-keys", "alpha")
		e.grant("extra", "alpha", rbac.RoleViewer)
		fx.override()
		fx.mapping()
		fx.appToken()
		b := e.browser()
		b.signIn(fx.users[admin])
		// Some history: an edit through the console.
		if r := b.post("/buckets/alpha-api", editForm(fx, "alpha-api")); r.status != http.StatusSeeOther {
			t.Fatalf("%s: edit alpha-api: status %d\n%s", name, r.status, excerpt(r.body))
		}
		got := map[string]int{}
		table := probes()
		for _, rt := range e.rt.Engine().Routes() {
			if rt.Method != http.MethodGet {
				continue
			}
			p, ok := table[rt.Method+" "+rt.Path]
			if !ok {
				t.Fatalf("route %s %s has no probe", rt.Method, rt.Path)
			}
			path, _ := p.prepare(fx, admin)
			got[rt.Path] = b.get(path).status
		}
		for _, path := range extra {
			got[path] = b.get(path).status
		}
		// A member's lists: visibility and the audit log's per-app reads
		// (two apps: one range each, merged).
		e.grant("olga", "beta", rbac.RoleViewer)
		m := e.browser()
		m.signIn(fx.users[owner])
		for _, path := range memberPaths {
			got["member "+path] = m.get(path).status
		}
		status[name] = got
	}
	var paths []string
	for path := range status["mariadb"] {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	if len(paths) < 30 {
		t.Fatalf("only %d pages walked", len(paths))
	}
	for _, path := range paths {
		if m, d := status["mariadb"][path], status["embedded"][path]; m != d {
			t.Errorf("GET %s: %d on MariaDB, %d on the embedded engine", path, m, d)
		}
	}
	for _, path := range paths {
		// An admin may see every page: each answers or redirects. Single
		// sign-on's steps are no pages: without a provider they answer 404
		// and 401 (TestBrowserSSO walks them with one).
		if strings.HasPrefix(path, "/login/sso") {
			continue
		}
		if strings.HasPrefix(path, "member ") {
			if code := status["mariadb"][path]; code != http.StatusOK {
				t.Errorf("GET %s answers %d to a member on MariaDB", path, code)
			}
			continue
		}
		if code := status["mariadb"][path]; code >= 400 {
			t.Errorf("GET %s answers %d to an admin on MariaDB", path, code)
		}
	}
	t.Logf("%d pages walked on both engines", len(paths))
}

// memberPaths are the lists TestPagesOnEmbeddedEngine also reads as a
// member (an owner of alpha and a viewer of beta).
var memberPaths = []string{
	"/buckets", "/buckets?app=alpha", "/buckets?q=alpha", "/buckets?sort=denied", "/buckets?near=1", "/usage",
	"/apps/alpha", "/audit", "/audit?bucket=alpha", "/audit?bucket=alpha-api", "/audit?app=alpha",
	"/audit?before=1000000", "/audit?after=1",
}

// editForm is the edit form of a bucket of the fixture.
var editForm = func(fx *matrixFixture, name string) map[string][]string {
	b, err := fx.e.bkts.Get(context.Background(), name)
	if err != nil {
		fx.e.t.Fatalf("get %s: %v", name, err)
	}
	return map[string][]string{"max_permits": {"20"}, "rate": {"5 per second"}, "allowed_apps": {"alpha"},
		"owner_app": {"alpha"}, "version": {itoa(b.Version)}}
}
