package console

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/router"
)

// contentSecurityPolicy allows only this origin's own files: no inline
// script or style, no plugins, no framing, forms only to this origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the pages' headers beside the router's common ones
// (nosniff, no framing, no caching: pages show private data; static files
// override the caching).
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
}

// sameOrigin refuses state-changing requests that a browser marks as
// coming from another site, before routing, so that no handler ever sees
// one.
func (s *server) sameOrigin(cop *http.CrossOriginProtection) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := cop.Check(c.Request); err != nil {
			router.SetRoute(c, router.UnmatchedRoute)
			_ = s.svc.Refuse(ctx(c), caller(c), manage.Refusal{Why: "cross-origin request refused"}, errs.ErrForbidden)
			s.views.renderError(c.Writer, http.StatusForbidden, "Request refused",
				"This form was sent from another site, so it was refused. Reload the page and try again.")
			c.Abort()
			return
		}
		c.Next()
	}
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
	return manage.Caller{User: me(c), Addr: router.ClientAddr(c), Request: c.Request.Method + " " + c.Request.URL.Path}
}
