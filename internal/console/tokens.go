package console

import (
	"math"
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
	Choices []expiryChoice
	// Today is the UTC date, the earliest a typed expiry may not be.
	Today string
}

type tokenRow struct {
	ID        int64
	Name      string
	Prefix    string
	CreatedAt time.Time
	LastUsed  time.Time
	// ExpiresAt is when the token stops working; zero for never.
	ExpiresAt time.Time
	Revoked   bool
	Expired   bool
}

func newTokenRow(t *accounts.Token, now time.Time) tokenRow {
	r := tokenRow{ID: t.ID, Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt, Revoked: t.RevokedAt != nil,
		Expired: t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)}
	if t.LastUsedAt != nil {
		r.LastUsed = *t.LastUsedAt
	}
	if t.ExpiresAt != nil {
		r.ExpiresAt = *t.ExpiresAt
	}
	return r
}

// tokenForm is the create form as typed: Expires is one of expiryChoices,
// ExpiresAt the date typed for the "date" choice (YYYY-MM-DD).
type tokenForm struct {
	Name      string
	Expires   string
	ExpiresAt string
}

// expiryChoice is one option of the token form's expiry.
type expiryChoice struct {
	Value, Label string
	// Days until expiry; 0 for never or a date of the user's.
	Days int
}

// expiryChoices are the expiries the token form offers; a new form
// preselects defaultExpiry. A token that cannot expire is a choice, not
// the default: a forgotten token should stop working on its own.
var expiryChoices = []expiryChoice{
	{"7", "in 7 days", 7}, {"30", "in 30 days", 30}, {"90", "in 90 days", 90}, {"365", "in a year", 365},
	{"date", "on a date…", 0}, {"never", "never", 0},
}

const defaultExpiry = "90"

// tokenExpiry reads the form's expiry: nil for never. A form that sends
// no choice at all (an older page, a script) means never, as in the API.
// The date is the first day the token no longer works, from 00:00 UTC;
// that it lies ahead is the store's rule.
func tokenExpiry(f tokenForm, now time.Time) (*time.Time, error) {
	switch f.Expires {
	case "", "never":
		return nil, nil
	case "date":
		if f.ExpiresAt == "" {
			return nil, errs.Invalid("expires_at", "is required: pick the day the token stops working")
		}
		d, err := time.ParseInLocation("2006-01-02", f.ExpiresAt, time.UTC)
		if err != nil {
			return nil, errs.Invalid("expires_at", "must be a date like 2030-01-31")
		}
		return &d, nil
	}
	for _, ch := range expiryChoices {
		if ch.Value == f.Expires && ch.Days > 0 {
			t := now.AddDate(0, 0, ch.Days)
			return &t, nil
		}
	}
	return nil, errs.Invalid("expires", "must be one of the listed choices")
}

func (s *server) listTokens(c *gin.Context) {
	s.renderTokens(c, http.StatusOK, "", tokenForm{Expires: defaultExpiry}, nil)
}

func (s *server) renderTokens(c *gin.Context, st int, created string, form tokenForm, v *errs.Validation) {
	list, err := s.svc.Tokens(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	now := time.Now()
	p := &tokensPage{layout: layout{Title: "API tokens", Nav: "tokens"}, Created: created, Form: form, Errors: v,
		Choices: expiryChoices, Today: now.UTC().Format("2006-01-02")}
	for _, t := range list {
		p.Tokens = append(p.Tokens, newTokenRow(t, now))
	}
	s.render(c, st, "tokens", p)
}

// createToken makes a token and shows its secret in this response, not
// after a redirect: the secret must never be stored, not even in a cookie,
// so there is no later page that could show it.
func (s *server) createToken(c *gin.Context) {
	form := tokenForm{Name: postValue(c, "name"), Expires: postValue(c, "expires"), ExpiresAt: postValue(c, "expires_at")}
	var secret string
	expires, err := tokenExpiry(form, time.Now())
	if err == nil {
		secret, _, err = s.svc.CreateToken(ctx(c), caller(c), manage.CreateToken{Name: form.Name, Expires: expires})
	}
	if err != nil {
		s.failForm(c, err, "name", func(st int, v *errs.Validation) { s.renderTokens(c, st, "", form, v) })
		return
	}
	s.renderTokens(c, http.StatusOK, secret, tokenForm{Expires: defaultExpiry}, nil)
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

// until says how long until t, roughly, for people: "in 3 days".
func until(t time.Time) string {
	d := time.Until(t)
	switch {
	case d <= 0:
		return "now"
	case d < time.Hour:
		return "in " + strconv.Itoa(max(1, int(d.Minutes()))) + " min"
	case d < 48*time.Hour:
		return "in " + strconv.Itoa(int(d.Hours())) + " h"
	default:
		return "in " + strconv.Itoa(int(math.Round(d.Hours()/24))) + " days"
	}
}
