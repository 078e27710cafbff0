package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// usersPage is the admin's list of accounts with the create form.
type usersPage struct {
	layout
	Users  []userRow
	Form   userForm
	Errors *errs.Validation
}

type userRow struct {
	Username  string
	Disabled  bool
	Admin     bool
	You       bool
	CreatedAt time.Time
	// Tokens are the user's API tokens, newest first.
	Tokens []tokenRow
	// Locked is how long sign-ins from unknown devices stay refused; 0
	// when the user name is not locked.
	Locked time.Duration
}

type userForm struct {
	Username string
	Admin    bool
}

func (s *server) listUsers(c *gin.Context) {
	s.renderUsers(c, http.StatusOK, userForm{}, nil)
}

func (s *server) renderUsers(c *gin.Context, st int, form userForm, v *errs.Validation) {
	users, err := s.svc.ListUsers(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	p := &usersPage{layout: layout{Title: "Users", Nav: "users"}, Form: form, Errors: v}
	now := time.Now()
	for _, u := range users {
		row := userRow{Username: u.Username, Disabled: u.Disabled, Admin: u.Admin,
			You: u.Username == username(c), CreatedAt: u.CreatedAt}
		ts, err := s.svc.UserTokens(ctx(c), caller(c), u.Username)
		if err != nil {
			s.fail(c, err)
			return
		}
		for _, t := range ts {
			row.Tokens = append(row.Tokens, newTokenRow(t, now))
		}
		if row.Locked, err = s.svc.SignInLock(ctx(c), caller(c), u.Username); err != nil {
			s.fail(c, err)
			return
		}
		p.Users = append(p.Users, row)
	}
	s.render(c, st, "users", p)
}

// createUser creates an account, optionally an admin.
func (s *server) createUser(c *gin.Context) {
	form := userForm{Username: postValue(c, "username"), Admin: c.PostForm("admin") == "true"}
	req := manage.CreateUser{Username: form.Username, Password: c.PostForm("password"), Admin: form.Admin}
	if _, err := s.svc.CreateUser(ctx(c), caller(c), req); err != nil {
		s.failForm(c, err, "username", func(st int, v *errs.Validation) { s.renderUsers(c, st, form, v) })
		return
	}
	s.redirect(c, "/users", "User "+form.Username+" created.")
}

func (s *server) disableUser(c *gin.Context) { s.setDisabled(c, true) }
func (s *server) enableUser(c *gin.Context)  { s.setDisabled(c, false) }

// setDisabled disables or enables an account; disabling ends its sessions.
func (s *server) setDisabled(c *gin.Context, disabled bool) {
	name := c.Param("user")
	if err := s.svc.SetDisabled(ctx(c), caller(c), manage.SetDisabled{User: name, Disabled: disabled}); err != nil {
		s.fail(c, err)
		return
	}
	msg := "User " + name + " enabled."
	if disabled {
		msg = "User " + name + " disabled; their sessions have ended and their API tokens are revoked."
	}
	s.redirect(c, "/users", msg)
}

func (s *server) setAdmin(c *gin.Context) {
	name := c.Param("user")
	admin := c.PostForm("admin") == "true"
	if err := s.svc.SetAdmin(ctx(c), caller(c), manage.SetAdmin{User: name, Admin: admin}); err != nil {
		s.fail(c, err)
		return
	}
	msg := name + " is no longer an admin."
	if admin {
		msg = name + " is now an admin."
	}
	s.redirect(c, "/users", msg)
}

// resetPassword sets a new password for a user (who forgot theirs), ends
// their sessions and revokes their API tokens.
func (s *server) resetPassword(c *gin.Context) {
	name := c.Param("user")
	if err := s.svc.SetPassword(ctx(c), caller(c), manage.SetPassword{User: name, Password: c.PostForm("password")}); err != nil {
		s.fail(c, err)
		return
	}
	s.redirect(c, "/users", "Password of "+name+" changed; their sessions have ended and their API tokens are revoked.")
}

// revokeUserToken revokes one API token of another user.
func (s *server) revokeUserToken(c *gin.Context) {
	name := c.Param("user")
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		s.fail(c, errs.NotFoundf("token %q not found", c.Param("id")))
		return
	}
	if err := s.svc.RevokeUserToken(ctx(c), caller(c), manage.RevokeUserToken{User: name, ID: id}); err != nil {
		s.fail(c, err)
		return
	}
	s.redirect(c, "/users", "API token of "+name+" revoked.")
}

// unlockUser ends a sign-in lock on a user name at once.
func (s *server) unlockUser(c *gin.Context) {
	name := c.Param("user")
	if err := s.svc.ClearSignInLock(ctx(c), caller(c), manage.ClearSignInLock{User: name}); err != nil {
		s.fail(c, err)
		return
	}
	s.redirect(c, "/users", "Sign-in lock of "+name+" cleared.")
}

// unlockAddress ends a sign-in lock on a client address at once.
func (s *server) unlockAddress(c *gin.Context) {
	addr := postValue(c, "address")
	if err := s.svc.ClearSignInLock(ctx(c), caller(c), manage.ClearSignInLock{Addr: addr}); err != nil {
		s.failForm(c, err, "address", func(st int, v *errs.Validation) { s.renderUsers(c, st, userForm{}, v) })
		return
	}
	s.redirect(c, "/users", "Sign-in lock of address "+addr+" cleared.")
}
