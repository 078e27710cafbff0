package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// accountPage is the signed-in user's own account: their roles and the
// password change form. Passwords are never sent back into the form.
type accountPage struct {
	layout
	Roles  []accountRole
	Errors *errs.Validation
	// NoPassword: the account signs in through the identity provider only.
	NoPassword bool
}

type accountRole struct {
	App, Role string
}

func (s *server) account(c *gin.Context) { s.renderAccount(c, http.StatusOK, nil) }

func (s *server) renderAccount(c *gin.Context, st int, v *errs.Validation) {
	p := &accountPage{layout: layout{Title: "Your account", Nav: "account"}, Errors: v}
	if u := caller(c).User; u != nil && !u.HasPassword() {
		p.NoPassword = true
	}
	for app, r := range s.svc.Roles(caller(c)) {
		p.Roles = append(p.Roles, accountRole{App: app, Role: string(r)})
	}
	sort.Slice(p.Roles, func(i, j int) bool { return p.Roles[i].App < p.Roles[j].App })
	s.render(c, st, "account", p)
}

// changePassword changes the user's own password. The session it is sent
// from stays signed in; every other session ends.
func (s *server) changePassword(c *gin.Context) {
	req := manage.ChangePassword{Current: c.PostForm("current_password"), New: c.PostForm("new_password"),
		Repeat: c.PostForm("repeat_password")}
	req.Session, _ = c.Cookie(sessionCookie)
	req.Device, _ = c.Cookie(deviceCookie)
	err := s.svc.ChangePassword(ctx(c), caller(c), req)
	var throttled *manage.ThrottledError
	switch {
	case err == nil:
		s.redirect(c, "/account", "Password changed. Your other sessions have ended; this one stays signed in.")
	case errors.As(err, &throttled):
		c.Header("Retry-After", fmt.Sprint(int(math.Ceil(throttled.Wait.Seconds()))))
		v := &errs.Validation{}
		v.Add("current_password", "too many wrong passwords; try again in "+roughly(throttled.Wait))
		s.renderAccount(c, http.StatusTooManyRequests, v)
	default:
		s.failForm(c, err, "current_password", func(st int, v *errs.Validation) { s.renderAccount(c, st, v) })
	}
}
