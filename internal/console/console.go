// Package console is Sluice's web console: the pages teams use to register
// apps, grant roles, define buckets and read the audit log.
//
// It is the only package that uses gin. Pages are server-rendered from
// html/template files parsed once at start-up; every form posts, then
// redirects (POST-redirect-GET). Every request is checked on the server:
// the session cookie names the user, rbac decides, and every refusal is
// written to the audit log as "access.denied".
//
// Security choices, all in this package:
//   - Sessions live in MySQL; the cookie carries only a random id and is
//     HttpOnly, SameSite=Lax, and Secure when served over TLS (or when
//     Config.SecureCookies is set behind a TLS-terminating proxy). Signing
//     in always issues a new id and ends the old session; signing out ends
//     the session on the server.
//   - Cross-site request forgery: http.CrossOriginProtection refuses
//     state-changing requests a browser marks as cross-origin; no handler
//     changes anything on GET.
//   - Every response carries a CSP without 'unsafe-inline', nosniff,
//     frame-ancestors 'none' with X-Frame-Options DENY, and a referrer policy.
//   - Sign-in attempts are throttled by Sluice's own token buckets, 5 per
//     5 minutes per user name and per client address.
package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/usage"
)

// Config holds what the console is built on. DB and Enforcer are
// required; the rest have defaults. Without Redis the console works, but
// shows no live bucket state and throttles sign-ins per process only.
type Config struct {
	// DB is the MySQL pool of every store.
	DB *sqlx.DB
	// Redis serves the live state of buckets and the sign-in throttle.
	Redis redis.UniversalClient
	// Keyspace is the sync worker's key prefix, to read live bucket state.
	Keyspace redisscript.Keyspace
	// Enforcer answers every permission question.
	Enforcer *rbac.Enforcer
	// ThrottlePrefix is the Redis key prefix of the console's own sign-in
	// throttle buckets. It must differ from Keyspace's prefix, so that the
	// sync worker never sees (nor deletes) them. Empty means
	// "sluice-internal:".
	ThrottlePrefix string
	// SecureCookies marks the session cookie Secure even on plain HTTP
	// requests: set it behind a proxy that terminates TLS.
	SecureCookies bool
	// TrustedProxies lists the proxies whose X-Forwarded-For is believed
	// when telling the client address (for the audit log and the sign-in
	// throttle). Empty means the connection's address is used as is.
	TrustedProxies []string
	// API, when set, serves /api/v1/ (the JSON API, which authenticates by
	// token, not by cookie).
	API http.Handler
	// RequestTimeout bounds the store calls of one request, so that a hung
	// database gives a 503 rather than a hung page. 0 means 10 s.
	RequestTimeout time.Duration
	// Logger receives internal errors; nil means slog.Default().
	Logger *slog.Logger
	// Usage reads the usage counts of the bucket charts and the overview.
	// Nil means a reader on Redis and Keyspace (none without Redis).
	Usage *usage.Reader
	// Metrics, when set, receives the console's Prometheus collectors:
	// requests and their latency by route template, and sign-in results.
	// Nil means no metrics. The console does not serve them: expose the
	// registry on a listener of its own.
	Metrics prometheus.Registerer
}

// server holds the console's dependencies; handlers are its methods, one
// file per resource.
type server struct {
	cfg      Config
	log      *slog.Logger
	db       *sqlx.DB
	rdb      redis.UniversalClient
	ks       redisscript.Keyspace
	enf      *rbac.Enforcer
	apps     *apps.Store
	buckets  *buckets.Store
	audit    *audit.Store
	accounts *accounts.Store
	views    *views
	throttle *throttle
	refusals *audit.Refusals
	metrics  *metrics
	usage    *usage.Reader
	engine   *gin.Engine
}

// Console is the web console, an http.Handler. Close it when done.
type Console struct {
	s *server
	h http.Handler
}

// New returns the console. It parses every template once; a broken
// template is a programming error reported here, at start-up, never per
// request.
func New(cfg Config) (*Console, error) {
	if cfg.DB == nil || cfg.Enforcer == nil {
		return nil, errors.New("console: DB and Enforcer are required")
	}
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	return &Console{s: s, h: s.handler()}, nil
}

// ServeHTTP serves the console's pages, its static files and, when
// configured, the JSON API.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.h.ServeHTTP(w, r) }

// Close stops the background work of the sign-in throttle. It does not
// close the stores.
func (c *Console) Close() error {
	c.s.throttle.close()
	return nil
}

