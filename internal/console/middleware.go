package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
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
	_, user, err := s.accounts.Session(ctx(c), token)
	if err != nil {
		if errors.Is(err, errs.ErrUnavailable) || errs.HTTPStatus(err) >= 500 {
			s.fail(c, err)
			return
		}
		s.clearSessionCookie(c)
		s.denyAnonymous(c, "session ended or unknown")
		return
	}
	c.Set(keyUser, user)
	c.Set(keySession, token)
	c.Set(keyAdmin, s.enf.IsAdmin(user.Username))
	c.Next()
}

// denyAnonymous refuses a request without a valid session.
func (s *server) denyAnonymous(c *gin.Context, why string) {
	s.auditDenied(c, "", "", "", why)
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		next := c.Request.URL.RequestURI()
		c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(next))
		c.Abort()
		return
	}
	s.fail(c, errs.ErrUnauthenticated)
}

// adminOnly lets only admins through.
func (s *server) adminOnly(c *gin.Context) {
	if !isAdmin(c) {
		s.deny(c, "", "user", c.Param("user"), "admin role required")
		return
	}
	c.Next()
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

// actor is who the stores record as the author of a change.
func actor(c *gin.Context) audit.Actor {
	return audit.Actor{User: username(c), Via: "console", Addr: c.ClientIP()}
}

// deny refuses a request the signed-in user may not make: it is audited
// and answered 403.
func (s *server) deny(c *gin.Context, app, objectType, objectName, why string) {
	s.auditDenied(c, app, objectType, objectName, why)
	s.fail(c, errs.ErrForbidden)
}

// hide refuses access to an object the user may not even see: audited, and
// answered 404 exactly like a missing one, so names do not leak.
func (s *server) hide(c *gin.Context, app, objectType, objectName string) {
	s.auditDenied(c, app, objectType, objectName, "not visible to the user")
	s.fail(c, fmt.Errorf("%s %q: %w", objectType, objectName, errs.ErrNotFound))
}

// auditDenied writes an "access.denied" row. A failure to write it is
// logged; the request is refused either way.
func (s *server) auditDenied(c *gin.Context, app, objectType, objectName, why string) {
	a := actor(c)
	anonymous := a.User == ""
	if anonymous {
		a.User = "anonymous"
	}
	// Names come from the request: keep them storable whatever was sent.
	valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	e := audit.Entry{
		Action: "access.denied", ObjectType: objectType, ObjectName: valid(objectName), App: clip(valid(app), 63),
		Detail: valid(c.Request.Method + " " + c.Request.URL.Path + ": " + why),
	}
	if e.ObjectType == "" {
		e.ObjectType = "route"
	}
	var err error
	if anonymous {
		// Anyone can send these by the thousand: count all, log a sample.
		err = s.refusals.Record(ctx(c), a, e)
	} else {
		err = audit.Write(ctx(c), s.db, a, e)
	}
	if err != nil {
		s.log.WarnContext(ctx(c), "console: cannot audit a denied access", "err", err, "user", a.User,
			"path", c.Request.URL.Path)
	}
}

// crossOriginDenied answers a state-changing request that a browser marked
// as coming from another site.
func (s *server) crossOriginDenied(w http.ResponseWriter, r *http.Request) {
	e := audit.Entry{Action: "access.denied", ObjectType: "route",
		Detail: r.Method + " " + r.URL.Path + ": cross-origin request refused"}
	if err := s.refusals.Record(r.Context(), audit.Actor{User: "anonymous", Via: "console", Addr: remoteIP(r)}, e); err != nil {
		s.log.WarnContext(r.Context(), "console: cannot audit a cross-origin refusal", "err", err)
	}
	s.views.renderError(w, http.StatusForbidden, "Request refused",
		"This form was sent from another site, so it was refused. Reload the page and try again.")
}
