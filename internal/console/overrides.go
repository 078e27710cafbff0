package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/chart"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
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
	Shadow      bool
}

// overridesView is the per-key part of a keyed bucket's detail page.
type overridesView struct {
	limitKind
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
	// The new override's preview: its pattern and, once asked for, its
	// simulation (posted to the override form, which shows the bucket's
	// page again at the preview).
	limitPreview
	// Top holds the keys denied most and taking most over TopWindow
	// ("hour" or "day"); TopMessage says why they could not be read.
	Top        usage.TopKeys
	TopWindow  string
	TopMessage string
	// Lookup is the key typed in the key lookup box (or picked from the
	// top keys); Key is its live state, KeyMessage why it is missing.
	Lookup     string
	Key        *manage.KeyState
	KeyMessage string
}

type overrideDeletePage struct {
	layout
	Bucket   string
	Override *buckets.Override
	// Stale is the refusal of a delete confirmed on an older version.
	Stale error
}

// overridesOf reads the overrides table, the top keys and the looked-up
// key of a keyed bucket.
func (s *server) overridesOf(c *gin.Context, b *buckets.Bucket) *overridesView {
	bucket := b.Name
	v := &overridesView{limitKind: limitKindOf(b), Search: rawQuery(c, "oq", buckets.MaxKeyLength), After: queryValue(c, "oafter", 400),
		Form: overrideForm{Match: string(buckets.MatchExact)},
		limitPreview: limitPreview{Pattern: defaultPattern, PreviewAction: overridesPath(bucket) + "#preview",
			Hold: b.Kind.Or() == buckets.KindConcurrency}}
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
	w := usage.Hour
	if c.Query("keys") == "day" {
		w = usage.Day
	}
	v.TopWindow = w.String()
	top, err := s.svc.TopKeys(ctx(c), caller(c), bucket, w, 0)
	switch {
	case errors.Is(err, manage.ErrNoRedis):
		v.TopMessage = "This console is not connected to Redis."
	case err != nil:
		v.TopMessage = "Redis did not answer; the top keys cannot be shown right now."
	default:
		v.Top = top
	}
	if v.Lookup = rawQuery(c, "key", buckets.MaxKeyLength); v.Lookup != "" {
		_, ks, err := s.svc.KeyState(ctx(c), caller(c), bucket, v.Lookup)
		switch {
		case err == nil:
			v.Key = &ks
		case errors.Is(err, manage.ErrNoRedis) || status(err) == http.StatusServiceUnavailable:
			v.Key = &ks
			v.KeyMessage = "Redis did not answer; the key's " + v.stateWord() + " cannot be shown right now."
		case errs.Fields(err) != nil:
			v.KeyMessage = "This key cannot be looked up: " + errs.Fields(err).Error() + "."
		default:
			v.KeyMessage = "This key cannot be looked up right now."
		}
		if v.Key != nil && (v.Key.Override == nil || v.Key.Override.Match != buckets.MatchExact) {
			// "Add an override for this key": the form starts from the key
			// and the limit it gets now.
			v.Form = overrideForm{Match: string(buckets.MatchExact), Key: v.Lookup,
				MaxPermits: strconv.FormatInt(v.Key.MaxPermits, 10)}
			if v.Refills() {
				v.Form.Rate = v.Key.Rate.String()
			}
		}
	}
	return v
}

// overridesPath is where a bucket's new overrides are posted.
func overridesPath(bucket string) string { return "/buckets/" + url.PathEscape(bucket) + "/overrides" }

// Summary is the new override's limit in plain words (see kindSummary).
func (v *overridesView) Summary() string { return v.kindSummary(v.Form.MaxPermits, v.Form.Rate) }

// kindWords are the words the console uses for what a kind of limit
// counts, so that every page says the same.
type kindWords struct {
	// state names what a key holds in Redis.
	state string
	// limitTitle names the column and field of an override's limit.
	limitTitle string
	// takenTitle, takenUnit and takenEmpty word the top keys that took most.
	takenTitle, takenUnit, takenEmpty string
	// calls names what the usage counts, callsTitle in a title.
	calls, callsTitle string
}

// wordsOf holds the kindWords of each kind.
var wordsOf = map[buckets.Kind]kindWords{
	buckets.KindBucket: {state: "tokens", limitTitle: "Capacity", takenTitle: "Taking most", takenUnit: "allowed",
		takenEmpty: "No key took tokens.", calls: "acquires", callsTitle: "Acquires"},
	buckets.KindConcurrency: {state: "slots", limitTitle: "Slots", takenTitle: "Taking most slots", takenUnit: "slot takes",
		takenEmpty: "No key took a slot.", calls: "slot takes", callsTitle: "Slot takes"},
	buckets.KindQuota: {state: "count", limitTitle: "Quota", takenTitle: "Calling most", takenUnit: "calls allowed",
		takenEmpty: "No key was allowed a call.", calls: "calls", callsTitle: "Calls"},
}

