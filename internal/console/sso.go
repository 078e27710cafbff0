package console

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/sso"
)

// ssoCookie binds a sign-in through the provider to the browser that
// began it: the callback is refused without it. It lives as long as the
// sign-in may take and is sent only to the callback.
const ssoCookie = "sluice_sso"

// beginSSO sends the browser to the identity provider. It is a link (a
// GET): the pages' CSP allows forms to lead to this origin only, and what
// it stores is no change of data, only a sign-in under way that expires.
func (s *server) beginSSO(c *gin.Context) {
	if !s.svc.SSOEnabled() {
		s.fail(c, errs.ErrNotFound)
		return
	}
	start, err := s.svc.BeginSSO(ctx(c), caller(c), safeNext(c.Query("next")))
	if err != nil {
		s.fail(c, err)
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: ssoCookie, Value: start.Browser, Path: sso.CallbackPath, HttpOnly: true,
		MaxAge: int(sso.LoginLifetime.Seconds()), SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
	c.Redirect(http.StatusSeeOther, start.URL)
	c.Abort()
}

// finishSSO is where the provider sends the browser back. The provider
// redirects with a GET, so this GET signs in; the state, good once and
// only in this browser, is what makes it safe.
func (s *server) finishSSO(c *gin.Context) {
	req := manage.SSOCallback{State: c.Query("state"), Code: c.Query("code"), Error: c.Query("error"),
		Description: c.Query("error_description"), UserAgent: c.Request.UserAgent()}
	req.Browser, _ = c.Cookie(ssoCookie)
	req.Previous, _ = c.Cookie(sessionCookie)
	http.SetCookie(c.Writer, &http.Cookie{Name: ssoCookie, Value: "", Path: sso.CallbackPath, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
	in, next, err := s.svc.FinishSSO(ctx(c), caller(c), req)
	switch {
	case err == nil:
		s.setSessionCookie(c, in.Session)
		s.signin(signinSuccess)
		s.redirect(c, safeNext(next), "")
	case errors.Is(err, errs.ErrUnauthenticated):
		s.signin(signinFailure)
		p := s.loginPage("")
		p.Error = "Single sign-on did not complete. Sign in again."
		s.render(c, http.StatusUnauthorized, "login", p)
	default:
		s.fail(c, err)
	}
}
