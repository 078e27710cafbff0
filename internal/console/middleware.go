package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// contentSecurityPolicy allows only this origin's own files: no inline
// script or style, no plugins, no framing, forms only to this origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every console response carries, before
// anything else runs, so that 404s, 405s, refusals and static files have
// them too.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		// Pages show private data; static files override this.
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// maxFormBytes caps a request body. The largest form, a bucket with 100
// allowed apps and a 500 character description, is a few kilobytes.
const maxFormBytes = 64 << 10

func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a logged 500 page. Handlers are written not
// to panic; this keeps a bug from showing a stack trace or killing the
// connection.
func (s *server) recoverer(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(c.Request.Context(), "console: panic", "method", c.Request.Method,
				"path", c.Request.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				s.fail(c, fmt.Errorf("panic: %v", v))
			}
			c.Abort()
		}
	}()
	c.Next()
}

// withTimeout bounds the request's context, so that a hung store gives a
// 503 rather than a hung page.
func (s *server) withTimeout(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

// Context keys of the signed-in user.
const (
	keyUser    = "console.user"
	keySession = "console.session"
	keyAdmin   = "console.admin"
)

// sessionCookie names the cookie that carries the session id.
const sessionCookie = "sluice_session"

// signedIn lets only requests with a live session through. Others are
// audited as denied and sent to the sign-in page (GET) or refused (401).
func (s *server) signedIn(c *gin.Context) {
	token, err := c.Cookie(sessionCookie)
	if err != nil || token == "" {
		s.denyAnonymous(c, "no session")
		return
	}
	user, err := s.svc.Session(ctx(c), token)
	if err != nil {
		if errs.HTTPStatus(err) >= 500 {
			s.fail(c, err)
			return
		}
		s.clearSessionCookie(c)
		s.denyAnonymous(c, "session ended or unknown")
		return
	}
	c.Set(keyUser, user)
	c.Set(keySession, token)
	c.Set(keyAdmin, s.svc.IsAdmin(manage.Caller{User: user}))
	c.Next()
}

// denyAnonymous refuses a request without a valid session.
func (s *server) denyAnonymous(c *gin.Context, why string) {
	err := s.svc.Refuse(ctx(c), caller(c), manage.Refusal{Why: why}, errs.ErrUnauthenticated)
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		next := c.Request.URL.RequestURI()
		c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(next))
		c.Abort()
		return
	}
	s.fail(c, err)
}

// me returns the signed-in user; only handlers behind signedIn call it.
func me(c *gin.Context) *accounts.User {
	u, _ := c.Get(keyUser)
	user, _ := u.(*accounts.User)
	return user
}

// username returns the signed-in user's name, or "" for anonymous requests.
func username(c *gin.Context) string {
	if u := me(c); u != nil {
		return u.Username
	}
	return ""
}

func isAdmin(c *gin.Context) bool { return c.GetBool(keyAdmin) }

// caller is who the request is, for the application layer.
func caller(c *gin.Context) manage.Caller {
	return manage.Caller{User: me(c), Addr: c.ClientIP(), Request: c.Request.Method + " " + c.Request.URL.Path}
}

// crossOriginDenied answers a state-changing request that a browser marked
// as coming from another site.
func (s *server) crossOriginDenied(w http.ResponseWriter, r *http.Request) {
	who := manage.Caller{Addr: remoteIP(r), Request: r.Method + " " + r.URL.Path}
	_ = s.svc.Refuse(r.Context(), who, manage.Refusal{Why: "cross-origin request refused"}, errs.ErrForbidden)
	s.views.renderError(w, http.StatusForbidden, "Request refused",
		"This form was sent from another site, so it was refused. Reload the page and try again.")
}
