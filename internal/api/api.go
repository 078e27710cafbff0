// Package api is Sluice's JSON API for automation: apps and their members,
// buckets, the audit log and a bucket's live Redis state, under /api/v1.
//
// It is an area of the one router, beside the console's pages, and only
// translates: every use case is the application layer's (manage), so a
// rule holds the same way in both. Callers authenticate with a personal API token sent as
// "Authorization: Bearer <token>"; cookies are never read, so there is no
// cross-site request forgery surface. The contract, including the choices
// below, is the OpenAPI document served at /api/v1/openapi.json:
//
//   - A bucket or app the caller may not see answers 404, exactly like one
//     that does not exist, so nothing it holds is shown (names are not
//     secret among users: a taken name answers 409, as docs/decisions.md
//     records); a visible object the caller may not change answers 403.
//     Both are audited as "access.denied".
//   - GET of a bucket or an app carries its version as a strong ETag
//     ("3"). PUT, PATCH and DELETE of a bucket require If-Match: a missing
//     header answers 428, a stale version 412. "If-Match: *" means
//     "whatever version is current".
//   - Lists page by an opaque cursor: ?cursor=&limit= in, next_cursor out.
//   - Every mutation is audited by its store with the actor
//     "user (api token NAME)"; besides, the first use of a token in each
//     minute is audited as "token.use".
package api

import (
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/router"
)

// Prefix is the path every API route starts with.
const Prefix = "/api/v1"

// Config holds what the API is built on.
type Config struct {
	// Service runs every use case.
	Service *manage.Service
	// Logger receives internal errors, which callers only see as a 500
	// with a generic message; nil means slog.Default().
	Logger *slog.Logger
}

// server holds the dependencies of the handlers.
type server struct {
	svc *manage.Service
	log *slog.Logger
}

// handlerFunc is an API handler: it writes its response on success and
// returns an error otherwise, which serve turns into a JSON error body.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c manage.Caller) error

// route is one API operation. The table of routes is the single source
// for the router and for the test that keeps openapi.json true.
type route struct {
	method string
	// path is the route's path as OpenAPI writes it,
	// "/api/v1/buckets/{bucket}"; gin gets it as "/buckets/:bucket".
	path   string
	handle handlerFunc
	// public routes need no token.
	public bool
}

func (s *server) routes() []route {
	return append([]route{
		{method: http.MethodGet, path: Prefix + "/openapi.json", handle: s.openAPI, public: true},
		{method: http.MethodGet, path: Prefix + "/me", handle: s.me},

		{method: http.MethodGet, path: Prefix + "/apps", handle: s.listApps},
		{method: http.MethodPost, path: Prefix + "/apps", handle: s.createApp},
		{method: http.MethodGet, path: Prefix + "/apps/{app}", handle: s.getApp},
		{method: http.MethodGet, path: Prefix + "/apps/{app}/members", handle: s.listMembers},
		{method: http.MethodPut, path: Prefix + "/apps/{app}/members/{user}", handle: s.grantMember},
		{method: http.MethodDelete, path: Prefix + "/apps/{app}/members/{user}", handle: s.revokeMember},

		{method: http.MethodGet, path: Prefix + "/buckets", handle: s.listBuckets},
		{method: http.MethodPost, path: Prefix + "/buckets", handle: s.createBucket},
		{method: http.MethodGet, path: Prefix + "/buckets/{bucket}", handle: s.getBucket},
		{method: http.MethodPut, path: Prefix + "/buckets/{bucket}", handle: s.updateBucket},
		{method: http.MethodPatch, path: Prefix + "/buckets/{bucket}", handle: s.updateBucket},
		{method: http.MethodDelete, path: Prefix + "/buckets/{bucket}", handle: s.deleteBucket},
		{method: http.MethodGet, path: Prefix + "/buckets/{bucket}/state", handle: s.bucketState},
		{method: http.MethodGet, path: Prefix + "/buckets/{bucket}/top-keys", handle: s.topKeys},
		{method: http.MethodGet, path: Prefix + "/buckets/{bucket}/key-state", handle: s.keyState},
		{method: http.MethodGet, path: Prefix + "/buckets/{bucket}/overrides", handle: s.listOverrides},
		{method: http.MethodPost, path: Prefix + "/buckets/{bucket}/overrides", handle: s.createOverride},
		{method: http.MethodGet, path: Prefix + "/buckets/{bucket}/overrides/{id}", handle: s.getOverride},
		{method: http.MethodPut, path: Prefix + "/buckets/{bucket}/overrides/{id}", handle: s.updateOverride},
		{method: http.MethodPatch, path: Prefix + "/buckets/{bucket}/overrides/{id}", handle: s.updateOverride},
		{method: http.MethodDelete, path: Prefix + "/buckets/{bucket}/overrides/{id}", handle: s.deleteOverride},

		{method: http.MethodGet, path: Prefix + "/audit", handle: s.listAudit},
	}, s.mappingRoutes()...)
}

