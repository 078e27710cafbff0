package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// bucketsPageSize is how many buckets one page of the list shows.
const bucketsPageSize = 25

// bucketsPage lists the buckets the user can see.
type bucketsPage struct {
	layout
	Buckets   []*buckets.Bucket
	Search    string
	App       string
	Apps      []string
	After     string
	Next      string
	Total     int
	CanCreate bool
}

// bucketForm holds a bucket as the form shows and sends it: text, exactly
// as typed, so that an invalid value comes back for correction.
type bucketForm struct {
	Name        string
	OwnerApp    string
	Description string
	MaxPermits  string
	Rate        string
	AllowedApps string
	Version     int64
}

type bucketFormPage struct {
	layout
	New       bool
	Form      bucketForm
	Errors    *errs.Validation
	OwnerApps []string
	// Conflict is the newer bucket a stale edit ran into.
	Conflict *buckets.Bucket
}

// liveState is what Redis holds about a bucket, for the detail page.
type liveState struct {
	// Status is "in-sync", "pending", "missing" or "unavailable".
	Status   string
	Exists   bool
	Tokens   float64
	Capacity int64
	Refilled time.Time
	Version  int64
	Now      time.Time
	Message  string
}

type bucketPage struct {
	layout
	Bucket  *buckets.Bucket
	CanEdit bool
	Live    liveState
	Usage   usageView
}

type bucketDeletePage struct {
	layout
	Bucket *buckets.Bucket
	Error  string
}