func newServer(cfg Config) (*server, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.ThrottlePrefix == "" {
		cfg.ThrottlePrefix = "sluice-internal:"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ksPrefix := cfg.Keyspace.Prefix
	if ksPrefix == "" {
		ksPrefix = redisscript.DefaultPrefix
	}
	if strings.HasPrefix(cfg.ThrottlePrefix, ksPrefix) || strings.HasPrefix(ksPrefix, cfg.ThrottlePrefix) {
		return nil, fmt.Errorf("console: throttle prefix %q overlaps the bucket key prefix %q", cfg.ThrottlePrefix, ksPrefix)
	}
	v, err := parseViews()
	if err != nil {
		return nil, err
	}
	v.log = log
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	s := &server{
		cfg: cfg, log: log, db: cfg.DB, rdb: cfg.Redis, ks: cfg.Keyspace, enf: cfg.Enforcer,
		apps: apps.NewStore(cfg.DB), buckets: buckets.NewStore(cfg.DB), audit: audit.NewStore(cfg.DB),
		accounts: accounts.NewStore(cfg.DB), views: v,
		throttle: newThrottle(cfg.Redis, cfg.ThrottlePrefix, log), metrics: m, usage: cfg.Usage,
	}
	s.refusals = audit.NewRefusals(cfg.DB)
	if m != nil {
		s.refusals.Counter = m.refusals
	}
	if s.usage == nil && cfg.Redis != nil {
		s.usage = usage.NewReader(cfg.Redis, cfg.Keyspace)
	}
	s.engine, err = s.routes()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// routes builds the gin engine. Every route is listed here, with the
// guard that decides who may call it; the access-control test walks
// exactly this table.
func (s *server) routes() (*gin.Engine, error) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectFixedPath = false
	e.ContextWithFallback = true
	if err := e.SetTrustedProxies(s.cfg.TrustedProxies); err != nil {
		return nil, err
	}
	e.Use(markRoute, s.recoverer, s.withTimeout)
	e.NoRoute(s.notFound)
	e.NoMethod(s.methodNotAllowed)

	e.GET("/static/*file", s.static)
	e.GET("/healthz", s.healthz)
	e.GET("/login", s.loginForm)
	e.POST("/login", s.login)

	u := e.Group("", s.signedIn)
	u.POST("/logout", s.logout)
	u.GET("/", s.home)

	u.GET("/apps", s.listApps)
	u.GET("/apps/new", s.newApp)
	u.POST("/apps", s.createApp)
	u.GET("/apps/:app", s.showApp)
	u.POST("/apps/:app/members", s.grantMember)
	u.POST("/apps/:app/members/:user/revoke", s.revokeMember)

	u.GET("/buckets", s.listBuckets)
	u.GET("/buckets/new", s.newBucket)
	u.POST("/buckets", s.createBucket)
	u.GET("/buckets/:bucket", s.showBucket)
	u.GET("/buckets/:bucket/edit", s.editBucket)
	u.POST("/buckets/:bucket", s.updateBucket)
	u.GET("/buckets/:bucket/delete", s.confirmDeleteBucket)
	u.POST("/buckets/:bucket/delete", s.deleteBucket)

	u.GET("/usage", s.usageOverview)

	u.GET("/audit", s.listAudit)

	u.GET("/tokens", s.listTokens)
	u.POST("/tokens", s.createToken)
	u.POST("/tokens/:id/revoke", s.revokeToken)

	a := u.Group("", s.adminOnly)
	a.GET("/users", s.listUsers)
	a.POST("/users", s.createUser)
	a.POST("/users/:user/disable", s.disableUser)
	a.POST("/users/:user/enable", s.enableUser)
	a.POST("/users/:user/admin", s.setAdmin)
	a.POST("/users/:user/password", s.resetPassword)
	return e, nil
}

// handler wraps the engine in what must hold for every page response,
// including the router's own 404 and 405 and cross-origin refusals: the
// security headers, the body size cap and the forgery check. The JSON API,
// when configured, is served beside the pages with headers of its own.
func (s *server) handler() http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(s.crossOriginDenied))
	pages := securityHeaders(limitBody(cop.Handler(s.engine)))
	h := pages
	if api := s.cfg.API; api != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == apiPrefix || strings.HasPrefix(r.URL.Path, apiPrefix+"/") {
				api.ServeHTTP(w, r)
				return
			}
			pages.ServeHTTP(w, r)
		})
	}
	if s.metrics != nil {
		h = s.metrics.instrument(h)
	}
	return h
}

// apiPrefix is where Config.API is mounted.
const apiPrefix = "/api/v1"

// ctx returns the request's context, bounded by RequestTimeout.
func ctx(c *gin.Context) context.Context { return c.Request.Context() }
