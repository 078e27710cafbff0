package api

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/manage"
)

// appJSON is an app as the API returns it.
type appJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	stampJSON
}

func toAppJSON(a *apps.App) appJSON {
	return appJSON{Name: a.Name, Description: a.Description, stampJSON: toStampJSON(a.Stamp)}
}

// listApps: GET /apps?search=&cursor=&limit=. Callers see the apps they
// are members of; admins see every app.
func (s *server) listApps(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	search, err := query(r, "search", 63)
	if err != nil {
		return err
	}
	cursor, limit, err := page(r, "app")
	if err != nil {
		return err
	}
	p, err := s.svc.ListApps(r.Context(), c, manage.AppQuery{Search: search, After: cursor, Limit: limit})
	if err != nil {
		return err
	}
	writePage(w, "apps", nextCursor("app", p.Next), p.Total, p.Apps, toAppJSON)
	return nil
}

// appInput is the body of POST /apps.
type appInput struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// createApp: POST /apps. Any user may register an app and becomes its
// owner.
func (s *server) createApp(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var in appInput
	if err := decode(r, &in); err != nil {
		return err
	}
	a, err := s.svc.CreateApp(r.Context(), c, manage.CreateApp{Name: in.Name, Description: in.Description})
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusCreated, Prefix+"/apps/"+a.Name, a.Version, toAppJSON(a))
	return nil
}

// getApp: GET /apps/{app}, with the version as ETag.
func (s *server) getApp(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	a, err := s.svc.App(r.Context(), c, r.PathValue("app"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, "", a.Version, toAppJSON(a))
	return nil
}

// memberJSON is one role assignment on an app.
type memberJSON struct {
	User string `json:"user"`
	Role string `json:"role"`
}

// listMembers: GET /apps/{app}/members, for every member of the app.
func (s *server) listMembers(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	m, err := s.svc.Members(r.Context(), c, r.PathValue("app"))
	if err != nil {
		return err
	}
	out := struct {
		App     string       `json:"app"`
		Members []memberJSON `json:"members"`
	}{App: m.App.Name, Members: make([]memberJSON, 0, len(m.Members))}
	for _, mb := range m.Members {
		out.Members = append(out.Members, memberJSON{User: mb.User, Role: string(mb.Role)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// roleInput is the body of PUT /apps/{app}/members/{user}.
type roleInput struct {
	Role string `json:"role"`
}

// grantMember: PUT /apps/{app}/members/{user} {"role": "viewer"}. It sets
// the user's one role on the app, replacing any other; owners only.
func (s *server) grantMember(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	req := manage.GrantRole{App: r.PathValue("app"), User: r.PathValue("user")}
	var in roleInput
	if err := decode(r, &in); err != nil {
		return refusedFirst(err, func() error {
			_, err := s.svc.ManagedApp(r.Context(), c, req.App)
			return err
		})
	}
	req.Role = in.Role
	role, err := s.svc.GrantRole(r.Context(), c, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, memberJSON{User: req.User, Role: string(role)})
	return nil
}

// revokeMember: DELETE /apps/{app}/members/{user}; owners only. The last
// owner cannot be removed (409).
func (s *server) revokeMember(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	err := s.svc.RevokeRole(r.Context(), c, manage.RevokeRole{App: r.PathValue("app"), User: r.PathValue("user")})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refusedFirst answers a request the transport could not read (a body, a
// header): when the caller may not even reach the object, that refusal
// comes first, so a malformed request never tells more than a good one.
func refusedFirst(readErr error, access func() error) error {
	if err := access(); err != nil {
		return err
	}
	return readErr
}
