package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/manage"
)

// mappingRoutes are the routes of an app's descriptor mappings and app
// tokens.
func (s *server) mappingRoutes() []route {
	return []route{
		{method: http.MethodGet, path: Prefix + "/apps/{app}/mappings", handle: s.listMappings},
		{method: http.MethodPost, path: Prefix + "/apps/{app}/mappings", handle: s.createMapping},
		{method: http.MethodGet, path: Prefix + "/apps/{app}/mappings/{id}", handle: s.getMapping},
		{method: http.MethodPut, path: Prefix + "/apps/{app}/mappings/{id}", handle: s.replaceMapping},
		{method: http.MethodDelete, path: Prefix + "/apps/{app}/mappings/{id}", handle: s.deleteMapping},
		{method: http.MethodGet, path: Prefix + "/apps/{app}/tokens", handle: s.listAppTokens},
		{method: http.MethodPost, path: Prefix + "/apps/{app}/tokens", handle: s.createAppToken},
		{method: http.MethodDelete, path: Prefix + "/apps/{app}/tokens/{id}", handle: s.revokeAppToken},
	}
}

// pathID reads the numeric {id} of the path.
func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, badParam("id", "must be a positive integer")
	}
	return id, nil
}

// mappingInput is the body of POST and PUT of a mapping.
type mappingInput struct {
	Domain      string              `json:"domain"`
	Entries     []descriptors.Entry `json:"entries"`
	Bucket      string              `json:"bucket"`
	KeyFrom     string              `json:"key_from"`
	Description string              `json:"description"`
}

func (in *mappingInput) save(app string, id, version int64) manage.SaveMapping {
	return manage.SaveMapping{App: app, ID: id, Version: version, Domain: in.Domain, Entries: in.Entries,
		Bucket: in.Bucket, KeyFrom: in.KeyFrom, Description: in.Description}
}

// mappingReader is the access check of a change to mapping id of the app
// in the path: the caller must at least see it.
func (s *server) mappingReader(r *http.Request, c manage.Caller, id int64) func() error {
	return func() error {
		_, err := s.svc.Mapping(r.Context(), c, r.PathValue("app"), id)
		return err
	}
}

func mappingPath(m *descriptors.Mapping) string {
	return Prefix + "/apps/" + m.App + "/mappings/" + strconv.FormatInt(m.ID, 10)
}

// listMappings: GET /apps/{app}/mappings, for anyone who sees the app.
func (s *server) listMappings(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	ms, err := s.svc.Mappings(r.Context(), c, r.PathValue("app"))
	if err != nil {
		return err
	}
	if ms == nil {
		ms = []*descriptors.Mapping{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"mappings": ms})
	return nil
}

// createMapping: POST /apps/{app}/mappings; owners only.
func (s *server) createMapping(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var in mappingInput
	if err := decode(r, &in); err != nil {
		return err
	}
	m, err := s.svc.CreateMapping(r.Context(), c, in.save(r.PathValue("app"), 0, 0))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusCreated, mappingPath(m), m.Version, m)
	return nil
}

// getMapping: GET /apps/{app}/mappings/{id}, with the version as ETag.
func (s *server) getMapping(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	m, err := s.svc.Mapping(r.Context(), c, r.PathValue("app"), id)
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, "", m.Version, m)
	return nil
}

// replaceMapping: PUT /apps/{app}/mappings/{id}, with If-Match; a stale
// version is a 412, as for every versioned object.
func (s *server) replaceMapping(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var in mappingInput
	version, err := precondition(r, &in, s.mappingReader(r, c, id))
	if err != nil {
		return err
	}
	m, err := s.svc.UpdateMapping(r.Context(), c, in.save(r.PathValue("app"), id, version))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, "", m.Version, m)
	return nil
}

// deleteMapping: DELETE /apps/{app}/mappings/{id}, with If-Match.
func (s *server) deleteMapping(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	version, err := precondition(r, nil, s.mappingReader(r, c, id))
	if err != nil {
		return err
	}
	if err := s.svc.DeleteMapping(r.Context(), c, manage.DeleteMapping{App: r.PathValue("app"), ID: id, Version: version}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listAppTokens: GET /apps/{app}/tokens; owners only. Secrets are never
// listed.
func (s *server) listAppTokens(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	ts, err := s.svc.AppTokens(r.Context(), c, r.PathValue("app"))
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []*apptokens.Token{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ts})
	return nil
}

// appTokenInput is the body of POST /apps/{app}/tokens.
type appTokenInput struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// createAppToken: POST /apps/{app}/tokens; owners only. The answer is the
// only place the secret ever appears.
func (s *server) createAppToken(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var in appTokenInput
	if err := decode(r, &in); err != nil {
		return err
	}
	secret, t, err := s.svc.CreateAppToken(r.Context(), c, manage.CreateAppToken{App: r.PathValue("app"), Name: in.Name, Expires: in.ExpiresAt})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, struct {
		*apptokens.Token
		Secret string `json:"secret"`
	}{t, secret})
	return nil
}

// revokeAppToken: DELETE /apps/{app}/tokens/{id}; owners only.
func (s *server) revokeAppToken(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.svc.RevokeAppToken(r.Context(), c, r.PathValue("app"), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
