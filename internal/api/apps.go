package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
)

// appJSON is an app as the API returns it.
type appJSON struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Version     int64     `json:"version"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedBy   string    `json:"updated_by"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func toAppJSON(a *apps.App) appJSON {
	return appJSON{
		Name: a.Name, Description: a.Description, Version: a.Version,
		CreatedBy: a.CreatedBy, CreatedAt: a.CreatedAt, UpdatedBy: a.UpdatedBy, UpdatedAt: a.UpdatedAt,
	}
}

// isAdmin reports whether the caller holds the global admin role.
func (s *server) isAdmin(c *caller) bool { return s.Enforcer.IsAdmin(c.name()) }

// visibleApps returns the apps whose data the caller may see: nil for an
// admin (everything), otherwise the apps they are a member of, never nil.
func (s *server) visibleApps(c *caller) []string {
	if s.isAdmin(c) {
		return nil
	}
	v := s.Enforcer.Visible(c.name())
	if v == nil {
		// nil means "all" to the stores; a user with no roles sees none.
		v = []string{}
	}
	return v
}

// listApps: GET /apps?search=&cursor=&limit=. Callers see the apps they
// are members of; admins see every app.
func (s *server) listApps(w http.ResponseWriter, r *http.Request, c *caller) error {
	search, err := query(r, "search", 63)
	if err != nil {
		return err
	}
	cursor, limit, err := page(r, "app")
	if err != nil {
		return err
	}
	p, err := s.Apps.List(r.Context(), apps.Filter{Search: search, Names: s.visibleApps(c), After: cursor, Limit: limit})
	if err != nil {
		return err
	}
	out := struct {
		Apps       []appJSON `json:"apps"`
		NextCursor string    `json:"next_cursor,omitempty"`
		Total      int       `json:"total"`
	}{Apps: make([]appJSON, 0, len(p.Apps)), NextCursor: nextCursor("app", p.Next), Total: p.Total}
	for _, a := range p.Apps {
		out.Apps = append(out.Apps, toAppJSON(a))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// appInput is the body of POST /apps.
type appInput struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// createApp: POST /apps. Any user may register an app and becomes its
// owner in the same transaction.
func (s *server) createApp(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in appInput
	if err := decode(r, &in); err != nil {
		return err
	}
	a := &apps.App{Name: in.Name, Description: in.Description}
	grant := func(ctx context.Context, tx *sqlx.Tx) error {
		return s.Enforcer.GrantTx(ctx, tx, c.name(), a.Name, rbac.RoleOwner)
	}
	if err := s.Apps.Create(r.Context(), c.actor, a, grant); err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/apps/"+a.Name)
	w.Header().Set("ETag", etag(a.Version))
	writeJSON(w, http.StatusCreated, toAppJSON(a))
	return nil
}

// visibleApp loads the app named in the path if the caller may see it. An
// app the caller is not a member of is a 404 like a missing one, audited
// as a denied access.
func (s *server) visibleApp(r *http.Request, c *caller) (*apps.App, error) {
	name := r.PathValue("app")
	a, err := s.Apps.Get(r.Context(), name)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, notFound("app", name)
	}
	if err != nil {
		return nil, err
	}
	if !s.isAdmin(c) && !s.Enforcer.Can(c.name(), a.Name, rbac.ActionView) {
		return nil, s.denied(r.Context(), c, r, a.Name, "app", a.Name, notFound("app", name))
	}
	return a, nil
}

// getApp: GET /apps/{app}, with the version as ETag.
func (s *server) getApp(w http.ResponseWriter, r *http.Request, c *caller) error {
	a, err := s.visibleApp(r, c)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(a.Version))
	writeJSON(w, http.StatusOK, toAppJSON(a))
	return nil
}

// memberJSON is one role assignment on an app.
type memberJSON struct {
	User string `json:"user"`
	Role string `json:"role"`
}

// listMembers: GET /apps/{app}/members, for every member of the app.
func (s *server) listMembers(w http.ResponseWriter, r *http.Request, c *caller) error {
	a, err := s.visibleApp(r, c)
	if err != nil {
		return err
	}
	members, err := s.Enforcer.Members(r.Context(), a.Name)
	if err != nil {
		return err
	}
	out := struct {
		App     string       `json:"app"`
		Members []memberJSON `json:"members"`
	}{App: a.Name, Members: make([]memberJSON, 0, len(members))}
	for _, m := range members {
		out.Members = append(out.Members, memberJSON{User: m.User, Role: string(m.Role)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// canManage checks the owner role on a visible app, auditing a refusal.
func (s *server) canManage(r *http.Request, c *caller, a *apps.App) error {
	if s.isAdmin(c) || s.Enforcer.Can(c.name(), a.Name, rbac.ActionManage) {
		return nil
	}
	return s.denied(r.Context(), c, r, a.Name, "app", a.Name,
		forbidden("managing the members of app %q needs its owner role", a.Name))
}

// roleInput is the body of PUT /apps/{app}/members/{user}.
type roleInput struct {
	Role string `json:"role"`
}

func parseRole(s string) (rbac.Role, error) {
	switch s {
	case string(rbac.RoleOwner):
		return rbac.RoleOwner, nil
	case string(rbac.RoleViewer):
		return rbac.RoleViewer, nil
	case "":
		return "", errs.Invalid("role", "is required")
	}
	return "", errs.Invalid("role", `must be "owner" or "viewer"`)
}

// grantMember: PUT /apps/{app}/members/{user} {"role": "viewer"}. It sets
// the user's one role on the app, replacing any other; owners only.
func (s *server) grantMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	a, err := s.visibleApp(r, c)
	if err != nil {
		return err
	}
	if err := s.canManage(r, c, a); err != nil {
		return err
	}
	var in roleInput
	if err := decode(r, &in); err != nil {
		return err
	}
	role, err := parseRole(in.Role)
	if err != nil {
		return err
	}
	user := r.PathValue("user")
	if err := s.Enforcer.Grant(r.Context(), c.actor, user, a.Name, role); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, memberJSON{User: user, Role: string(role)})
	return nil
}

// revokeMember: DELETE /apps/{app}/members/{user}; owners only. The last
// owner cannot be removed (409).
func (s *server) revokeMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	a, err := s.visibleApp(r, c)
	if err != nil {
		return err
	}
	if err := s.canManage(r, c, a); err != nil {
		return err
	}
	user := r.PathValue("user")
	if err := s.Enforcer.Revoke(r.Context(), c.actor, user, a.Name); err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return &refusal{kind: errs.ErrNotFound, message: "user " + strconv.Quote(user) + " has no role on app " + strconv.Quote(a.Name)}
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
