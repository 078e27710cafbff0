package manage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
)

// AppQuery selects apps for ListApps.
type AppQuery struct {
	Search string
	After  string
	Limit  int
}

// ListApps returns the apps the caller is a member of (every app for an
// admin).
func (s *Service) ListApps(ctx context.Context, c Caller, q AppQuery) (apps.Page, error) {
	return s.apps.List(ctx, apps.Filter{Search: q.Search, Names: s.Visible(c), After: q.After, Limit: q.Limit})
}

// AppNames lists, sorted, the apps the caller may filter lists by: their
// apps, or every app for an admin.
func (s *Service) AppNames(ctx context.Context, c Caller) ([]string, error) {
	if v := s.Visible(c); v != nil {
		out := slices.Clone(v)
		slices.Sort(out)
		return out, nil
	}
	page, err := s.apps.List(ctx, apps.Filter{Limit: database.MaxPageSize})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(page.Apps))
	for _, a := range page.Apps {
		out = append(out, a.Name)
	}
	return out, nil
}

// MaxAppChoices bounds the apps the bucket form lists to pick allowed
// apps from; names beyond it are typed.
const MaxAppChoices = database.MaxPageSize

// AppChoices lists, sorted, the names of the apps a bucket may allow, to
// anyone who may create or edit a bucket: every app, since app names are
// not secret among signed-in users (docs/console.md) and teams allow apps
// of other teams. At most MaxAppChoices; more tells that others exist.
func (s *Service) AppChoices(ctx context.Context, c Caller) (names []string, more bool, err error) {
	if c.User == nil {
		return nil, false, errs.ErrUnauthenticated
	}
	if !s.IsAdmin(c) {
		owned, err := s.OwnedApps(ctx, c)
		if err != nil {
			return nil, false, err
		}
		if len(owned) == 0 {
			// Nothing to edit, nothing to list.
			return nil, false, nil
		}
	}
	page, err := s.apps.List(ctx, apps.Filter{Limit: MaxAppChoices})
	if err != nil {
		return nil, false, err
	}
	names = make([]string, 0, len(page.Apps))
	for _, a := range page.Apps {
		names = append(names, a.Name)
	}
	return names, page.Next != "", nil
}

// CreateApp registers an app.
type CreateApp struct {
	Name        string
	Description string
}

