// Package router is Sluice's one HTTP stack: a single gin engine that
// serves the console's pages and the JSON API, each an Area with its own
// prefix, headers, guards and error format, sharing what every request
// needs: panic recovery, the body size cap, the request timeout, the
// client address (trusted proxies applied), logging and metrics.
package router

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxBodyBytes caps every request body. The largest valid one, a bucket
// with 100 allowed apps and a 500 character description, is a few
// kilobytes.
const MaxBodyBytes = 64 << 10

// DefaultRequestTimeout bounds the work of one request, store calls
// included, so that a hung store costs a 503 rather than a hung request.
const DefaultRequestTimeout = 10 * time.Second

// Config holds what the router is built with; every field is optional.
type Config struct {
	// TrustedProxies lists the proxies whose X-Forwarded-For is believed
	// when telling the client address. Empty means the connection's
	// address is used as is.
	TrustedProxies []string
	// RequestTimeout bounds one request; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger receives panics and, at debug level, every request; nil
	// means slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives the request counters and latencies by
	// route template. The router does not serve them.
	Metrics prometheus.Registerer
}

// Area is a part of the site with its own conventions.
type Area struct {
	// Prefix is the path the area serves ("/api/v1"); "" is every path no
	// other area claims.
	Prefix string
	// Headers sets the headers every response of the area carries,
	// before anything else runs.
	Headers func(http.Header)
	// Guard, if set, runs on every request of the area before routing
	// (cross-origin protection): it either calls c.Next or answers.
	Guard gin.HandlerFunc
	// Fail answers a request that failed in the area's format (a panic,
	// an error of the errs vocabulary).
	Fail func(c *gin.Context, err error)
	// NotFound and MethodNotAllowed answer unrouted requests of the area.
	NotFound, MethodNotAllowed gin.HandlerFunc
	// Unclean, if set, answers a request whose path is not in canonical
	// form (a trailing slash, "//", "..") instead of routing or
	// redirecting it: a client following a redirect could replay a body.
	Unclean http.HandlerFunc
}

// Router is the one gin engine. It is an http.Handler.
type Router struct {
	engine  *gin.Engine
	areas   []*Area
	log     *slog.Logger
	timeout time.Duration
	metrics *metrics
	handler http.Handler
}

// New returns a router without areas.
func New(cfg Config) (*Router, error) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectFixedPath = false
	e.ContextWithFallback = true
	if err := e.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("trusted proxies: %w", err)
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	r := &Router{engine: e, log: cfg.Logger, timeout: cfg.RequestTimeout, metrics: m}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.timeout <= 0 {
		r.timeout = DefaultRequestTimeout
	}
	e.Use(markRoute, r.enter, r.recoverer, r.logRequest, r.limits, r.guard)
	e.NoRoute(func(c *gin.Context) { areaOf(c).NotFound(c) })
	e.NoMethod(func(c *gin.Context) { areaOf(c).MethodNotAllowed(c) })
	r.handler = http.HandlerFunc(r.serve)
	if m != nil {
		r.handler = m.instrument(r.handler)
	}
	return r, nil
}

// Area adds a and returns the route group of its prefix.
func (r *Router) Area(a Area) *gin.RouterGroup {
	r.areas = append(r.areas, &a)
	return r.engine.Group(a.Prefix)
}

// Engine is the gin engine, for listing routes.
func (r *Router) Engine() *gin.Engine { return r.engine }

// SetTrustedProxies replaces the proxies whose X-Forwarded-For is believed.
func (r *Router) SetTrustedProxies(proxies []string) error {
	return r.engine.SetTrustedProxies(proxies)
}

// ServeHTTP serves every area.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.handler.ServeHTTP(w, req) }