// wordsFor is the kindWords of k; an unknown kind is worded as a token
// bucket, as buckets.Kind.Refills takes it.
func wordsFor(k buckets.Kind) kindWords {
	if w, ok := wordsOf[k]; ok {
		return w
	}
	return wordsOf[buckets.KindBucket]
}

// stateWord names what a key holds in Redis, by kind.
func (k limitKind) stateWord() string { return wordsFor(k.Kind).state }

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
		Shadow:      c.PostForm("shadow") == "true",
	}
	p := manage.OverridePatch{Match: &f.Match, Key: &f.Key, Rate: &f.Rate, Description: &f.Description, Shadow: &f.Shadow}
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
	if c.PostForm("preview") != "" {
		s.previewOverride(c, name, form)
		return
	}
	o, err := s.svc.CreateOverride(ctx(c), caller(c), manage.CreateOverride{Bucket: name, Fields: patch})
	if err == nil {
		s.redirect(c, "/buckets/"+url.PathEscape(name)+"?oq="+url.QueryEscape(o.Key)+"#overrides",
			"Override for "+string(o.Match)+" key "+strconv.Quote(o.Key)+" added.")
		return
	}
	s.failForm(c, err, "key", func(st int, v *errs.Validation) {
		s.bucketDetail(c, st, func(ov *overridesView) { ov.Form, ov.Errors, ov.Pattern = form, v, patternOf(c) })
	})
}

// previewOverride answers the new override form's "Preview" button: the
// bucket's page comes back with the form as typed and the simulation of
// its pattern against the override's limit. Nothing is saved; the caller
// must still be allowed to change the bucket.
func (s *server) previewOverride(c *gin.Context, name string, form overrideForm) {
	b, err := s.svc.EditableBucket(ctx(c), caller(c), name)
	if err != nil {
		s.fail(c, err)
		return
	}
	lp, err := s.simulate(c, b.Kind, form.MaxPermits, form.Rate, "")
	st := http.StatusOK
	var v *errs.Validation
	if err != nil {
		if status(err) != http.StatusUnprocessableEntity {
			s.fail(c, err)
			return
		}
		st, v = http.StatusUnprocessableEntity, errs.Fields(err)
	}
	lp.PreviewAction = overridesPath(name) + "#preview"
	s.bucketDetail(c, st, func(ov *overridesView) { ov.Form, ov.Errors, ov.limitPreview = form, v, lp })
}

// editableOverride is overrideFor for a handler: it answers a refusal
// itself, and returns false.
func (s *server) editableOverride(c *gin.Context) (*buckets.Bucket, *buckets.Override, bool) {
	b, o, err := s.overrideFor(c)
	if err != nil {
		s.fail(c, err)
		return nil, nil, false
	}
	return b, o, true
}

// overrideFor reads the {id} of the path and returns the override and its
// bucket if the caller may change it.
func (s *server) overrideFor(c *gin.Context) (*buckets.Bucket, *buckets.Override, error) {
	id, ok := pathID(c)
	if !ok {
		// Checked first, as for any other id: a refusal must not depend on it.
		if _, err := s.svc.EditableBucket(ctx(c), caller(c), c.Param("bucket")); err != nil {
			return nil, nil, err
		}
		return nil, nil, errs.NotFoundf("no such override")
	}
	return s.svc.EditableOverride(ctx(c), caller(c), c.Param("bucket"), id)
}

func (s *server) confirmDeleteOverride(c *gin.Context) {
	_, o, ok := s.editableOverride(c)
	if !ok {
		return
	}
	s.render(c, http.StatusOK, "override_delete", &overrideDeletePage{layout: layout{Title: "Delete override", Nav: "buckets"},
		Bucket: o.Bucket, Override: o})
}

// deleteOverride deletes the version the confirmation page showed.
func (s *server) deleteOverride(c *gin.Context) {
	_, o, ok := s.editableOverride(c)
	if !ok {
		return
	}
	version, err := strconv.ParseInt(c.PostForm("version"), 10, 64)
	if err != nil || version < 1 {
		s.fail(c, errs.Invalid("version", "is missing; open the delete page again"))
		return
	}
	err = s.svc.DeleteOverride(ctx(c), caller(c), manage.DeleteOverride{Bucket: o.Bucket, ID: o.ID, Version: version})
	cur, ok := staleCurrent[*buckets.Override](err)
	switch {
	case err == nil:
		s.redirect(c, "/buckets/"+url.PathEscape(o.Bucket)+"#overrides", "Override for "+strconv.Quote(o.Key)+" deleted.")
	case ok:
		s.render(c, status(err), "override_delete", &overrideDeletePage{layout: layout{Title: "Delete override", Nav: "buckets"},
			Bucket: o.Bucket, Override: cur, Stale: err})
	default:
		s.fail(c, err)
	}
}