// CreateApp registers an app; the caller becomes its owner in the same
// transaction, so an app never exists without an owner.
func (s *Service) CreateApp(ctx context.Context, c Caller, req CreateApp) (*apps.App, error) {
	if c.User == nil {
		return nil, errs.ErrUnauthenticated
	}
	a := &apps.App{Name: req.Name, Description: req.Description}
	err := s.apps.Create(ctx, c.Actor(), a, func(ctx context.Context, tx *database.Tx) error {
		return s.enf.GrantTx(ctx, tx, c.Name(), a.Name, rbac.RoleOwner)
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// App returns the app named name if the caller may see it. An app they
// are not a member of answers like a missing one, and is audited.
func (s *Service) App(ctx context.Context, c Caller, name string) (*apps.App, error) {
	return s.appFor(ctx, c, name)
}

// ManagedApp returns the app named name if the caller may grant and
// revoke roles on it.
func (s *Service) ManagedApp(ctx context.Context, c Caller, name string) (*apps.App, error) {
	return s.appAction(ctx, c, name, rbac.ActionManage, "managing the members")
}

// appFor loads the app if the caller may see it: a 404 when they may not,
// exactly as if it did not exist.
func (s *Service) appFor(ctx context.Context, c Caller, name string) (*apps.App, error) {
	a, err := s.apps.Get(ctx, name)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("app %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	if !s.can(c, a.Name, rbac.ActionView) {
		return nil, s.Refuse(ctx, c, Refusal{App: a.Name, ObjectType: "app", ObjectName: a.Name, Why: "not visible to the user"},
			errs.NotFoundf("app %q not found", name))
	}
	return a, nil
}

// appAction loads the app for act like appFor, and answers a caller who
// sees it but may not do act with a 403 whose message names what was
// asked ("managing the members").
func (s *Service) appAction(ctx context.Context, c Caller, name string, act rbac.Action, what string) (*apps.App, error) {
	a, err := s.appFor(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if !s.can(c, a.Name, act) {
		return nil, s.Refuse(ctx, c, Refusal{App: a.Name, ObjectType: "app", ObjectName: a.Name, Why: "needs the owner role"},
			errs.Forbiddenf("%s of app %q needs its owner role", what, a.Name))
	}
	return a, nil
}

// AppMembers is an app with its members, sorted by user name.
type AppMembers struct {
	App     *apps.App
	Members []rbac.Member
	// Role is the caller's role on the app, "" for none.
	Role rbac.Role
	// CanManage tells whether the caller may grant and revoke roles.
	CanManage bool
}

// Owners returns the user names of the app's owners, sorted: whom a
// viewer asks for a change.
func (m *AppMembers) Owners() []string {
	var out []string
	for _, x := range m.Members {
		if x.Role == rbac.RoleOwner {
			out = append(out, x.User)
		}
	}
	return out
}

// Members returns the app named name with its members, for anyone who may
// see it.
func (s *Service) Members(ctx context.Context, c Caller, name string) (*AppMembers, error) {
	a, err := s.appFor(ctx, c, name)
	if err != nil {
		return nil, err
	}
	members, err := s.enf.Members(ctx, a.Name)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(members, func(x, y rbac.Member) int { return strings.Compare(x.User, y.User) })
	return &AppMembers{App: a, Members: members, Role: s.Roles(c)[a.Name],
		CanManage: s.can(c, a.Name, rbac.ActionManage)}, nil
}

// GrantRole gives User the Role ("owner" or "viewer") on App, replacing
// the role they had.
type GrantRole struct {
	App  string
	User string
	Role string
}

// GrantRole needs the owner role on the app.
func (s *Service) GrantRole(ctx context.Context, c Caller, req GrantRole) (rbac.Role, error) {
	a, err := s.ManagedApp(ctx, c, req.App)
	if err != nil {
		return "", err
	}
	role, err := parseRole(req.Role)
	if err != nil {
		return "", err
	}
	return role, s.enf.Grant(ctx, c.Actor(), req.User, a.Name, role)
}

func parseRole(v string) (rbac.Role, error) {
	switch r := rbac.Role(v); {
	case r.Valid():
		return r, nil
	case v == "":
		return "", errs.Invalid("role", "is required")
	}
	return "", errs.Invalid("role", `must be "owner" or "viewer"`)
}

// RevokeRole removes User's role on App.
type RevokeRole struct {
	App  string
	User string
}

// RevokeRole needs the owner role on the app. The last owner cannot be
// removed (a conflict): the app would have nobody to manage it.
func (s *Service) RevokeRole(ctx context.Context, c Caller, req RevokeRole) error {
	a, err := s.ManagedApp(ctx, c, req.App)
	if err != nil {
		return err
	}
	err = s.enf.Revoke(ctx, c.Actor(), req.User, a.Name)
	if errors.Is(err, errs.ErrNotFound) {
		return &NoRoleError{User: req.User, App: a.Name}
	}
	return err
}

// MemberRemoval is what removing a member would do, for the confirmation
// step before RevokeRole.
type MemberRemoval struct {
	App    string
	Member rbac.Member
	// LastOwner says the member is the app's only owner: the removal
	// would be refused (the app would have nobody to manage it).
	LastOwner bool
}

// MemberRemoval needs the owner role on the app, like RevokeRole; a user
// without a role on the app is a *NoRoleError.
func (s *Service) MemberRemoval(ctx context.Context, c Caller, req RevokeRole) (MemberRemoval, error) {
	a, err := s.ManagedApp(ctx, c, req.App)
	if err != nil {
		return MemberRemoval{}, err
	}
	members, err := s.enf.Members(ctx, a.Name)
	if err != nil {
		return MemberRemoval{}, err
	}
	out := MemberRemoval{App: a.Name}
	owners := 0
	found := false
	for _, m := range members {
		if m.Role == rbac.RoleOwner {
			owners++
		}
		if m.User == req.User {
			out.Member, found = m, true
		}
	}
	if !found {
		return MemberRemoval{}, &NoRoleError{User: req.User, App: a.Name}
	}
	out.LastOwner = out.Member.Role == rbac.RoleOwner && owners == 1
	return out, nil
}

// NoRoleError answers the revocation of a role the user does not hold. It
// matches errs.ErrNotFound.
type NoRoleError struct {
	User, App string
}

func (e *NoRoleError) Error() string {
	return fmt.Sprintf("user %q has no role on app %q", e.User, e.App)
}

// Is makes a NoRoleError match errs.ErrNotFound.
func (e *NoRoleError) Is(target error) bool { return target == errs.ErrNotFound }

// PublicMessage is fit to show.
func (e *NoRoleError) PublicMessage() string { return e.Error() }
