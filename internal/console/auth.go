package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/manage"
)

// loginPage is the sign-in form.
type loginPage struct {
	layout
	Username string
	Next     string
	Error    string
	// SSO offers sign-in through the identity provider; Local the
	// password form.
	SSO, Local bool
}

func (s *server) loginPage(next string) *loginPage {
	return &loginPage{layout: layout{Title: "Sign in"}, Next: safeNext(next), SSO: s.svc.SSOEnabled(), Local: s.svc.LocalSignIn()}
}

func (s *server) loginForm(c *gin.Context) {
	s.render(c, http.StatusOK, "login", s.loginPage(c.Query("next")))
}

// login signs a user in. On success the browser gets a new session id,
// whatever it sent before (which is ended), so a planted id is worthless.
func (s *server) login(c *gin.Context) {
	name := postValue(c, "username")
	p := s.loginPage(c.PostForm("next"))
	p.Username = name
	if len(name) > manage.MaxUsername {
		p.Username = ""
	}
	req := manage.SignIn{Username: name, Password: c.PostForm("password"), UserAgent: c.Request.UserAgent()}
	req.Previous, _ = c.Cookie(sessionCookie)
	req.Device, _ = c.Cookie(deviceCookie)
	in, err := s.svc.SignIn(ctx(c), caller(c), req)
	var throttled *manage.ThrottledError
	switch {
	case err == nil:
		s.setSessionCookie(c, in.Session)
		s.setDeviceCookie(c, in.Device)
		s.signin(signinSuccess)
		s.redirect(c, p.Next, "")
	case errors.As(err, &throttled):
		s.signin(signinThrottled)
		c.Header("Retry-After", fmt.Sprint(int(math.Ceil(throttled.Wait.Seconds()))))
		p.Error = "Too many sign-in attempts. Try again in " + roughly(throttled.Wait) + "."
		s.render(c, http.StatusTooManyRequests, "login", p)
	case errors.Is(err, manage.ErrLocalSignInOff):
		s.signin(signinFailure)
		p.Username, p.Error = "", "Sign-in with a password is turned off. Use single sign-on."
		s.render(c, http.StatusForbidden, "login", p)
	case errors.Is(err, manage.ErrMissingCredentials):
		s.signin(signinFailure)
		p.Error = "Enter your user name and password."
		s.render(c, http.StatusUnauthorized, "login", p)
	case errors.Is(err, manage.ErrWrongCredentials):
		s.signin(signinFailure)
		p.Error = "Wrong user name or password."
		s.render(c, http.StatusUnauthorized, "login", p)
	default:
		s.fail(c, err)
	}
}

// logout ends the session on the server, then forgets the cookie.
func (s *server) logout(c *gin.Context) {
	if err := s.svc.SignOut(ctx(c), caller(c), c.GetString(keySession)); err != nil {
		s.fail(c, err)
		return
	}
	s.clearSessionCookie(c)
	s.redirect(c, "/login", "You are signed out.")
}

func (s *server) home(c *gin.Context) { c.Redirect(http.StatusSeeOther, "/buckets") }

func (s *server) setSessionCookie(c *gin.Context, token string) {
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
}

// deviceCookie keeps the device token of the last successful sign-in, so
// that a lock on the user name caused by someone else's guesses does not
// hold this browser back.
const deviceCookie = "sluice_device"

// deviceLifetime matches how long the throttle remembers a device.
const deviceLifetime = 90 * 24 * time.Hour

func (s *server) setDeviceCookie(c *gin.Context, token string) {
	if token == "" {
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: deviceCookie, Value: token, Path: "/", HttpOnly: true,
		MaxAge: int(deviceLifetime / time.Second), SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
}

func (s *server) clearSessionCookie(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
}

// safeNext keeps a post-sign-in destination only when it is a path on this
// site; anything else (another host, a scheme, "//evil") goes to /buckets.
func safeNext(next string) string {
	next = strings.ToValidUTF8(next, "")
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return "/buckets"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path == "/login" || strings.HasPrefix(u.Path, "/login/") || u.Path == "/logout" {
		return "/buckets"
	}
	return next
}

// roughly says a wait in words: "1 minute", "40 seconds".
func roughly(d time.Duration) string {
	switch {
	case d <= time.Second:
		return "a second"
	case d < time.Minute:
		return fmt.Sprintf("%d seconds", int(math.Ceil(d.Seconds())))
	case d < 2*time.Minute:
		return "a minute"
	default:
		return fmt.Sprintf("%d minutes", int(math.Ceil(d.Minutes())))
	}
}

// clip keeps s within n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