// overrideFormPage is the edit page of an override: its limit,
// description and shadow mode (its key and match are fixed).
type overrideFormPage struct {
	layout
	limitKind
	Bucket string
	// Override is the override as stored when the page was built (or, after
	// a conflict, the newer one): its key, match and id.
	Override *buckets.Override
	Form     overrideForm
	// Version is the version the form edits.
	Version int64
	// Stale is the refusal of an edit based on an older version, and
	// Conflict the newer override it ran into.
	Stale    error
	Conflict *buckets.Override
	Errors   *errs.Validation
	limitPreview
}

// Summary is the override's limit in plain words (see kindSummary).
func (p *overrideFormPage) Summary() string { return p.kindSummary(p.Form.MaxPermits, p.Form.Rate) }

func overrideFormOf(o *buckets.Override) overrideForm {
	f := overrideForm{Match: string(o.Match), Key: o.Key, MaxPermits: strconv.FormatInt(o.MaxPermits, 10),
		Description: o.Description, Shadow: o.Shadow}
	if !o.Rate.IsZero() {
		f.Rate = o.Rate.String()
	}
	return f
}

func (s *server) editOverride(c *gin.Context) {
	b, o, ok := s.editableOverride(c)
	if !ok {
		return
	}
	lk := limitKindOf(b)
	s.render(c, http.StatusOK, "override_form", &overrideFormPage{layout: layout{Title: "Edit override", Nav: "buckets"},
		limitKind: lk, Bucket: o.Bucket, Override: o, Form: overrideFormOf(o), Version: o.Version,
		limitPreview: limitPreview{Pattern: defaultPattern, Hold: lk.Slots()}})
}

// updateOverride saves an edit made on the version the form was loaded
// with. If someone saved a newer version meanwhile, nothing is written:
// the form comes back with the user's values, the newer values beside
// them, and the newer version, so that saving again is a deliberate
// choice (as for a bucket).
func (s *server) updateOverride(c *gin.Context) {
	b, o, ok := s.editableOverride(c)
	if !ok {
		return
	}
	lk := limitKindOf(b)
	form := overrideForm{
		Match:       string(o.Match),
		Key:         o.Key,
		MaxPermits:  postValue(c, "max_permits"),
		Rate:        postValue(c, "rate"),
		Description: postValue(c, "description"),
		Shadow:      c.PostForm("shadow") == "true",
	}
	patch := manage.OverridePatch{Rate: &form.Rate, Description: &form.Description, Shadow: &form.Shadow}
	if n, err := buckets.ParseMaxPermits(form.MaxPermits); err != nil {
		patch.Problems.Fields = append(patch.Problems.Fields, errs.Fields(err).Fields...)
	} else {
		patch.MaxPermits = &n
	}
	version, err := strconv.ParseInt(c.PostForm("version"), 10, 64)
	if err != nil || version < 1 {
		version = -1 // a form without its version matches no version
	}
	if c.PostForm("preview") != "" {
		// The form comes back as typed, with the simulation of its
		// pattern against the limit typed; nothing is saved.
		p := &overrideFormPage{layout: layout{Title: "Edit override", Nav: "buckets"}, limitKind: lk, Bucket: o.Bucket, Override: o,
			Form: form, Version: o.Version}
		if version > 0 {
			p.Version = version
		}
		lp, err := s.simulate(c, lk.Kind, form.MaxPermits, form.Rate, "")
		p.limitPreview = lp
		st := http.StatusOK
		if err != nil {
			if status(err) != http.StatusUnprocessableEntity {
				s.fail(c, err)
				return
			}
			st, p.Errors = http.StatusUnprocessableEntity, errs.Fields(err)
		}
		s.render(c, st, "override_form", p)
		return
	}
	ch, err := s.svc.UpdateOverride(ctx(c), caller(c), manage.UpdateOverride{Bucket: o.Bucket, ID: o.ID, Version: version,
		Fields: patch})
	if err == nil {
		msg := "Override for " + strconv.Quote(o.Key) + " saved (version " + strconv.FormatInt(ch.Override.Version, 10) + ")."
		if !ch.Changed {
			msg = "Override for " + strconv.Quote(o.Key) + " has no changes to save."
		}
		s.redirect(c, "/buckets/"+url.PathEscape(o.Bucket)+"?oq="+url.QueryEscape(o.Key)+"#overrides", msg)
		return
	}
	p := &overrideFormPage{layout: layout{Title: "Edit override", Nav: "buckets"}, limitKind: lk, Bucket: o.Bucket, Override: o,
		Form: form, Version: version, limitPreview: limitPreview{Pattern: patternOf(c), Hold: lk.Slots()}}
	switch cur, ok := staleCurrent[*buckets.Override](err); {
	case ok:
		p.Stale, p.Conflict, p.Override, p.Version = err, cur, cur, cur.Version
		s.render(c, status(err), "override_form", p)
	case status(err) == http.StatusUnprocessableEntity:
		p.Errors = errs.Fields(err)
		p.Version = o.Version
		if version > 0 {
			p.Version = version
		}
		s.render(c, http.StatusUnprocessableEntity, "override_form", p)
	default:
		s.fail(c, err)
	}
}

