package console

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/router"
	"github.com/sluicehq/sluice/internal/testenv"
)

// testPassword is every test user's password.
const testPassword = "correct horse battery"

// cheapHash keeps password hashing fast in tests; the parameters are
// stored with each hash, so production parameters are not involved.
var cheapHash = accounts.HashParams{Time: 1, Memory: 1024, Threads: 1}

// env is a console on a fresh database and a private Redis key space,
// served over a loopback listener.
type env struct {
	t      testing.TB
	db     *sqlx.DB
	rdb    *redis.Client
	ks     redisscript.Keyspace
	enf    *rbac.Enforcer
	s      *server
	rt     *router.Router
	reg    *prometheus.Registry
	srv    *httptest.Server
	acc    *accounts.Store
	apps   *apps.Store
	bkts   *buckets.Store
	system audit.Actor
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvOn(t, testenv.MySQL(t))
}

// newEnvOn builds the console on db; each of with may change the Config
// before the console is built.
// setup is what newEnvOn builds from; options change it.
type setup struct {
	manage  manage.Config
	console Config
	// metrics, when set, receives the router's and the console's metrics.
	metrics *prometheus.Registry
	// api mounts the JSON API beside the pages, as cmd/admin runs it.
	api bool
	// listener, when set, is where the console listens (a test that must
	// know its address before building it).
	listener net.Listener
}

// testRequestTimeout is the request timeout of newEnvOn's router.
const testRequestTimeout = 3 * time.Second

func newEnvOn(t testing.TB, db *sqlx.DB, with ...func(*setup)) *env {
	t.Helper()
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	enf, err := rbac.New(ctx, db)
	if err != nil {
		t.Fatalf("rbac.New: %v", err)
	}
	enf.Log = slog.New(slog.DiscardHandler)
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = enf.Run(rctx) }()
	ks := redisscript.Keyspace{Prefix: prefix + "b:"}
	acc := accounts.NewStore(db)
	acc.Hash = cheapHash
	st := setup{
		manage:  manage.Config{DB: db, Redis: rdb, Keyspace: ks, Enforcer: enf, Accounts: acc, Logger: slog.New(slog.DiscardHandler)},
		console: Config{Logger: slog.New(slog.DiscardHandler)},
	}
	for _, f := range with {
		f(&st)
	}
	cfg := st.console
	var reg prometheus.Registerer
	if st.metrics != nil {
		reg, cfg.Metrics = st.metrics, st.metrics
	}
	svc, err := manage.New(st.manage)
	if err != nil {
		t.Fatalf("manage.New: %v", err)
	}
	t.Cleanup(svc.Close)
	cfg.Service = svc
	s, err := newServer(cfg)
	if err != nil {
		t.Fatalf("newServer: %v", err)
	}
	rt, err := router.New(router.Config{Logger: cfg.Logger, RequestTimeout: testRequestTimeout, Metrics: reg})
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	s.routes(rt)
	if st.api {
		api.Mount(rt, api.Config{Service: svc, Logger: cfg.Logger})
	}
	srv := httptest.NewUnstartedServer(rt)
	if st.listener != nil {
		srv.Listener.Close()
		srv.Listener = st.listener
	}
	srv.Start()
	t.Cleanup(srv.Close)
	e := &env{t: t, db: db, rdb: rdb, ks: ks, enf: enf, s: s, rt: rt, srv: srv, reg: st.metrics, acc: acc,
		apps: apps.NewStore(db), bkts: buckets.NewStore(db), system: audit.Actor{User: "system", Via: "test"}}
	return e
}

// user creates a user, optionally an admin.
func (e *env) user(name string, admin bool) *accounts.User {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.acc.CreateUser(ctx, e.system, name, testPassword)
	if err != nil {
		e.t.Fatalf("create user %s: %v", name, err)
	}
	if admin {
		if err := e.enf.SetAdmin(ctx, e.system, name, true); err != nil {
			e.t.Fatalf("make %s admin: %v", name, err)
		}
	}
	return u
}

