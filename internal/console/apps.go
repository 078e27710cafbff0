package console

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
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
	*manage.AppMembers
	Grant      grantForm
	Errors     *errs.Validation
	GrantError string
	Decisions  decisionsSection
	// UserNames feed the member picker (a datalist): user names are not
	// secret among signed-in users, see docs/console.md.
	UserNames []string
	// Buckets are the first appBucketsShown buckets the app owns or may
	// take tokens from (that the caller sees), of BucketsTotal.
	Buckets      []*buckets.Bucket
	BucketsTotal int
}

// appBucketsShown is how many buckets an app's page lists.
const appBucketsShown = 20

func (s *server) listApps(c *gin.Context) {
	q := manage.AppQuery{Search: queryValue(c, "q", 100), After: queryValue(c, "after", 100), Limit: 50}
	page, err := s.svc.ListApps(ctx(c), caller(c), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	roles := s.svc.Roles(caller(c))
	p := &appsPage{layout: layout{Title: "Apps", Nav: "apps"}, Search: q.Search, Next: page.Next, Total: page.Total}
	for _, a := range page.Apps {
		p.Apps = append(p.Apps, appRow{App: a, Role: string(roles[a.Name])})
	}
	s.render(c, http.StatusOK, "apps", p)
}

func (s *server) newApp(c *gin.Context) {
	s.render(c, http.StatusOK, "app_new", &appNewPage{layout: layout{Title: "Register an app", Nav: "apps"}})
}

// createApp registers an app; its creator becomes its owner.
func (s *server) createApp(c *gin.Context) {
	form := appForm{Name: postValue(c, "name"), Description: postValue(c, "description")}
	a, err := s.svc.CreateApp(ctx(c), caller(c), manage.CreateApp{Name: form.Name, Description: form.Description})
	if err != nil {
		s.failForm(c, err, "name", func(st int, v *errs.Validation) {
			s.render(c, st, "app_new", &appNewPage{layout: layout{Title: "Register an app", Nav: "apps"}, Form: form, Errors: v})
		})
		return
	}
	s.redirect(c, "/apps/"+url.PathEscape(a.Name), "App "+a.Name+" registered. You are its owner.")
}

func (s *server) showApp(c *gin.Context) {
	s.renderApp(c, http.StatusOK, grantForm{Role: string(manage.RoleViewer)}, nil, "")
}

func (s *server) renderApp(c *gin.Context, st int, g grantForm, v *errs.Validation, grantErr string) {
	s.renderAppWith(c, st, g, v, grantErr, decisionsSection{})
}

func (s *server) renderAppWith(c *gin.Context, st int, g grantForm, v *errs.Validation, grantErr string, d decisionsSection) {
	m, err := s.svc.Members(ctx(c), caller(c), c.Param("app"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.loadDecisions(c, m, &d); err != nil {
		s.fail(c, err)
		return
	}
	p := &appPage{layout: layout{Title: m.App.Name, Nav: "apps"}, AppMembers: m,
		Grant: g, Errors: v, GrantError: grantErr, Decisions: d}
	bs, err := s.svc.AppBuckets(ctx(c), caller(c), m.App.Name, appBucketsShown)
	if err != nil {
		s.fail(c, err)
		return
	}
	p.Buckets, p.BucketsTotal = bs.Buckets, bs.Total
	if m.CanManage {
		if p.UserNames, err = s.svc.UserNames(ctx(c), caller(c), g.User); err != nil {
			s.fail(c, err)
			return
		}
	}
	s.render(c, st, "app", p)
}

// grantMember gives a user the owner or viewer role on the app (replacing
// the role they had).
func (s *server) grantMember(c *gin.Context) {
	g := grantForm{User: postValue(c, "user"), Role: postValue(c, "role")}
	app := c.Param("app")
	role, err := s.svc.GrantRole(ctx(c), caller(c), manage.GrantRole{App: app, User: g.User, Role: g.Role})
	if err != nil {
		s.memberError(c, g, err)
		return
	}
	s.redirect(c, "/apps/"+url.PathEscape(app), g.User+" is now "+string(role)+" of "+app+".")
}

// confirmRevokeMember asks before a member is removed; the form it shows
// posts to revokeMember. The only owner cannot be removed: the page says
// so instead of offering the button.
func (s *server) confirmRevokeMember(c *gin.Context) {
	app, user := c.Param("app"), c.Param("user")
	r, err := s.svc.MemberRemoval(ctx(c), caller(c), manage.RevokeRole{App: app, User: user})
	if err != nil {
		s.fail(c, err)
		return
	}
	p := &confirmPage{layout: layout{Title: "Remove member", Nav: "apps"}, App: r.App,
		Heading: "Remove " + r.Member.User + " from " + r.App + "?",
		Text: r.Member.User + " is " + string(r.Member.Role) + " of " + r.App + ": a " + string(r.Member.Role) + " " +
			manage.RoleDescription(string(r.Member.Role)) + ". Once removed, " + r.Member.User +
			" loses this access at once (an admin keeps theirs). You can add them again later.",
		Action: appURL(r.App) + "/members/" + url.PathEscape(r.Member.User) + "/revoke", Button: "Remove " + r.Member.User,
		Cancel: "Keep " + r.Member.User}
	if r.LastOwner {
		p.Blocked = r.Member.User + " is the only owner of " + r.App + ": make someone else owner first, so that the app keeps somebody to manage it."
	}
	s.render(c, http.StatusOK, "app_confirm", p)
}

// revokeMember removes a user's role on the app.
func (s *server) revokeMember(c *gin.Context) {
	app, user := c.Param("app"), c.Param("user")
	if err := s.svc.RevokeRole(ctx(c), caller(c), manage.RevokeRole{App: app, User: user}); err != nil {
		s.memberError(c, grantForm{Role: string(manage.RoleViewer)}, err)
		return
	}
	s.redirect(c, "/apps/"+url.PathEscape(app), user+" no longer has a role on "+app+".")
}

// memberError shows a refused grant or revoke on the app page: a
// validation or a conflict (the last owner) is shown next to the form.
func (s *server) memberError(c *gin.Context, g grantForm, err error) {
	var noRole *manage.NoRoleError
	switch st := status(err); {
	case st == http.StatusUnprocessableEntity:
		s.renderApp(c, st, g, errs.Fields(err), "")
	case st == http.StatusConflict:
		s.renderApp(c, st, g, nil, conflictText(err))
	case errors.As(err, &noRole):
		s.renderApp(c, http.StatusNotFound, g, nil, "That user has no role on "+noRole.App+".")
	default:
		s.fail(c, err)
	}
}

// failForm answers err, the refusal of a posted form: a validation or a
// conflict (told next to field) shows the form again by show, with the
// status to answer; any other error gets the error page.
func (s *server) failForm(c *gin.Context, err error, field string, show func(st int, v *errs.Validation)) {
	if v, st := formErrors(err, field); v != nil {
		show(st, v)
		return
	}
	s.fail(c, err)
}

// formErrors turns a validation or a conflict into the errors shown next
// to a form, a conflict next to field, with the status to answer; it
// returns nil for any other error.
func formErrors(err error, field string) (*errs.Validation, int) {
	switch st := status(err); st {
	case http.StatusUnprocessableEntity:
		return errs.Fields(err), st
	case http.StatusConflict:
		v := &errs.Validation{}
		v.Add(field, conflictText(err))
		return v, st
	}
	return nil, 0
}

// conflictText is the user-facing sentence of a conflict error.
func conflictText(err error) string {
	if msg, ok := errs.PublicMessage(err); ok {
		return msg
	}
	return "This was changed by someone else in the meantime. Reload and try again."
}
