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

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
)

// loginPage is the sign-in form.
type loginPage struct {
	layout
	Username string
	Next     string
	Error    string
}

// Longest user name and password the sign-in form reads; longer input is
// refused without hashing anything.
const (
	maxUsername = 64
	maxPassword = 1024
)

func (s *server) loginForm(c *gin.Context) {
	s.render(c, http.StatusOK, "login", &loginPage{layout: layout{Title: "Sign in"}, Next: safeNext(c.Query("next"))})
}

// login checks a user name and password, throttled per address and per
// user name. On success the browser gets a new session id, whatever it
// sent before (which is ended), so a planted id is worthless.
func (s *server) login(c *gin.Context) {
	name := postValue(c, "username")
	password := c.PostForm("password")
	p := &loginPage{layout: layout{Title: "Sign in"}, Username: name, Next: safeNext(c.PostForm("next"))}
	if len(name) > maxUsername {
		p.Username = ""
	}
	who := audit.Actor{User: clip(name, maxUsername), Via: "console", Addr: c.ClientIP()}
	if who.User == "" {
		who.User = "anonymous"
	}

	ok, wait := s.throttle.allow(ctx(c), c.ClientIP(), name)
	if !ok {
		s.metrics.signin(signinThrottled)
		s.auditEvent(c, who, audit.Entry{Action: "login.failure", ObjectType: "user", ObjectName: who.User,
			Detail: "too many attempts; refused without checking the password"})
		c.Header("Retry-After", fmt.Sprint(int(math.Ceil(wait.Seconds()))))
		p.Error = "Too many sign-in attempts. Try again in " + roughly(wait) + "."
		s.render(c, http.StatusTooManyRequests, "login", p)
		return
	}

	if name == "" || password == "" || len(name) > maxUsername || len(password) > maxPassword {
		s.metrics.signin(signinFailure)
		s.auditEvent(c, who, audit.Entry{Action: "login.failure", ObjectType: "user", ObjectName: who.User,
			Detail: "empty or oversized user name or password"})
		p.Error = "Enter your user name and password."
		s.render(c, http.StatusUnauthorized, "login", p)
		return
	}
	user, err := s.accounts.Authenticate(ctx(c), name, password)
	if err != nil {
		if st := status(err); st >= 500 {
			s.fail(c, err)
			return
		}
		s.metrics.signin(signinFailure)
		s.auditEvent(c, who, audit.Entry{Action: "login.failure", ObjectType: "user", ObjectName: who.User,
			Detail: "wrong user name or password, or account disabled"})
		p.Error = "Wrong user name or password."
		s.render(c, http.StatusUnauthorized, "login", p)
		return
	}

	if old, err := c.Cookie(sessionCookie); err == nil && old != "" {
		if err := s.accounts.EndSession(ctx(c), old); err != nil && !errors.Is(err, errs.ErrNotFound) {
			s.log.WarnContext(ctx(c), "console: cannot end the previous session at sign-in", "err", err)
		}
	}
	token, err := s.accounts.NewSession(ctx(c), user.ID, c.ClientIP(), clip(c.Request.UserAgent(), 255))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.setSessionCookie(c, token)
	s.metrics.signin(signinSuccess)
	who.User = user.Username
	s.auditEvent(c, who, audit.Entry{Action: "login.success", ObjectType: "user", ObjectName: user.Username})
	s.redirect(c, p.Next, "")
}

// logout ends the session on the server, then forgets the cookie.
func (s *server) logout(c *gin.Context) {
	token := c.GetString(keySession)
	if err := s.accounts.EndSession(ctx(c), token); err != nil && !errors.Is(err, errs.ErrNotFound) {
		s.fail(c, err)
		return
	}
	s.clearSessionCookie(c)
	s.auditEvent(c, actor(c), audit.Entry{Action: "logout", ObjectType: "user", ObjectName: username(c)})
	s.redirect(c, "/login", "You are signed out.")
}

func (s *server) home(c *gin.Context) { c.Redirect(http.StatusSeeOther, "/buckets") }

func (s *server) setSessionCookie(c *gin.Context, token string) {
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
}

func (s *server) clearSessionCookie(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.secure(c)})
}

// auditEvent records an event that changes no data (sign-in, sign-out).
// A failure to record it is logged, not shown: the event happened.
func (s *server) auditEvent(c *gin.Context, who audit.Actor, e audit.Entry) {
	if err := audit.Write(ctx(c), s.db, who, e); err != nil {
		s.log.WarnContext(ctx(c), "console: cannot write audit entry", "action", e.Action, "err", err)
	}
}

// safeNext keeps a post-sign-in destination only when it is a path on this
// site; anything else (another host, a scheme, "//evil") goes to /buckets.
func safeNext(next string) string {
	next = strings.ToValidUTF8(next, "")
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return "/buckets"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path == "/login" || u.Path == "/logout" {
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
