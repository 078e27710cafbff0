package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// fail answers a request that could not be served. It is the console's one
// mapping from the error vocabulary to a status and a page: 401, 403, 404,
// 409, 422 (invalid input), 503, and 500 for anything else, which is logged
// and never shown.
func (s *server) fail(c *gin.Context, err error) {
	status := errs.HTTPStatus(err)
	p := &errorPage{Status: status}
	switch status {
	case http.StatusUnauthorized:
		if c.Request.Method == http.MethodGet {
			c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request.URL.RequestURI()))
			c.Abort()
			return
		}
		p.Heading, p.Message = "Sign in required", "Your session has ended. Sign in again, then repeat what you were doing."
	case http.StatusForbidden:
		p.Heading = "Not allowed"
		p.Message = "Your roles do not allow this. An owner of the app can grant you the role it needs."
	case http.StatusNotFound:
		p.Heading = "Not found"
		p.Message = "There is nothing here, or you do not have access to it."
	case http.StatusConflict:
		p.Heading = "Conflict"
		p.Message = err.Error() // conflict messages are written for people
	case http.StatusUnprocessableEntity:
		p.Heading = "Invalid input"
		p.Message = "Some values were not accepted:"
		if v := errs.Fields(err); v != nil {
			p.Fields = v.Fields
		}
	case http.StatusServiceUnavailable:
		c.Header("Retry-After", "5")
		p.Heading = "Temporarily unavailable"
		p.Message = "Sluice cannot reach its database right now. Nothing you saved before is lost; please try again in a few seconds."
		s.log.WarnContext(ctx(c), "console: store unavailable", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	default:
		status = http.StatusInternalServerError
		p.Status = status
		p.Heading = "Something went wrong"
		p.Message = "An unexpected error occurred. It has been logged; please try again."
		s.log.ErrorContext(ctx(c), "console: internal error", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	}
	p.Title = p.Heading
	s.render(c, status, "error", p)
}

// status is the HTTP status of err, for handlers that answer an invalid
// form or a conflict with the form itself rather than an error page.
func status(err error) int { return errs.HTTPStatus(err) }

// staleCurrent returns the stored object of a change refused because it
// was based on an older version (an *errs.Stale), for the page that shows
// the newer values; ok is false for any other error.
func staleCurrent[T any](err error) (cur T, ok bool) {
	var stale *errs.Stale
	if errors.As(err, &stale) {
		cur, ok = stale.Current.(T)
	}
	return cur, ok
}

func (s *server) notFound(c *gin.Context) {
	// No route ran the session middleware: a signed-in user still gets the
	// navigation, not an offer to sign in. A bad or ended session is
	// simply ignored here.
	if token, err := c.Cookie(sessionCookie); err == nil && token != "" {
		if user, err := s.svc.Session(ctx(c), token); err == nil {
			c.Set(keyUser, user)
			c.Set(keyAdmin, s.svc.IsAdmin(manage.Caller{User: user}))
		}
	}
	s.render(c, http.StatusNotFound, "error", &errorPage{layout: layout{Title: "Not found"}, Status: http.StatusNotFound,
		Heading: "Not found", Message: "There is no page at this address."})
}

func (s *server) methodNotAllowed(c *gin.Context) {
	s.render(c, http.StatusMethodNotAllowed, "error", &errorPage{layout: layout{Title: "Not allowed"},
		Status: http.StatusMethodNotAllowed, Heading: "Method not allowed", Message: "This address does not accept that kind of request."})
}

// healthz answers load balancers: the process is up and can render.
func (s *server) healthz(c *gin.Context) {
	c.Header("Content-Type", "text/plain; charset=utf-8")
	c.String(http.StatusOK, "ok\n")
}

// prettyJSON indents a stored audit snapshot for reading; anything that is
// not JSON is shown as is (html/template escapes it either way).
func prettyJSON(s string) string {
	if s == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

// secure reports whether cookies must be marked Secure.
func (s *server) secure(c *gin.Context) bool {
	return s.cfg.SecureCookies || c.Request.TLS != nil
}

// postValue is a form field as handlers use it: surrounding space trimmed,
// and bytes that are not UTF-8 replaced, so that no store ever sees them.
func postValue(c *gin.Context, name string) string {
	return strings.TrimSpace(strings.ToValidUTF8(c.PostForm(name), "\uFFFD"))
}

// queryValue is a query parameter, trimmed, made valid UTF-8 and cut to n
// bytes.
func queryValue(c *gin.Context, name string, n int) string {
	return clip(strings.TrimSpace(strings.ToValidUTF8(c.Query(name), "\uFFFD")), n)
}