func (r *Router) serve(w http.ResponseWriter, req *http.Request) {
	if a := r.areaFor(req.URL.Path); a != nil && a.Unclean != nil && path.Clean(req.URL.Path) != req.URL.Path {
		commonHeaders(w.Header())
		if a.Headers != nil {
			a.Headers(w.Header())
		}
		a.Unclean(w, req)
		return
	}
	r.engine.ServeHTTP(w, req)
}

// areaFor returns the area of p: the longest prefix that matches.
func (r *Router) areaFor(p string) *Area {
	var best *Area
	for _, a := range r.areas {
		if a.Prefix == "" || p == a.Prefix || strings.HasPrefix(p, a.Prefix+"/") {
			if best == nil || len(a.Prefix) > len(best.Prefix) {
				best = a
			}
		}
	}
	return best
}

const areaKey = "router.area"

// fallbackArea answers in plain text where no area is configured.
var fallbackArea = &Area{
	Fail: func(c *gin.Context, _ error) { c.String(http.StatusInternalServerError, "internal error\n") },
	NotFound: func(c *gin.Context) {
		c.String(http.StatusNotFound, "not found\n")
	},
	MethodNotAllowed: func(c *gin.Context) { c.String(http.StatusMethodNotAllowed, "method not allowed\n") },
}

func areaOf(c *gin.Context) *Area {
	if a, ok := c.Get(areaKey); ok {
		return a.(*Area)
	}
	return fallbackArea
}

// enter finds the request's area and sets its headers, before anything
// else, so that 404s, 405s and refusals carry them too.
func (r *Router) enter(c *gin.Context) {
	a := r.areaFor(c.Request.URL.Path)
	if a == nil {
		a = fallbackArea
	}
	c.Set(areaKey, a)
	commonHeaders(c.Writer.Header())
	if a.Headers != nil {
		a.Headers(c.Writer.Header())
	}
	c.Next()
}

// commonHeaders are the headers every response carries, whatever its
// area: nothing is sniffed, framed, cached or read by another origin.
// An area adds its own (the CSP, the referrer policy) and may override
// these (static files are cached).
func commonHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// recoverer turns a panic into a logged 500 in the area's format.
// Handlers are written not to panic; this keeps a bug from showing a
// stack trace or killing the connection.
func (r *Router) recoverer(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			r.log.ErrorContext(c.Request.Context(), "request panicked", "method", c.Request.Method,
				"path", c.Request.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				areaOf(c).Fail(c, fmt.Errorf("panic: %v", v))
			}
			c.Abort()
		}
	}()
	c.Next()
}

// logRequest logs every request at debug level.
func (r *Router) logRequest(c *gin.Context) {
	start := time.Now()
	c.Next()
	r.log.DebugContext(c.Request.Context(), "request", "method", c.Request.Method, "route", c.FullPath(),
		"status", c.Writer.Status(), "duration", time.Since(start), "addr", c.ClientIP())
}

// limits caps the body and bounds the request's context.
func (r *Router) limits(c *gin.Context) {
	if c.Request.Body != nil {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), r.timeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

// guard runs the area's guard, if any.
func (r *Router) guard(c *gin.Context) {
	if g := areaOf(c).Guard; g != nil {
		g(c)
		return
	}
	c.Next()
}

// ClientAddr is the client's address as every part of Sluice records it:
// the connection's, or the one a trusted proxy forwarded.
func ClientAddr(c *gin.Context) string { return c.ClientIP() }

// Label names the route of the requests it handles in the metrics; a
// group whose routes are spelled differently from gin's templates (the
// API's "{bucket}") puts it first in each route's handlers.
func Label(route string) gin.HandlerFunc {
	return func(c *gin.Context) {
		SetRoute(c, route)
		c.Next()
	}
}

// SetRoute sets the route label of the request's metrics; a guard that
// refuses a request before it reaches its route labels it UnmatchedRoute.
func SetRoute(c *gin.Context, route string) {
	if slot, ok := c.Request.Context().Value(routeSlotKey{}).(*routeSlot); ok {
		slot.route = route
	}
}
