package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/errs"
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
}

type userForm struct {
	Username string
	Admin    bool
}

func (s *server) listUsers(c *gin.Context) {
	s.renderUsers(c, http.StatusOK, userForm{}, nil)
}

func (s *server) renderUsers(c *gin.Context, st int, form userForm, v *errs.Validation) {
	users, err := s.accounts.ListUsers(ctx(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	p := &usersPage{layout: layout{Title: "Users", Nav: "users"}, Form: form, Errors: v}
	for _, u := range users {
		p.Users = append(p.Users, userRow{Username: u.Username, Disabled: u.Disabled, Admin: s.enf.IsAdmin(u.Username),
			You: u.Username == username(c), CreatedAt: u.CreatedAt})
	}
	s.render(c, st, "users", p)
}

// createUser creates an account, optionally an admin. The password is set
// by the admin and meant to be changed by its owner.
func (s *server) createUser(c *gin.Context) {
	form := userForm{Username: postValue(c, "username"), Admin: c.PostForm("admin") == "true"}
	password := c.PostForm("password")
	if _, err := s.accounts.CreateUser(ctx(c), actor(c), form.Username, password); err != nil {
		switch status(err) {
		case http.StatusUnprocessableEntity:
			s.renderUsers(c, http.StatusUnprocessableEntity, form, errs.Fields(err))
		case http.StatusConflict:
			v := &errs.Validation{}
			v.Add("username", conflictText(err))
			s.renderUsers(c, http.StatusConflict, form, v)
		default:
			s.fail(c, err)
		}
		return
	}
	if form.Admin {
		if err := s.enf.SetAdmin(ctx(c), actor(c), form.Username, true); err != nil {
			s.fail(c, err)
			return
		}
	}
	s.redirect(c, "/users", "User "+form.Username+" created.")
}

// target is the user named in the path. An admin cannot disable or demote
// themselves: that could leave nobody able to manage users.
func (s *server) target(c *gin.Context) (string, bool) {
	name := c.Param("user")
	if name == username(c) {
		s.fail(c, errs.Invalid("user", "you cannot change your own account here; ask another admin"))
		return "", false
	}
	return name, true
}

func (s *server) disableUser(c *gin.Context) { s.setDisabled(c, true) }
func (s *server) enableUser(c *gin.Context)  { s.setDisabled(c, false) }

// setDisabled disables or enables an account; disabling ends its sessions.
func (s *server) setDisabled(c *gin.Context, disabled bool) {
	name, ok := s.target(c)
	if !ok {
		return
	}
	if err := s.accounts.SetDisabled(ctx(c), actor(c), name, disabled); err != nil {
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
	name, ok := s.target(c)
	if !ok {
		return
	}
	admin := c.PostForm("admin") == "true"
	if exists, err := s.userExists(ctx(c), name); err != nil || !exists {
		if err == nil {
			err = errs.ErrNotFound
		}
		s.fail(c, err)
		return
	}
	if err := s.enf.SetAdmin(ctx(c), actor(c), name, admin); err != nil {
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
	name, ok := s.target(c)
	if !ok {
		return
	}
	if err := s.accounts.SetPassword(ctx(c), actor(c), name, c.PostForm("password")); err != nil {
		s.fail(c, err)
		return
	}
	s.redirect(c, "/users", "Password of "+name+" changed; their sessions have ended and their API tokens are revoked.")
}

// userExists reports whether an account has the name.
func (s *server) userExists(ctx context.Context, name string) (bool, error) {
	_, err := s.accounts.UserByName(ctx, name)
	if errors.Is(err, errs.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
