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
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/manage"
)

// Config holds what the console is built on. Service is required; the
// rest have defaults.
type Config struct {
	// Service runs every use case the pages offer.
	Service *manage.Service
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
	// Metrics, when set, receives the console's Prometheus collectors:
	// requests and their latency by route template, and sign-in results.
	// Nil means no metrics. The console does not serve them: expose the
	// registry on a listener of its own.
	Metrics prometheus.Registerer
}

// server holds the console's dependencies; handlers are its methods, one
// file per resource.
type server struct {
	cfg     Config
	log     *slog.Logger
	svc     *manage.Service
	views   *views
	metrics *metrics
	engine  *gin.Engine
}

// Console is the web console, an http.Handler.
type Console struct {
	s *server
	h http.Handler
}

// New returns the console. It parses every template once; a broken
// template is a programming error reported here, at start-up, never per
// request.
func New(cfg Config) (*Console, error) {
	if cfg.Service == nil {
		return nil, errors.New("console: Service is required")
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

func newServer(cfg Config) (*server, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
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
	s := &server{cfg: cfg, log: log, svc: cfg.Service, views: v, metrics: m}
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

	u.GET("/users", s.listUsers)
	u.POST("/users", s.createUser)
	u.POST("/users/:user/disable", s.disableUser)
	u.POST("/users/:user/enable", s.enableUser)
	u.POST("/users/:user/admin", s.setAdmin)
	u.POST("/users/:user/password", s.resetPassword)
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