// limitKind words the limits of a keyed bucket's keys by its kind: a
// token bucket's capacity and rate, a concurrency limit's slots, a
// quota's count per period. The bucket's page and an override's edit page
// embed it.
type limitKind struct {
	Kind buckets.Kind
	// SlotMillis is a concurrency limit's slot lease time, QuotaPeriod a
	// quota's period: the bucket's, shared by its overrides.
	SlotMillis  int64
	QuotaPeriod quota.Period
}

func limitKindOf(b *buckets.Bucket) limitKind {
	return limitKind{Kind: b.Kind.Or(), SlotMillis: b.SlotMillis, QuotaPeriod: b.QuotaPeriod}
}

// Refills tells a token bucket, whose limits have a rate.
func (k limitKind) Refills() bool { return k.Kind.Or().Refills() }

// Slots tells a concurrency limit.
func (k limitKind) Slots() bool { return k.Kind == buckets.KindConcurrency }

// Quota tells a quota.
func (k limitKind) Quota() bool { return k.Kind == buckets.KindQuota }

// LimitOf is a key's limit of n (and rate r, for a token bucket) in words:
// "10 tokens, refilled 100 per minute", "20 slots", "10,000 per month".
func (k limitKind) LimitOf(n int64, r buckets.Rate) string {
	switch k.Kind {
	case buckets.KindConcurrency:
		return chart.Count(n) + " slot" + plural(n)
	case buckets.KindQuota:
		return chart.Count(n) + " per " + string(k.QuotaPeriod)
	}
	return strconv.FormatInt(n, 10) + " tokens, refilled " + r.Human()
}

// LimitTitle names the column and field of an override's limit.
func (k limitKind) LimitTitle() string { return wordsFor(k.Kind).limitTitle }

// LimitHint is the hint of the override form's limit field.
func (k limitKind) LimitHint() string {
	switch k.Kind {
	case buckets.KindConcurrency:
		return "Most calls in progress at once for each matching key, 1 to 1000000000; each slot is held at most " +
			slotLeaseText(k.SlotMillis) + " unless renewed, as the bucket says."
	case buckets.KindQuota:
		return "Calls each matching key may make per " + string(k.QuotaPeriod) +
			", 1 to 1000000000; the period and its time zone are the bucket's."
	}
	return "Most tokens each matching key holds, 1 to 1000000000."
}

// TakenTitle, TakenUnit and TakenEmpty word the top keys that took most:
// tokens of a token bucket, slots of a concurrency limit, calls of a quota.
func (k limitKind) TakenTitle() string { return wordsFor(k.Kind).takenTitle }

// TakenUnit: see TakenTitle.
func (k limitKind) TakenUnit() string { return wordsFor(k.Kind).takenUnit }

// TakenEmpty: see TakenTitle.
func (k limitKind) TakenEmpty() string { return wordsFor(k.Kind).takenEmpty }

// kindSummary is an override's limit as typed, in words, for its form
// ("" while it is not a valid one): a token bucket's as limitSummary says
// it, a concurrency limit's slots, a quota's count per period.
func (k limitKind) kindSummary(capacity, rate string) string {
	if k.Refills() {
		return limitSummary(capacity, rate)
	}
	n, err := buckets.ParseMaxPermits(capacity)
	if err != nil {
		return ""
	}
	if k.Slots() {
		return "At most " + chart.Count(n) + " call" + plural(n) + " in progress at once for each matching key"
	}
	return chart.Count(n) + " call" + plural(n) + " per " + string(k.QuotaPeriod) + " for each matching key"
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