// Mount adds the API to rt as the area under Prefix.
func Mount(rt *router.Router, cfg Config) { newServer(cfg).mount(rt) }

func newServer(cfg Config) *server {
	s := &server{svc: cfg.Service, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

func (s *server) mount(rt *router.Router) {
	g := s.area(rt, Prefix)
	for _, rt := range s.routes() {
		g.Handle(rt.method, ginPath(rt.path), router.Label(rt.path), s.serve(rt))
	}
}

// area adds the API's area to rt: its headers and its JSON answers to
// unknown paths, wrong methods and panics.
func (s *server) area(rt *router.Router, prefix string) *gin.RouterGroup {
	return rt.Area(router.Area{Prefix: prefix, Headers: secure, Fail: s.fail,
		NotFound: s.routeNotFound, MethodNotAllowed: s.methodNotAllowed,
		Unclean: func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errNoEndpoint) }})
}

// New returns a handler serving the API alone, on a router of its own
// that answers every other path the API's way too.
func New(cfg Config) http.Handler {
	rt, err := router.New(router.Config{Logger: cfg.Logger})
	if err != nil {
		panic(err) // no trusted proxies, no metrics: nothing can fail
	}
	s := newServer(cfg)
	s.mount(rt)
	s.area(rt, "")
	return rt
}

// ginPath turns the route table's OpenAPI path ("/buckets/{bucket}")
// into gin's ("/buckets/:bucket"), relative to Prefix.
func ginPath(p string) string {
	p = strings.TrimPrefix(p, Prefix)
	return pathParam.ReplaceAllString(p, ":$1")
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// secure sets the API's headers beside the router's common ones. The API
// serves only JSON to programs: nothing may run as a page.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("Referrer-Policy", "no-referrer")
}

// errNoEndpoint answers a path that names no route.
var errNoEndpoint = &apiError{status: http.StatusNotFound, code: "not_found",
	message: "no such endpoint; see " + Prefix + "/openapi.json"}

func (s *server) routeNotFound(c *gin.Context) { s.writeError(c.Writer, c.Request, errNoEndpoint) }

// methodNotAllowed answers a path that exists with another method (gin
// has set Allow).
func (s *server) methodNotAllowed(c *gin.Context) {
	allow := c.Writer.Header().Get("Allow")
	s.writeError(c.Writer, c.Request, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
		message: c.Request.Method + " is not allowed here; allowed: " + allow})
}

// fail answers a request that failed outside a handler (a panic).
func (s *server) fail(c *gin.Context, err error) {
	s.writeError(c.Writer, c.Request, &apiError{status: http.StatusInternalServerError, code: "internal", message: "internal error"})
}

// serve wraps a route's handler: it authenticates the caller (unless the
// route is public) and turns a returned error into the JSON error body.
func (s *server) serve(rt route) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		for _, p := range c.Params {
			r.SetPathValue(p.Key, p.Value)
		}
		var who manage.Caller
		if !rt.public {
			var err error
			if who, err = s.authenticate(c); err != nil {
				s.writeError(c.Writer, r, err)
				return
			}
		}
		if err := rt.handle(c.Writer, r, who); err != nil {
			s.writeError(c.Writer, r, err)
		}
	}
}
