package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// decisionsSection is the app page's part about the decision service: the
// descriptor mappings (for every member) and the app tokens (for owners).
type decisionsSection struct {
	Mappings      []*descriptors.Mapping
	Tokens        []appTokenRow
	MappingForm   mappingForm
	MappingErrors *errs.Validation
	TokenName     string
	TokenErrors   *errs.Validation
	// Secret is a token just created, shown on this one response only.
	Secret string
}

// mappingForm is what the add-mapping form sends back. Entries are typed
// one per line as key=value (key alone matches any value).
type mappingForm struct {
	Domain, Entries, Bucket, KeyFrom, Description string
}

func (f mappingForm) entries() []descriptors.Entry {
	var out []descriptors.Entry
	for _, line := range strings.Split(f.Entries, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out = append(out, descriptors.Entry{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)})
	}
	return out
}

func (s *server) loadDecisions(c *gin.Context, m *manage.AppMembers, d *decisionsSection) error {
	var err error
	if d.Mappings, err = s.svc.Mappings(ctx(c), caller(c), m.App.Name); err != nil {
		return err
	}
	if m.CanManage {
		ts, err := s.svc.AppTokens(ctx(c), caller(c), m.App.Name)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, t := range ts {
			d.Tokens = append(d.Tokens, appTokenRow{Token: t, Expired: t.RevokedAt == nil && !t.Active(now)})
		}
	}
	return nil
}

// appTokenRow is an app token as listed: Expired is worked out here, since
// a template has no clock.
type appTokenRow struct {
	*apptokens.Token
	Expired bool
}

// renderDecisions shows the app page with its decisions part d (a refused
// form, a new token's secret) and the member form empty.
func (s *server) renderDecisions(c *gin.Context, st int, d decisionsSection) {
	s.renderAppWith(c, st, grantForm{Role: string(manage.RoleViewer)}, nil, "", d)
}

func appURL(app string) string { return "/apps/" + url.PathEscape(app) }

// createMapping adds a mapping; a refused one comes back on the app page
// with the errors next to the fields.
func (s *server) createMapping(c *gin.Context) {
	app := c.Param("app")
	f := mappingForm{Domain: postValue(c, "domain"), Entries: postValue(c, "entries"), Bucket: postValue(c, "bucket"),
		KeyFrom: postValue(c, "key_from"), Description: postValue(c, "description")}
	m, err := s.svc.CreateMapping(ctx(c), caller(c), manage.SaveMapping{App: app, Domain: f.Domain, Entries: f.entries(),
		Bucket: f.Bucket, KeyFrom: f.KeyFrom, Description: f.Description})
	if err != nil {
		s.failForm(c, err, "domain", func(st int, v *errs.Validation) {
			s.renderDecisions(c, st, decisionsSection{MappingForm: f, MappingErrors: v})
		})
		return
	}
	s.redirect(c, appURL(app), "Descriptors of domain "+m.Domain+" now map to bucket "+m.Bucket+".")
}

// confirmPage asks before a mapping is deleted or a token revoked.
type confirmPage struct {
	layout
	App, Heading, Text, Action, Button string
	Version                            int64
	// Cancel names the way back ("Keep it" when empty).
	Cancel string
	// Blocked, when set, says why the action cannot be done; the page
	// shows it instead of the button.
	Blocked string
	// Stale is the refusal of a confirmation made on an older version.
	Stale error
}

func pathID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	return id, err == nil && id > 0
}

// appItem reads the app and the id of one of its items (a mapping, a
// token) from the path, or answers "no such item" and returns false.
func (s *server) appItem(c *gin.Context, item string) (string, int64, bool) {
	id, ok := pathID(c)
	if !ok {
		s.fail(c, errs.NotFoundf("no such %s", item))
	}
	return c.Param("app"), id, ok
}

func (s *server) confirmDeleteMapping(c *gin.Context) {
	app, id, ok := s.appItem(c, "mapping")
	if !ok {
		return
	}
	// Reading through the owner check first: a viewer is refused here,
	// not only when confirming.
	if _, err := s.svc.AppTokens(ctx(c), caller(c), app); err != nil {
		s.fail(c, err)
		return
	}
	m, err := s.svc.Mapping(ctx(c), caller(c), app, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.render(c, http.StatusOK, "app_confirm", mappingDeletePage(m, nil))
}

// mappingDeletePage asks before deleting m, after stale when a
// confirmation came from an older version.
func mappingDeletePage(m *descriptors.Mapping, stale error) *confirmPage {
	return &confirmPage{layout: layout{Title: "Delete mapping", Nav: "apps"}, App: m.App,
		Heading: "Delete this descriptor mapping?", Version: m.Version, Stale: stale,
		Text:   "Descriptors of domain " + m.Domain + " will no longer take from bucket " + m.Bucket + ".",
		Action: appURL(m.App) + "/mappings/" + strconv.FormatInt(m.ID, 10) + "/delete", Button: "Delete mapping"}
}

func (s *server) deleteMapping(c *gin.Context) {
	app, id, ok := s.appItem(c, "mapping")
	if !ok {
		return
	}
	version, _ := strconv.ParseInt(c.PostForm("version"), 10, 64)
	err := s.svc.DeleteMapping(ctx(c), caller(c), manage.DeleteMapping{App: app, ID: id, Version: version})
	if cur, ok := staleCurrent[*descriptors.Mapping](err); ok {
		s.render(c, status(err), "app_confirm", mappingDeletePage(cur, err))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.redirect(c, appURL(app), "Descriptor mapping deleted.")
}

// createAppToken makes a token and shows its secret in this response, not
// after a redirect, for the same reason as a personal token's.
func (s *server) createAppToken(c *gin.Context) {
	app := c.Param("app")
	name := postValue(c, "name")
	secret, _, err := s.svc.CreateAppToken(ctx(c), caller(c), manage.CreateAppToken{App: app, Name: name})
	if err != nil {
		s.failForm(c, err, "name", func(st int, v *errs.Validation) {
			s.renderDecisions(c, st, decisionsSection{TokenName: name, TokenErrors: v})
		})
		return
	}
	s.renderDecisions(c, http.StatusOK, decisionsSection{Secret: secret})
}

func (s *server) confirmRevokeAppToken(c *gin.Context) {
	app, id, ok := s.appItem(c, "token")
	if !ok {
		return
	}
	ts, err := s.svc.AppTokens(ctx(c), caller(c), app)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, t := range ts {
		if t.ID == id && t.RevokedAt == nil {
			s.render(c, http.StatusOK, "app_confirm", &confirmPage{layout: layout{Title: "Revoke token", Nav: "apps"}, App: app,
				Heading: "Revoke token " + t.Name + "?", Text: "Gateways using it are refused within seconds. This cannot be undone.",
				Action: appURL(app) + "/tokens/" + strconv.FormatInt(id, 10) + "/revoke", Button: "Revoke token"})
			return
		}
	}
	s.fail(c, errs.NotFoundf("no such token"))
}

func (s *server) revokeAppToken(c *gin.Context) {
	app, id, ok := s.appItem(c, "token")
	if !ok {
		return
	}
	if err := s.svc.RevokeAppToken(ctx(c), caller(c), app, id); err != nil {
		s.fail(c, err)
		return
	}
	s.redirect(c, appURL(app), "App token revoked.")
}
