package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// tokensPage lists the user's API tokens. Created holds a token just made,
// shown on this one response only.
type tokensPage struct {
	layout
	Tokens  []tokenRow
	Created string
	Form    tokenForm
	Errors  *errs.Validation
}

type tokenRow struct {
	ID        int64
	Name      string
	Prefix    string
	CreatedAt time.Time
	LastUsed  time.Time
	Revoked   bool
	Expired   bool
}

func newTokenRow(t *accounts.Token, now time.Time) tokenRow {
	r := tokenRow{ID: t.ID, Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt, Revoked: t.RevokedAt != nil,
		Expired: t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)}
	if t.LastUsedAt != nil {
		r.LastUsed = *t.LastUsedAt
	}
	return r
}

type tokenForm struct {
	Name string
}

func (s *server) listTokens(c *gin.Context) {
	s.renderTokens(c, http.StatusOK, "", tokenForm{}, nil)
}

func (s *server) renderTokens(c *gin.Context, st int, created string, form tokenForm, v *errs.Validation) {
	list, err := s.svc.Tokens(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	now := time.Now()
	p := &tokensPage{layout: layout{Title: "API tokens", Nav: "tokens"}, Created: created, Form: form, Errors: v}
	for _, t := range list {
		p.Tokens = append(p.Tokens, newTokenRow(t, now))
	}
	s.render(c, st, "tokens", p)
}

// createToken makes a token and shows its secret in this response, not
// after a redirect: the secret must never be stored, not even in a cookie,
// so there is no later page that could show it.
func (s *server) createToken(c *gin.Context) {
	form := tokenForm{Name: postValue(c, "name")}
	secret, _, err := s.svc.CreateToken(ctx(c), caller(c), manage.CreateToken{Name: form.Name})
	if err != nil {
		if v, st := formErrors(err, "name"); v != nil {
			s.renderTokens(c, st, "", form, v)
			return
		}
		s.fail(c, err)
		return
	}
	s.renderTokens(c, http.StatusOK, secret, tokenForm{}, nil)
}

// revokeToken revokes one of the user's own tokens.
func (s *server) revokeToken(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		s.fail(c, errs.ErrNotFound)
		return
	}
	if err := s.svc.RevokeToken(ctx(c), caller(c), manage.RevokeToken{ID: id}); err != nil {
		s.fail(c, err)
		return
	}
	s.redirect(c, "/tokens", "Token revoked.")
}
