// Package api is Sluice's JSON API for automation: apps and their members,
// buckets, the audit log and a bucket's live Redis state, under /api/v1.
//
// It is a plain net/http handler built on the same stores and the same
// permission checks (rbac) as the console, so a rule holds the same way in
// both. Callers authenticate with a personal API token sent as
// "Authorization: Bearer <token>"; cookies are never read, so there is no
// cross-site request forgery surface. The contract, including the choices
// below, is the OpenAPI document served at /api/v1/openapi.json:
//
//   - A bucket or app the caller may not see answers 404, exactly like one
//     that does not exist, so names do not leak; a visible object the
//     caller may not change answers 403. Both are audited as
//     "access.denied".
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
	"context"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/manage"
)

// Prefix is the path every API route starts with.
const Prefix = "/api/v1"

// MaxBodyBytes caps a request body. The largest valid body, a bucket with
// 100 allowed apps and a 500 character description, is a few kilobytes.
const MaxBodyBytes = 64 << 10

// RequestTimeout bounds the work of one request, store calls included.
const RequestTimeout = 10 * time.Second

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
// for the mux and for the test that keeps openapi.json true.
type route struct {
	method string
	// path is the ServeMux pattern path, "/api/v1/buckets/{bucket}",
	// which is also the OpenAPI path.
	path   string
	handle handlerFunc
	// public routes need no token.
	public bool
}

func (s *server) routes() []route {
	return []route{
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
		{method: http.MethodPut, path: Prefix + "/buckets/{bucket}", handle: s.replaceBucket},
		{method: http.MethodPatch, path: Prefix + "/buckets/{bucket}", handle: s.patchBucket},
		{method: http.MethodDelete, path: Prefix + "/buckets/{bucket}", handle: s.deleteBucket},
		{method: http.MethodGet, path: Prefix + "/buckets/{bucket}/state", handle: s.bucketState},

		{method: http.MethodGet, path: Prefix + "/audit", handle: s.listAudit},
	}
}

// New returns the API handler. It serves paths under /api/v1/ and answers
// every other path with a JSON 404, so it is mounted as is:
// mux.Handle("/api/v1/", api.New(cfg)).
func New(cfg Config) http.Handler {
	s := &server{svc: cfg.Service, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.method+" "+rt.path, s.serve(rt))
	}
	return secure(fallback(mux, s))
}

// secure sets the headers every response carries. The API serves only JSON
// to programs: nothing may be framed, sniffed, cached or run as a page.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// fallback answers requests that match no route (404) or match a path but
// not its method (405, with Allow) with the API's JSON error body instead
// of ServeMux's plain text.
func fallback(mux *http.ServeMux, s *server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path.Clean(r.URL.Path) != r.URL.Path {
			// ServeMux would redirect to the cleaned path; a client
			// following that would replay a body. Refuse instead.
			s.writeError(w, r, &apiError{status: http.StatusNotFound, code: "not_found",
				message: "no such endpoint; see " + Prefix + "/openapi.json"})
			return
		}
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// Let the mux decide between 404 and 405, then replace its body.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", rec.header.Get("Allow"))
			s.writeError(w, r, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
				message: r.Method + " is not allowed here; allowed: " + rec.header.Get("Allow")})
		default:
			s.writeError(w, r, &apiError{status: http.StatusNotFound, code: "not_found",
				message: "no such endpoint; see " + Prefix + "/openapi.json"})
		}
	})
}

// statusRecorder captures what ServeMux's own 404 and 405 handlers write.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// serve wraps a route's handler: it authenticates the caller (unless the
// route is public), bounds the body, and turns a returned error into the
// JSON error body.
func (s *server) serve(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			// A bug must cost one request a 500, never the process or a
			// stack trace in the response.
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "api handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
				s.writeError(w, r, &apiError{status: http.StatusInternalServerError, code: "internal", message: "internal error"})
			}
		}()
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		}
		// A hung store must cost a 503, not a request that never ends.
		ctx, cancel := context.WithTimeout(r.Context(), RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		var c manage.Caller
		if !rt.public {
			var err error
			if c, err = s.authenticate(r); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if err := rt.handle(w, r, c); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// remoteAddr is the client address recorded in the audit log. Forwarding
// headers are not trusted: a proxy in front of Sluice logs its own view.
func remoteAddr(r *http.Request) string {
	addr := r.RemoteAddr
	if i := strings.LastIndexByte(addr, ':'); i > 0 && !strings.HasSuffix(addr, "]") {
		addr = addr[:i]
	}
	return strings.Trim(addr, "[]")
}
