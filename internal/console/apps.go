package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
)

// appsPage lists the apps the user is a member of (all, for admins).
type appsPage struct {
	layout
	Apps   []appRow
	Search string
	Next   string
	Total  int
}

type appRow struct {
	*apps.App
	Role string
}

// appForm is what the register form sends back.
type appForm struct {
	Name        string
	Description string
}

type appNewPage struct {
	layout
	Form   appForm
	Errors *errs.Validation
}

// grantForm is what the add-member form sends back.
type grantForm struct {
	User string
	Role string
}

// appPage shows one app and its members.
type appPage struct {
	layout
	App        *apps.App
	Role       string
	Members    []rbac.Member
	CanManage  bool
	Grant      grantForm
	Errors     *errs.Validation
	GrantError string
}

func (s *server) listApps(c *gin.Context) {
	user := username(c)
	f := apps.Filter{Search: queryValue(c, "q", 100), After: queryValue(c, "after", 100), Limit: 50}
	f.Names = s.enf.Visible(user)
	if f.Names != nil && len(f.Names) == 0 {
		f.Names = []string{} // a member of nothing sees nothing, not everything
	}
	page, err := s.apps.List(ctx(c), f)
	if err != nil {
		s.fail(c, err)
		return
	}
	roles := s.enf.Apps(user)
	p := &appsPage{layout: layout{Title: "Apps", Nav: "apps"}, Search: f.Search, Next: page.Next, Total: page.Total}
	for _, a := range page.Apps {
		p.Apps = append(p.Apps, appRow{App: a, Role: string(roles[a.Name])})
	}
	s.render(c, http.StatusOK, "apps", p)
}

func (s *server) newApp(c *gin.Context) {
	s.render(c, http.StatusOK, "app_new", &appNewPage{layout: layout{Title: "Register an app", Nav: "apps"}})
}

// createApp registers an app; its creator becomes its owner in the same
// transaction, so an app never exists without an owner.
func (s *server) createApp(c *gin.Context) {
	form := appForm{Name: postValue(c, "name"), Description: postValue(c, "description")}
	a := &apps.App{Name: form.Name, Description: form.Description}
	user := username(c)
	err := s.apps.Create(ctx(c), actor(c), a, func(ctx context.Context, tx *sqlx.Tx) error {
		return s.enf.GrantTx(ctx, tx, user, a.Name, rbac.RoleOwner)
	})
	if err != nil {
		st := status(err)
		if st == http.StatusUnprocessableEntity || st == http.StatusConflict {
			v := errs.Fields(err)
			if v == nil {
				v = &errs.Validation{}
				v.Add("name", err.Error())
			}
			s.render(c, st, "app_new", &appNewPage{layout: layout{Title: "Register an app", Nav: "apps"}, Form: form, Errors: v})
			return
		}
		s.fail(c, err)
		return
	}
	s.redirect(c, "/apps/"+url.PathEscape(a.Name), "App "+a.Name+" registered. You are its owner.")
}

// appFor loads the app named by the request for act. It answers the
// request itself (404 when the user may not even see the app, 403 when
// they see it but may not do act) and returns false when refused.
func (s *server) appFor(c *gin.Context, act rbac.Action) (*apps.App, bool) {
	name := c.Param("app")
	user := username(c)
	admin := isAdmin(c)
	if !admin && !s.enf.Can(user, name, rbac.ActionView) {
		s.hide(c, clip(name, 63), "app", clip(name, 100))
		return nil, false
	}
	a, err := s.apps.Get(ctx(c), name)
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	if !admin && !s.enf.Can(user, name, act) {
		s.deny(c, a.Name, "app", a.Name, "needs the owner role")
		return nil, false
	}
	return a, true
}

func (s *server) showApp(c *gin.Context) {
	a, ok := s.appFor(c, rbac.ActionView)
	if !ok {
		return
	}
	s.renderApp(c, http.StatusOK, a, grantForm{Role: string(rbac.RoleViewer)}, nil, "")
}

func (s *server) renderApp(c *gin.Context, st int, a *apps.App, g grantForm, v *errs.Validation, grantErr string) {
	members, err := s.enf.Members(ctx(c), a.Name)
	if err != nil {
		s.fail(c, err)
		return
	}
	user := username(c)
	slices.SortFunc(members, func(x, y rbac.Member) int { return strings.Compare(x.User, y.User) })
	p := &appPage{layout: layout{Title: a.Name, Nav: "apps"}, App: a, Members: members,
		Role: string(s.enf.Apps(user)[a.Name]), Grant: g, Errors: v, GrantError: grantErr,
		CanManage: isAdmin(c) || s.enf.Can(user, a.Name, rbac.ActionManage)}
	s.render(c, st, "app", p)
}

// grantMember gives a user the owner or viewer role on the app (replacing
// the role they had).
func (s *server) grantMember(c *gin.Context) {
	a, ok := s.appFor(c, rbac.ActionManage)
	if !ok {
		return
	}
	g := grantForm{User: postValue(c, "user"), Role: postValue(c, "role")}
	role := rbac.Role(g.Role) // Grant validates the user, the app and the role
	if err := s.enf.Grant(ctx(c), actor(c), g.User, a.Name, role); err != nil {
		s.memberError(c, a, g, err)
		return
	}
	s.redirect(c, "/apps/"+url.PathEscape(a.Name), g.User+" is now "+string(role)+" of "+a.Name+".")
}

// revokeMember removes a user's role on the app. The last owner cannot be
// removed: the app would have nobody to manage it.
func (s *server) revokeMember(c *gin.Context) {
	a, ok := s.appFor(c, rbac.ActionManage)
	if !ok {
		return
	}
	user := c.Param("user")
	if err := s.enf.Revoke(ctx(c), actor(c), user, a.Name); err != nil {
		s.memberError(c, a, grantForm{Role: string(rbac.RoleViewer)}, err)
		return
	}
	s.redirect(c, "/apps/"+url.PathEscape(a.Name), user+" no longer has a role on "+a.Name+".")
}

// memberError shows a refused grant or revoke on the app page: a
// validation or a conflict (the last owner) is shown next to the form.
func (s *server) memberError(c *gin.Context, a *apps.App, g grantForm, err error) {
	st := status(err)
	switch {
	case st == http.StatusUnprocessableEntity:
		s.renderApp(c, st, a, g, errs.Fields(err), "")
	case st == http.StatusConflict:
		s.renderApp(c, st, a, g, nil, conflictText(err))
	case errors.Is(err, errs.ErrNotFound):
		s.renderApp(c, http.StatusNotFound, a, g, nil, "That user has no role on "+a.Name+".")
	default:
		s.fail(c, err)
	}
}

// conflictText is the user-facing sentence of a conflict error: the
// stores write it for people, after any "operation: " prefix.
func conflictText(err error) string {
	msg := err.Error()
	if msg == errs.ErrConflict.Error() {
		return "This was changed by someone else in the meantime. Reload and try again."
	}
	return msg
}
