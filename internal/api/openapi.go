package api

import (
	_ "embed"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/manage"
)

// openAPIDoc is the hand-written OpenAPI 3.1 description of every route;
// a test keeps it and the route table in step, both ways.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI: GET /openapi.json, public: the contract is no secret.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request, _ manage.Caller) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(openAPIDoc)
	}
	return nil
}

// meJSON describes the caller.
type meJSON struct {
	User  string    `json:"user"`
	Admin bool      `json:"admin"`
	Token tokenJSON `json:"token"`
	// Apps are the apps the caller is a member of; absent for admins, who
	// see every app.
	Apps []string `json:"apps,omitempty"`
}

type tokenJSON struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// me: GET /me, who the token belongs to, so that a script can check its
// credentials before it changes anything.
func (s *server) me(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	out := meJSON{User: c.Name(), Admin: s.svc.IsAdmin(c), Token: tokenJSON{Name: c.Token.Name, ExpiresAt: c.Token.ExpiresAt}}
	if !out.Admin {
		out.Apps = s.svc.Visible(c)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
