package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/usage"
)

// overridesPageSize is how many overrides one page of the table shows.
const overridesPageSize = 25

// overrideForm holds a new override as the form shows and sends it.
type overrideForm struct {
	Match       string
	Key         string
	MaxPermits  string
	Rate        string
	Description string
}

// overridesView is the per-key part of a keyed bucket's detail page.
type overridesView struct {
	Overrides []*buckets.Override
	Total     int
	// Search is the key prefix searched; After and Next page the table.
	Search string
	After  string
	Next   string
	// Message says why the list could not be read.
	Message string
	Form    overrideForm
	Errors  *errs.Validation
	HotKeys []usage.HotKey
	// HotMessage says why the hot keys could not be read.
	HotMessage string
}

type overrideDeletePage struct {
	layout
	Bucket   string
	Override *buckets.Override
	Error    string
}

// overridesOf reads the overrides table and the hot keys of a keyed bucket.
func (s *server) overridesOf(c *gin.Context, bucket string) *overridesView {
	v := &overridesView{Search: rawQuery(c, "oq", buckets.MaxKeyLength), After: queryValue(c, "oafter", 400),
		Form: overrideForm{Match: string(buckets.MatchExact)}}
	page, err := s.svc.ListOverrides(ctx(c), caller(c), bucket, manage.OverrideQuery{Search: v.Search, After: v.After,
		Limit: overridesPageSize})
	switch {
	case status(err) == http.StatusUnprocessableEntity:
		v.Message = "This page of overrides does not exist; start from the first page."
	case err != nil:
		v.Message = "The overrides cannot be read right now."
	default:
		v.Overrides, v.Total, v.Next = page.Overrides, page.Total, page.Next
	}
	hot, err := s.svc.HotKeys(ctx(c), caller(c), bucket, 0)
	switch {
	case errors.Is(err, manage.ErrNoRedis):
		v.HotMessage = "This console is not connected to Redis."
	case err != nil:
		v.HotMessage = "Redis did not answer; the hot keys cannot be shown right now."
	default:
		v.HotKeys = hot
	}
	return v
}

// rawQuery is a query parameter made valid UTF-8 and cut to n bytes, but
// not trimmed: keys may have spaces at either end.
func rawQuery(c *gin.Context, name string, n int) string {
	return clip(strings.ToValidUTF8(c.Query(name), "\uFFFD"), n)
}

// readOverrideForm parses a posted override. The key is taken as typed
// (not trimmed): it is compared byte for byte with callers' keys.
func readOverrideForm(c *gin.Context) (overrideForm, manage.OverridePatch) {
	f := overrideForm{
		Match:       postValue(c, "match"),
		Key:         strings.ToValidUTF8(c.PostForm("key"), "\uFFFD"),
		MaxPermits:  postValue(c, "max_permits"),
		Rate:        postValue(c, "rate"),
		Description: postValue(c, "description"),
	}
	p := manage.OverridePatch{Match: &f.Match, Key: &f.Key, Rate: &f.Rate, Description: &f.Description}
	if n, err := buckets.ParseMaxPermits(f.MaxPermits); err != nil {
		p.Problems.Fields = append(p.Problems.Fields, errs.Fields(err).Fields...)
	} else {
		p.MaxPermits = &n
	}
	return f, p
}

// createOverride adds an override from the form on the bucket's page; a
// refused one shows the page again with the form and its errors.
func (s *server) createOverride(c *gin.Context) {
	name := c.Param("bucket")
	form, patch := readOverrideForm(c)
	o, err := s.svc.CreateOverride(ctx(c), caller(c), manage.CreateOverride{Bucket: name, Fields: patch})
	if err == nil {
		s.redirect(c, "/buckets/"+url.PathEscape(name)+"?oq="+url.QueryEscape(o.Key)+"#overrides",
			"Override for "+string(o.Match)+" key "+strconv.Quote(o.Key)+" added.")
		return
	}
	v, st := formErrors(err, "key")
	if v == nil {
		s.fail(c, err)
		return
	}
	s.bucketDetail(c, st, func(ov *overridesView) { ov.Form, ov.Errors = form, v })
}

// overrideFor reads the {id} of the path and returns the override if the
// caller may change it.
func (s *server) overrideFor(c *gin.Context) (*buckets.Override, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		// Checked first, as for any other id: a refusal must not depend on it.
		if _, err := s.svc.EditableBucket(ctx(c), caller(c), c.Param("bucket")); err != nil {
			return nil, err
		}
		return nil, errs.NotFoundf("no such override")
	}
	return s.svc.EditableOverride(ctx(c), caller(c), c.Param("bucket"), id)
}

func (s *server) confirmDeleteOverride(c *gin.Context) {
	o, err := s.overrideFor(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.render(c, http.StatusOK, "override_delete", &overrideDeletePage{layout: layout{Title: "Delete override", Nav: "buckets"},
		Bucket: o.Bucket, Override: o})
}

// deleteOverride deletes the version the confirmation page showed.
func (s *server) deleteOverride(c *gin.Context) {
	o, err := s.overrideFor(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	version, err := strconv.ParseInt(c.PostForm("version"), 10, 64)
	if err != nil || version < 1 {
		s.fail(c, errs.Invalid("version", "is missing; open the delete page again"))
		return
	}
	err = s.svc.DeleteOverride(ctx(c), caller(c), manage.DeleteOverride{Bucket: o.Bucket, ID: o.ID, Version: version})
	var stale *manage.OverrideStaleError
	switch {
	case err == nil:
		s.redirect(c, "/buckets/"+url.PathEscape(o.Bucket)+"#overrides", "Override for "+strconv.Quote(o.Key)+" deleted.")
	case errors.As(err, &stale):
		s.render(c, http.StatusConflict, "override_delete", &overrideDeletePage{layout: layout{Title: "Delete override", Nav: "buckets"},
			Bucket: o.Bucket, Override: stale.Current,
			Error: "Someone changed this override after you opened this page; nothing was deleted. Check the values below and confirm again."})
	default:
		s.fail(c, err)
	}
}
