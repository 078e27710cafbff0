// Package console is Sluice's web console: the pages teams use to register
// apps, grant roles, define buckets and read the audit log.
//
// It is the pages area of the one router (internal/router) and only
// translates: every use case is the application layer's (manage). Pages
// are server-rendered from html/template files parsed once at start-up;
// every form posts, then redirects (POST-redirect-GET). Every request is checked on the server:
// the session cookie names the user, rbac decides, and every refusal is
// written to the audit log as "access.denied".
//
// Security choices of the pages:
//   - Sessions live in MySQL; the cookie carries only a random id and is
//     HttpOnly, SameSite=Lax, and Secure when served over TLS (or when
//     Config.SecureCookies is set behind a TLS-terminating proxy). Signing
//     in always issues a new id and ends the old session; signing out ends
//     the session on the server.
//   - Cross-site request forgery: http.CrossOriginProtection refuses
//     state-changing requests a browser marks as cross-origin; no handler
//     changes anything on GET but single sign-on's start and callback,
//     whose state is bound to the browser and good once (see sso.go).
//   - Every response carries a CSP without 'unsafe-inline' and a referrer
//     policy, beside the router's nosniff and X-Frame-Options DENY.
//   - Sign-in attempts are throttled (manage), 5 per 5 minutes per user
//     name and per client address.
package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/router"
	"github.com/sluicehq/sluice/internal/sso"
)

// Config holds what the console is built on. Service is required.
type Config struct {
	// Service runs every use case the pages offer.
	Service *manage.Service
	// SecureCookies marks the session cookie Secure even on plain HTTP
	// requests: set it behind a proxy that terminates TLS.
	SecureCookies bool
	// Logger receives internal errors; nil means slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives the sign-in counter. The request
	// counters are the router's.
	Metrics prometheus.Registerer
}

// server holds the console's dependencies; handlers are its methods, one
// file per resource.
type server struct {
	cfg     Config
	log     *slog.Logger
	svc     *manage.Service
	views   *views
	signins *prometheus.CounterVec
}

// Mount adds the console's pages to rt, as the area of every path that no
// other area claims. It parses every template once; a broken template is
// a programming error reported here, at start-up, never per request.
func Mount(rt *router.Router, cfg Config) error {
	if cfg.Service == nil {
		return errors.New("console: Service is required")
	}
	s, err := newServer(cfg)
	if err != nil {
		return err
	}
	s.routes(rt)
	return nil
}

func newServer(cfg Config) (*server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	v, err := parseViews()
	if err != nil {
		return nil, err
	}
	v.log = log
	signins, err := newSignins(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	return &server{cfg: cfg, log: log, svc: cfg.Service, views: v, signins: signins}, nil
}

// routes adds the pages area to rt. Every route is listed here, with the
// guard that decides who may call it; the access-control test walks
// exactly this table.
func (s *server) routes(rt *router.Router) {
	cop := http.NewCrossOriginProtection()
	e := rt.Area(router.Area{Headers: securityHeaders, Guard: s.sameOrigin(cop), Fail: s.fail,
		NotFound: s.notFound, MethodNotAllowed: s.methodNotAllowed})

	e.GET("/static/*file", s.static)
	e.GET("/healthz", s.healthz)
	e.GET("/login", s.loginForm)
	e.POST("/login", s.login)
	e.GET("/login/sso", s.beginSSO)
	e.GET(sso.CallbackPath, s.finishSSO)

	u := e.Group("", s.signedIn)
	u.POST("/logout", s.logout)
	u.GET("/", s.home)

	u.GET("/apps", s.listApps)
	u.GET("/apps/new", s.newApp)
	u.POST("/apps", s.createApp)
	u.GET("/apps/:app", s.showApp)
	u.POST("/apps/:app/members", s.grantMember)
	u.GET("/apps/:app/members/:user/revoke", s.confirmRevokeMember)
	u.POST("/apps/:app/members/:user/revoke", s.revokeMember)
	u.POST("/apps/:app/mappings", s.createMapping)
	u.GET("/apps/:app/mappings/:id/delete", s.confirmDeleteMapping)
	u.POST("/apps/:app/mappings/:id/delete", s.deleteMapping)
	u.POST("/apps/:app/tokens", s.createAppToken)
	u.GET("/apps/:app/tokens/:id/revoke", s.confirmRevokeAppToken)
	u.POST("/apps/:app/tokens/:id/revoke", s.revokeAppToken)

	u.GET("/buckets", s.listBuckets)
	u.GET("/buckets/new", s.newBucket)
	u.POST("/buckets", s.createBucket)
	u.GET("/buckets/:bucket", s.showBucket)
	u.GET("/buckets/:bucket/state.json", s.bucketStateJSON)
	u.GET("/live/buckets.json", s.bucketStatesJSON)
	u.GET("/buckets/:bucket/edit", s.editBucket)
	u.POST("/buckets/:bucket", s.updateBucket)
	u.GET("/buckets/:bucket/delete", s.confirmDeleteBucket)
	u.POST("/buckets/:bucket/delete", s.deleteBucket)
	u.POST("/buckets/:bucket/overrides", s.createOverride)
	u.GET("/buckets/:bucket/overrides/:id/edit", s.editOverride)
	u.POST("/buckets/:bucket/overrides/:id/edit", s.updateOverride)
	u.GET("/buckets/:bucket/overrides/:id/delete", s.confirmDeleteOverride)
	u.POST("/buckets/:bucket/overrides/:id/delete", s.deleteOverride)

	u.GET("/usage", s.usageOverview)

	u.GET("/audit", s.listAudit)

	u.GET("/tokens", s.listTokens)
	u.POST("/tokens", s.createToken)
	u.POST("/tokens/:id/revoke", s.revokeToken)

	u.GET("/account", s.account)
	u.POST("/account/password", s.changePassword)

	u.GET("/users", s.listUsers)
	u.POST("/users", s.createUser)
	u.POST("/users/:user/disable", s.disableUser)
	u.POST("/users/:user/enable", s.enableUser)
	u.POST("/users/:user/admin", s.setAdmin)
	u.POST("/users/:user/password", s.resetPassword)
	u.POST("/users/:user/tokens/:id/revoke", s.revokeUserToken)
	u.POST("/users/:user/unlock", s.unlockUser)
	u.POST("/users/unlock-address", s.unlockAddress)
}

// ctx returns the request's context, bounded by the router's timeout.
func ctx(c *gin.Context) context.Context { return c.Request.Context() }