func (s *server) listBuckets(c *gin.Context) {
	user := username(c)
	f := buckets.Filter{Search: queryValue(c, "q", 100), App: queryValue(c, "app", 63),
		After: queryValue(c, "after", 63), Limit: bucketsPageSize, VisibleTo: s.enf.Visible(user)}
	if f.VisibleTo != nil && len(f.VisibleTo) == 0 {
		f.VisibleTo = []string{}
	}
	page, err := s.buckets.List(ctx(c), f)
	if err != nil {
		s.fail(c, err)
		return
	}
	names, err := s.appChoices(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	owned, err := s.ownedApps(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.render(c, http.StatusOK, "buckets", &bucketsPage{layout: layout{Title: "Buckets", Nav: "buckets"},
		Buckets: page.Buckets, Search: f.Search, App: f.App, Apps: names, After: f.After, Next: page.Next,
		Total: page.Total, CanCreate: len(owned) > 0})
}

// appChoices lists the apps the user may filter by: their apps, or every
// app for admins.
func (s *server) appChoices(c *gin.Context) ([]string, error) {
	visible := s.enf.Visible(username(c))
	if visible != nil {
		out := slices.Clone(visible)
		slices.Sort(out)
		return out, nil
	}
	page, err := s.apps.List(ctx(c), apps.Filter{Limit: apps.MaxLimit})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(page.Apps))
	for _, a := range page.Apps {
		out = append(out, a.Name)
	}
	return out, nil
}

// ownedApps lists the apps the user may create buckets for.
func (s *server) ownedApps(c *gin.Context) ([]string, error) {
	if isAdmin(c) {
		return s.appChoices(c)
	}
	var out []string
	for app, role := range s.enf.Apps(username(c)) {
		if role == rbac.RoleOwner {
			out = append(out, app)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *server) newBucket(c *gin.Context) {
	owned, err := s.ownedApps(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if len(owned) == 0 {
		s.deny(c, "", "bucket", "", "creating a bucket needs the owner role on an app")
		return
	}
	form := bucketForm{OwnerApp: queryValue(c, "app", 63)}
	if !slices.Contains(owned, form.OwnerApp) {
		form.OwnerApp = owned[0]
	}
	s.render(c, http.StatusOK, "bucket_form", &bucketFormPage{layout: layout{Title: "New bucket", Nav: "buckets"},
		New: true, Form: form, OwnerApps: owned})
}

// readBucketForm parses the posted form into a bucket. Values that cannot
// even be parsed are reported in the returned validation, together with
// what Validate finds in the rest. An edit passes the bucket being edited:
// its name and owner app are not the form's to change.
func readBucketForm(c *gin.Context, editing *buckets.Bucket) (bucketForm, *buckets.Bucket, *errs.Validation) {
	f := bucketForm{
		Name:        postValue(c, "name"),
		OwnerApp:    postValue(c, "owner_app"),
		Description: postValue(c, "description"),
		MaxPermits:  postValue(c, "max_permits"),
		Rate:        postValue(c, "rate"),
		AllowedApps: postValue(c, "allowed_apps"),
	}
	f.Version, _ = strconv.ParseInt(c.PostForm("version"), 10, 64)
	if editing != nil {
		f.Name, f.OwnerApp = editing.Name, editing.OwnerApp
	}
	b := &buckets.Bucket{Name: f.Name, OwnerApp: f.OwnerApp, Description: f.Description, Version: f.Version,
		AllowedApps: splitApps(f.AllowedApps)}
	if editing != nil {
		b.ID = editing.ID // the row whose permissions were checked
	}
	var v errs.Validation
	if n, ok := parseCapacity(f.MaxPermits); ok {
		b.MaxPermits = n
	} else {
		v.Add("max_permits", "must be a whole number from 1 to 1000000000")
	}
	if r, err := buckets.ParseRate(f.Rate); err != nil {
		reason := errs.Fields(err).For("rate")
		if reason == "" {
			reason = "is not a rate; try “100 per minute”"
		}
		v.Add("rate", reason)
	} else {
		b.Rate = r
	}
	if err := b.Validate(); err != nil {
		for _, fe := range errs.Fields(err).Fields {
			if v.For(fe.Field) == "" { // an unparsable value is reported once
				v.Add(fe.Field, fe.Reason)
			}
		}
	}
	return f, b, &v
}

// parseCapacity reads a whole number, allowing the separators people type
// in large numbers ("1,000", "1 000", "1_000").
func parseCapacity(s string) (int64, bool) {
	s = strings.NewReplacer(",", "", "_", "", " ", "").Replace(s)
	if s == "" || len(s) > 12 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > buckets.MaxCapacity {
		return 0, false
	}
	return n, true
}

// splitApps reads a list of app names separated by commas or white space.
func splitApps(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

func (s *server) createBucket(c *gin.Context) {
	form, b, v := readBucketForm(c, nil)
	user := username(c)
	if !isAdmin(c) && !s.enf.Can(user, b.OwnerApp, rbac.ActionEdit) {
		s.deny(c, clip(b.OwnerApp, 63), "bucket", clip(b.Name, 100), "creating a bucket needs the owner role on its owner app")
		return
	}
	if v.Err() == nil {
		err := s.buckets.Create(ctx(c), actor(c), b)
		if err == nil {
			s.redirect(c, "/buckets/"+url.PathEscape(b.Name), "Bucket "+b.Name+" created.")
			return
		}
		switch status(err) {
		case http.StatusUnprocessableEntity:
			v = errs.Fields(err)
		case http.StatusConflict:
			v = &errs.Validation{}
			v.Add("name", conflictText(err))
		default:
			s.fail(c, err)
			return
		}
	}
	owned, err := s.ownedApps(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	st := http.StatusUnprocessableEntity
	if v.For("name") != "" && strings.Contains(v.For("name"), "already exists") {
		st = http.StatusConflict
	}
	s.render(c, st, "bucket_form", &bucketFormPage{layout: layout{Title: "New bucket", Nav: "buckets"},
		New: true, Form: form, Errors: v, OwnerApps: owned})
}

// bucketFor loads the bucket named by the request for act. It answers the
// request itself (404 when the user may not see the bucket, exactly as if
// it did not exist; 403 when they see it but may not do act) and returns
// false when refused.
func (s *server) bucketFor(c *gin.Context, act rbac.Action) (*buckets.Bucket, bool) {
	name := c.Param("bucket")
	b, err := s.buckets.Get(ctx(c), name)
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	user := username(c)
	if isAdmin(c) {
		return b, true
	}
	if !s.enf.CanSeeBucket(user, b.OwnerApp, b.AllowedApps) {
		s.hide(c, b.OwnerApp, "bucket", b.Name)
		return nil, false
	}
	if act != rbac.ActionView && !s.enf.Can(user, b.OwnerApp, rbac.ActionEdit) {
		s.deny(c, b.OwnerApp, "bucket", b.Name, "changing a bucket needs the owner role on its owner app")
		return nil, false
	}
	return b, true
}

func (s *server) showBucket(c *gin.Context) {
	b, ok := s.bucketFor(c, rbac.ActionView)
	if !ok {
		return
	}
	p := &bucketPage{layout: layout{Title: b.Name, Nav: "buckets"}, Bucket: b,
		CanEdit: isAdmin(c) || s.enf.Can(username(c), b.OwnerApp, rbac.ActionEdit)}
	// Both Redis reads at once: when Redis hangs, the page waits for the
	// longer timeout, not for the sum.
	rctx, w := ctx(c), requestedWindow(c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Usage = s.bucketUsage(rctx, b, w)
	}()
	p.Live = s.live(rctx, b)
	<-done
	s.render(c, http.StatusOK, "bucket", p)
}

// liveTimeout bounds the Redis read of the detail page: the definition is
// shown even when Redis is slow or down.
const liveTimeout = time.Second

// live reads the bucket's state in Redis and compares its version with
// MySQL's.
func (s *server) live(ctx context.Context, b *buckets.Bucket) liveState {
	if s.rdb == nil {
		return liveState{Status: "unavailable", Message: "This console is not connected to Redis."}
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	st, err := redisscript.Read(ctx, s.rdb, s.ks, b.Name)
	if err != nil {
		s.log.WarnContext(ctx, "console: read live bucket state", "bucket", b.Name, "err", err)
		return liveState{Status: "unavailable", Message: "Redis did not answer; the live state cannot be shown right now."}
	}
	if !st.Exists {
		return liveState{Status: "missing", Now: st.Now,
			Message: "Redis has no config for this bucket yet. The sync worker writes it within a second of a change; if this persists, check that the sync worker is running."}
	}
	l := liveState{Status: "pending", Exists: true, Tokens: st.Tokens, Capacity: st.Config.Capacity,
		Refilled: st.Refilled, Version: st.Config.Version, Now: st.Now}
	if st.Config.ID == b.ID && st.Config.Version == b.Version {
		l.Status = "in-sync"
	}
	return l
}

func formOf(b *buckets.Bucket) bucketForm {
	return bucketForm{Name: b.Name, OwnerApp: b.OwnerApp, Description: b.Description,
		MaxPermits: strconv.FormatInt(b.MaxPermits, 10), Rate: b.Rate.Human(),
		AllowedApps: strings.Join(b.AllowedApps, ", "), Version: b.Version}
}

func (s *server) editBucket(c *gin.Context) {
	b, ok := s.bucketFor(c, rbac.ActionEdit)
	if !ok {
		return
	}
	s.render(c, http.StatusOK, "bucket_form", &bucketFormPage{layout: layout{Title: "Edit " + b.Name, Nav: "buckets"},
		Form: formOf(b)})
}

// updateBucket saves an edit made on the version the form was loaded
// with. If someone saved a newer version meanwhile, nothing is written:
// the form comes back with the user's values, the newer values beside
// them, and the newer version, so that saving again is a deliberate choice.
func (s *server) updateBucket(c *gin.Context) {
	cur, ok := s.bucketFor(c, rbac.ActionEdit)
	if !ok {
		return
	}
	form, b, v := readBucketForm(c, cur)
	p := &bucketFormPage{layout: layout{Title: "Edit " + cur.Name, Nav: "buckets"}, Form: form}
	if err := v.Err(); err != nil {
		p.Errors = v
		s.render(c, http.StatusUnprocessableEntity, "bucket_form", p)
		return
	}
	err := s.buckets.Update(ctx(c), actor(c), b)
	if err == nil {
		s.redirect(c, "/buckets/"+url.PathEscape(b.Name), "Bucket "+b.Name+" saved (version "+strconv.FormatInt(b.Version, 10)+").")
		return
	}
	switch status(err) {
	case http.StatusUnprocessableEntity:
		p.Errors = errs.Fields(err)
		s.render(c, http.StatusUnprocessableEntity, "bucket_form", p)
	case http.StatusConflict:
		newer, gerr := s.buckets.Get(ctx(c), cur.Name)
		if gerr != nil {
			s.fail(c, gerr)
			return
		}
		p.Conflict = newer
		p.Form.Version = newer.Version
		s.render(c, http.StatusConflict, "bucket_form", p)
	default:
		s.fail(c, err)
	}
}

func (s *server) confirmDeleteBucket(c *gin.Context) {
	b, ok := s.bucketFor(c, rbac.ActionEdit)
	if !ok {
		return
	}
	s.render(c, http.StatusOK, "bucket_delete", &bucketDeletePage{layout: layout{Title: "Delete " + b.Name, Nav: "buckets"}, Bucket: b})
}

// deleteBucket deletes the version the confirmation page showed; a bucket
// changed since is not deleted, and the page comes back with the newer
// values.
func (s *server) deleteBucket(c *gin.Context) {
	b, ok := s.bucketFor(c, rbac.ActionEdit)
	if !ok {
		return
	}
	version, err := strconv.ParseInt(c.PostForm("version"), 10, 64)
	if err != nil || version < 1 {
		s.fail(c, errs.Invalid("version", "is missing; open the delete page again"))
		return
	}
	err = s.buckets.Delete(ctx(c), actor(c), b.Name, buckets.Expect{ID: b.ID, OwnerApp: b.OwnerApp, Version: version})
	if err == nil {
		s.redirect(c, "/buckets", "Bucket "+b.Name+" deleted.")
		return
	}
	if status(err) == http.StatusConflict {
		newer, gerr := s.buckets.Get(ctx(c), b.Name)
		if gerr != nil {
			s.fail(c, gerr)
			return
		}
		s.render(c, http.StatusConflict, "bucket_delete", &bucketDeletePage{layout: layout{Title: "Delete " + b.Name, Nav: "buckets"},
			Bucket: newer, Error: "Someone changed this bucket after you opened this page; nothing was deleted. Check the values below and confirm again."})
		return
	}
	if errors.Is(err, errs.ErrNotFound) {
		s.redirect(c, "/buckets", "Bucket "+b.Name+" was already deleted.")
		return
	}
	s.fail(c, err)
}