// app registers an app owned by owner.
func (e *env) app(name, owner string) {
	e.t.Helper()
	err := e.apps.Create(context.Background(), e.system, &apps.App{Name: name}, func(ctx context.Context, tx *database.Tx) error {
		return e.enf.GrantTx(ctx, tx, owner, name, rbac.RoleOwner)
	})
	if err != nil {
		e.t.Fatalf("create app %s: %v", name, err)
	}
}

func (e *env) grant(user, app string, r rbac.Role) {
	e.t.Helper()
	if err := e.enf.Grant(context.Background(), e.system, user, app, r); err != nil {
		e.t.Fatalf("grant %s %s on %s: %v", user, r, app, err)
	}
}

// bucket creates a bucket with a 100/min rate and capacity 10.
func (e *env) bucket(name, owner string, allowed ...string) *buckets.Bucket {
	e.t.Helper()
	r, _ := buckets.ParseRate("100/min")
	b := &buckets.Bucket{Name: name, OwnerApp: owner, MaxPermits: 10, Rate: r, AllowedApps: allowed}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		e.t.Fatalf("create bucket %s: %v", name, err)
	}
	return b
}

// keyedBucket creates a keyed bucket of owner: 10 tokens, 100 per minute.
func (e *env) keyedBucket(name, owner string) *buckets.Bucket {
	e.t.Helper()
	r, _ := buckets.ParseRate("100/min")
	b := &buckets.Bucket{Name: name, OwnerApp: owner, MaxPermits: 10, Rate: r, Keyed: true}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		e.t.Fatalf("create bucket %s: %v", name, err)
	}
	return b
}

// auditCount counts audit rows with action.
func (e *env) auditCount(action string) int {
	e.t.Helper()
	var n int
	if err := e.db.Get(&n, `SELECT COUNT(*) FROM audit_log WHERE action = ?`, action); err != nil {
		e.t.Fatalf("count audit rows: %v", err)
	}
	return n
}

// browser is an HTTP client with a cookie jar that behaves like a browser
// on this origin: it sends Sec-Fetch-Site and Origin, and it does not
// follow redirects, so tests see them.
type browser struct {
	e      *env
	c      *http.Client
	origin string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, origin: e.srv.URL, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn gives b a session of user without the sign-in form (which is
// throttled per address); the form itself is tested on its own.
func (b *browser) signIn(u *accounts.User) {
	b.e.t.Helper()
	token, err := b.e.acc.NewSession(context.Background(), u.ID, "127.0.0.1", "test")
	if err != nil {
		b.e.t.Fatalf("new session: %v", err)
	}
	b.setCookie(sessionCookie, token)
}

func (b *browser) setCookie(name, value string) {
	u, _ := url.Parse(b.e.srv.URL)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
}

func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.e.srv.URL)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// response is what a test looks at.
type response struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *browser) do(req *http.Request) response {
	b.e.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), header: resp.Header}
}

func (b *browser) get(path string) response {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.e.srv.URL+path, nil)
	req.Header.Set("Sec-Fetch-Site", "none")
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) response {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", b.origin)
	return b.do(req)
}

func (b *browser) postWith(path string, form url.Values, header map[string]string) response {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return b.do(req)
}

// wantStatus fails t unless r has status want.
func wantStatus(t testing.TB, what string, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s: status %d, want %d (location %q)\n%s", what, r.status, want, r.location, excerpt(r.body))
	}
}

// wantBody fails t unless the body contains every one of parts.
func wantBody(t testing.TB, what string, r response, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.body, p) {
			t.Fatalf("%s: body lacks %q\n%s", what, p, excerpt(r.body))
		}
	}
}

// excerpt keeps the main part of a page for failure messages.
func excerpt(body string) string {
	if i := strings.Index(body, "<main"); i >= 0 {
		body = body[i:]
	}
	if len(body) > 3000 {
		body = body[:3000] + "..."
	}
	return body
}
