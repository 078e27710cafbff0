package console

import (
	"errors"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/chart"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// bucketsPageSize is how many buckets one page of the list shows.
const bucketsPageSize = 25

// bucketsPage lists the buckets the user can see.
type bucketsPage struct {
	layout
	appFilter
	Rows      []bucketRow
	Search    string
	Order     string
	Denied    bool
	NearLimit bool
	After     string
	Next      string
	Prev      string
	// Ranked says how a ranked list is ordered, in words ("" by name).
	Ranked   string
	From, To int
	Total    int64
	// TotalMore: a ranked list counts no further than Total.
	TotalMore bool
	CanCreate bool
	// LiveSrc is the list state endpoint of this page's buckets.
	LiveSrc string
	Message string
}

// Link is this list's address with its filters, and a cursor when key
// ("after" or "before") is not empty.
func (p *bucketsPage) Link(key, cursor string) string {
	v := url.Values{}
	for k, val := range map[string]string{"q": p.Search, "app": p.App, "sort": p.Order} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if p.Denied {
		v.Set("denied", "1")
	}
	if p.NearLimit {
		v.Set("near", "1")
	}
	if key != "" && cursor != "" {
		v.Set(key, cursor)
	}
	if len(v) == 0 {
		return "/buckets"
	}
	return "/buckets?" + v.Encode()
}

// bucketRow is one bucket of the list with its state.
type bucketRow struct {
	*buckets.Bucket
	Live      bool
	Tokens    int64
	Capacity  int64
	Gauge     template.HTML
	Share     string
	Denied    int64
	Sparkline template.HTML
	HasRecent bool
	// NearLimit: the bucket ran near its limit in the last hour; Near is
	// how many acquires found it so.
	NearLimit bool
	Near      int64
}

// bucketForm holds a bucket as the form shows and sends it: text, exactly
// as typed, so that an invalid value comes back for correction.
type bucketForm struct {
	Name        string
	OwnerApp    string
	Kind        string
	Description string
	MaxPermits  string
	Rate        string
	AllowedApps string
	Keyed       bool
	Shadow      bool
	LeaseMillis string
	// SlotLease is a concurrency limit's slot lease time as typed ("30s",
	// "1500ms", or milliseconds alone).
	SlotLease string
	// QuotaPeriod and TimeZone are a quota's; ignored for other kinds.
	QuotaPeriod string
	TimeZone    string
	Reserve     string
	Version     int64
}

type bucketFormPage struct {
	layout
	New  bool
	Form bucketForm
	limitPreview
	Errors    *errs.Validation
	OwnerApps []string
	Kinds     []kindChoice
	// Periods are the choices of a quota's period select.
	Periods []kindChoice
	// AppChoices are the apps to pick allowed apps from; OtherApps the
	// allowed apps that are not among them, as text.
	AppChoices []appChoice
	OtherApps  string
	// MoreApps says there are apps beyond AppChoices, to be typed.
	MoreApps bool
	// Stale is the refusal of an edit based on an older version, and
	// Conflict the newer bucket it ran into.
	Stale    error
	Conflict *buckets.Bucket
}

// kindChoice is an option of the form's kind select.
type kindChoice struct{ Value, Label string }

// kindChoices are the kinds a new bucket can have, as the form offers them.
var kindChoices = []kindChoice{
	{string(buckets.KindBucket), "Token bucket (a rate, with bursts up to the capacity)"},
	{string(buckets.KindConcurrency), "Concurrency (at most N calls in progress)"},
	{string(buckets.KindQuota), "Quota (N calls per hour, day, week or month)"},
}

// patternForm is the traffic pattern of a limit's preview.
type patternForm struct {
	Steady, Burst, Every, Duration string
	// Hold is how long each call lasts, in seconds: the calls a
	// concurrency limit's preview holds its slots for.
	Hold string
}

// defaultPattern is what the preview tries until the user says otherwise.
var defaultPattern = patternForm{Steady: "2", Burst: "20", Every: "15", Duration: "60", Hold: "1"}

// limitPreview is the "Try it before saving" part of a form that sets a
// limit (a bucket's, an override's): the pattern typed and, once asked
// for, its simulation against the form's limit. The "limitpreview"
// template draws it.
type limitPreview struct {
	// Pattern is the traffic pattern of the preview, as typed.
	Pattern patternForm
	// Preview is the drawn simulation of Pattern; PreviewText says its
	// totals in words.
	Preview     template.HTML
	PreviewText string
	// PreviewAction is where the preview button posts the form, "" for
	// the form's own action.
	PreviewAction string
	// Hold shows how long each call lasts: only a concurrency limit's
	// calls take time, and a new limit may become one.
	Hold bool
}

// QuotaSummary is a quota's limit and reset in words ("" while the form
// does not hold a valid quota); the script keeps it current.
func (p *bucketFormPage) QuotaSummary() string {
	n, err := buckets.ParseMaxPermits(p.Form.MaxPermits)
	if err != nil {
		return ""
	}
	if q := buckets.QuotaSummary(n, quota.Period(p.Form.QuotaPeriod), p.Form.TimeZone); q != "" {
		return q + "."
	}
	return ""
}

// IsQuota tells the form to show a quota's fields instead of the rate's.
func (p *bucketFormPage) IsQuota() bool { return p.Form.Kind == string(buckets.KindQuota) }

// periodChoices are a quota's periods, as the form offers them.
var periodChoices = []kindChoice{
	{string(quota.Hour), "Hour (from minute 0)"},
	{string(quota.Day), "Day (from 00:00)"},
	{string(quota.Week), "Week (from Monday 00:00)"},
	{string(quota.Month), "Month (from the 1st, 00:00)"},
}

// ReserveSummary is what the form's reserve does in plain words ("" while
// the form holds none, or no valid one).
func (p *bucketFormPage) ReserveSummary() string {
	n, err1 := buckets.ParseMaxPermits(p.Form.MaxPermits)
	r, err2 := buckets.ParseReserve(p.Form.Reserve)
	if err1 != nil || err2 != nil {
		return ""
	}
	return buckets.ReserveSummary(n, r)
}

// patternField is one input of the preview's pattern.
type patternField struct{ ID, Label, Value string }

// PatternFields lists the pattern's inputs in form order.
func (p *limitPreview) PatternFields() []patternField {
	fields := []patternField{{"steady", "Steady, per second", p.Pattern.Steady}, {"burst", "Burst of", p.Pattern.Burst},
		{"every", "every (seconds)", p.Pattern.Every}, {"duration", "for (seconds)", p.Pattern.Duration}}
	if p.Hold {
		fields = append(fields, patternField{"hold", "each lasting (seconds; concurrency)", p.Pattern.Hold})
	}
	return fields
}

// limitSummary is a limit in plain words, as the server says it ("" while
// the form does not hold a valid limit); the script keeps it current as
// the user types.
func limitSummary(capacity, rate string) string {
	n, err1 := buckets.ParseMaxPermits(capacity)
	r, err2 := buckets.ParseRate(rate)
	if err1 != nil || err2 != nil {
		return ""
	}
	return buckets.Summary(n, r)
}

// Summary is the form's limit in plain words (see limitSummary); a
// quota's is QuotaSummary.
func (p *bucketFormPage) Summary() string {
	if p.IsQuota() {
		return ""
	}
	return limitSummary(p.Form.MaxPermits, p.Form.Rate)
}

// simulate draws the preview of the posted pattern against a limit of
// capacity and rate as typed. Invalid input is an error matching
// errs.ErrInvalid, naming the fields, for the form to show.
func (s *server) simulate(c *gin.Context, kind buckets.Kind, capacity, rate, reserve string) (limitPreview, error) {
	p := limitPreview{Pattern: patternOf(c), Hold: kind.Or() == buckets.KindConcurrency}
	pv, err := s.svc.PreviewLimit(manage.PreviewLimit{Kind: string(kind.Or()), Capacity: capacity, Rate: rate, Reserve: reserve,
		Steady: p.Pattern.Steady, Burst: p.Pattern.Burst, Every: p.Pattern.Every, Duration: p.Pattern.Duration,
		Hold: p.Pattern.Hold})
	if err != nil {
		return p, err
	}
	sim := pv.Simulation
	p.Preview = chart.Preview(sim, pv.Rate, "")
	p.PreviewText = chart.Count(sim.TotalAllowed) + " allowed, " + chart.Count(sim.TotalDenied) + " denied (" +
		chart.Share(sim.TotalAllowed, sim.TotalDenied) + ")."
	if p.Hold {
		p.PreviewText = pv.Summary + " " + p.PreviewText
	}
	if pv.Reserve > 0 {
		p.PreviewText += " These requests are not marked critical: they leave the reserve of " + chart.Count(pv.Reserve) +
			" tokens, which only critical requests may take."
	}
	return p, nil
}

// previewBucket answers the form's "Preview" button: the form comes back
// as typed, with the simulation of the pattern against its limit drawn.
// Nothing is saved; the caller must still be allowed to create or edit.
func (s *server) previewBucket(c *gin.Context, name string) {
	p := &bucketFormPage{layout: layout{Title: "New bucket", Nav: "buckets"}, New: name == ""}
	var owner, kind string
	if p.New {
		owned, err := s.svc.BucketDraft(ctx(c), caller(c))
		if err != nil {
			s.fail(c, err)
			return
		}
		p.OwnerApps = owned
	} else {
		b, err := s.svc.EditableBucket(ctx(c), caller(c), name)
		if err != nil {
			s.fail(c, err)
			return
		}
		p.Title, owner, kind = "Edit "+b.Name, b.OwnerApp, string(b.Kind.Or())
	}
	p.Form, _ = readBucketForm(c, !p.New)
	if !p.New {
		p.Form.Name, p.Form.OwnerApp = name, owner
	}
	if !p.New {
		p.Form.Kind = kind
	}
	lp, err := s.simulate(c, buckets.Kind(p.Form.Kind), p.Form.MaxPermits, p.Form.Rate, p.Form.Reserve)
	p.limitPreview = lp
	if err != nil {
		if status(err) != http.StatusUnprocessableEntity {
			s.fail(c, err)
			return
		}
		p.Errors = errs.Fields(err)
		s.renderBucketForm(c, http.StatusUnprocessableEntity, p)
		return
	}
	s.renderBucketForm(c, http.StatusOK, p)
}

// patternOf reads the preview's pattern back from a posted form.
func patternOf(c *gin.Context) patternForm {
	p := patternForm{Steady: postValue(c, "steady"), Burst: postValue(c, "burst"),
		Every: postValue(c, "every"), Duration: postValue(c, "duration"), Hold: postValue(c, "hold")}
	if p == (patternForm{}) {
		return defaultPattern
	}
	return p
}

// liveState is what Redis holds about a bucket, for the detail page.
type liveState struct {
	// Status is "in-sync", "pending", "missing" or "unavailable".
	Status string
	// Exists is true when there is one token count to show; a keyed
	// bucket's state is per key (PerKey) instead.
	Exists bool
	PerKey bool
	// Groups and GroupsInSync, of a keyed bucket: its key groups, and how
	// many of them hold the MySQL version.
	Groups       int
	GroupsInSync int
	Tokens       float64
	// Whole is Tokens rounded down: a fraction of a token cannot be taken.
	Whole    int64
	Gauge    template.HTML
	Capacity int64
	// Reserve is the tokens kept for critical requests, ReserveLeft how
	// many of them are there.
	Reserve     int64
	ReserveLeft int64
	Refilled    time.Time
	Version     int64
	Now         time.Time
	Message     string
	// Slots tells a concurrency limit's state: Whole are its free slots,
	// InUse the held ones, the first of which expires at NextExpiry.
	Slots      bool
	InUse      int64
	NextExpiry time.Time
	// Quota is set for a plain quota: Used is its count this period, of
	// Capacity, and Reset when the period ends (zero: Redis's clock is
	// outside its table, and the quota answers as an unknown bucket).
	Quota bool
	Used  int64
	Reset time.Time
}

type bucketPage struct {
	layout
	Bucket  *buckets.Bucket
	CanEdit bool
	// Role is the caller's role on the owner app ("" for none), for the
	// read-only hint of those who cannot edit.
	Role  string
	Live  liveState
	Usage usageView
	// Overrides is the per-key part of a keyed bucket's page, else nil.
	Overrides *overridesView
}

type bucketDeletePage struct {
	layout
	Bucket *buckets.Bucket
	// Stale is the refusal of a delete confirmed on an older version.
	Stale error
}

func (s *server) listBuckets(c *gin.Context) {
	filter, err := s.appFilterOf(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	// A cursor is a name, or a count and a name in a ranked list.
	q := manage.BucketListQuery{
		BucketQuery: manage.BucketQuery{Search: queryValue(c, "q", 100), App: filter.App,
			After: queryValue(c, "after", 100), Before: queryValue(c, "before", 100), Limit: bucketsPageSize},
		Order: manage.ParseBucketOrder(c.Query("sort")), Denied: c.Query("denied") != "", NearLimit: c.Query("near") != "",
	}
	list, err := s.svc.ListBucketStates(ctx(c), caller(c), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	owned, err := s.svc.OwnedApps(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	p := &bucketsPage{layout: layout{Title: "Buckets", Nav: "buckets"}, appFilter: filter,
		Search: q.Search, Order: string(q.Order), Denied: q.Denied, NearLimit: q.NearLimit,
		After: q.After, Next: list.Next, Prev: list.Prev, Total: int64(list.Total), TotalMore: list.TotalMore, CanCreate: len(owned) > 0}
	switch list.Rank {
	case buckets.RankDenied:
		p.Ranked = "Most denials in the last hour first."
	case buckets.RankNearLimit:
		p.Ranked = "Most acquires near the limit in the last hour first."
	}
	p.From = list.Offset + 1
	var live []string
	for _, r := range list.Rows {
		row := bucketRow{Bucket: r.Bucket}
		// A concurrency limit counts slots, which the list does not read
		// (its page does): no token count to show.
		if r.LiveOK && r.Live.Exists && r.Bucket.Kind != buckets.KindConcurrency {
			row.Live, row.Capacity = true, r.Live.Config.Capacity
			row.Tokens = int64(math.Floor(r.Live.Tokens))
			row.Gauge = chart.Gauge(r.Live.Tokens, r.Live.Config.Capacity)
		}
		if r.RecentOK {
			row.HasRecent = true
			row.Denied = r.Recent.TotalDenied
			row.Share = chart.Share(r.Recent.TotalAllowed, r.Recent.TotalDenied)
			row.Sparkline = chart.Sparkline(r.Recent.Allowed, r.Recent.Denied, r.Recent.WouldDeny)
			row.NearLimit, row.Near = r.Recent.NearLimit(), r.Recent.TotalNear
		}
		p.Rows = append(p.Rows, row)
		live = append(live, r.Name)
	}
	p.To = p.From + len(p.Rows) - 1
	if len(live) > 0 {
		p.LiveSrc = "/live/buckets.json?names=" + url.QueryEscape(strings.Join(live, ","))
	}
	switch {
	case errors.Is(list.LiveErr, manage.ErrNoRedis):
		p.Message = "This console is not connected to Redis, so fill levels cannot be shown."
	case list.LiveErr != nil:
		p.Message = "Redis did not answer; fill levels cannot be shown right now."
	case list.RecentErr != nil:
		p.Message = "Usage of the last hour cannot be read right now."
	}
	s.render(c, http.StatusOK, "buckets", p)
}

func (s *server) newBucket(c *gin.Context) {
	owned, err := s.svc.BucketDraft(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	// The owner app starts empty unless the link named one: a bucket put
	// under the first app by default is a mistake waiting to happen.
	form := bucketForm{OwnerApp: queryValue(c, "app", 63)}
	if !slices.Contains(owned, form.OwnerApp) {
		form.OwnerApp = ""
	}
	s.renderBucketForm(c, http.StatusOK, &bucketFormPage{layout: layout{Title: "New bucket", Nav: "buckets"},
		New: true, Form: form, OwnerApps: owned, limitPreview: limitPreview{Pattern: defaultPattern}})
}

// readBucketForm parses the posted form into the text it shows back and
// the patch the service applies. A capacity that is not even a number is
// passed on as a problem, to be reported with the rest. An edit takes the
// name and the owner app from the bucket being edited, not from the form.
func readBucketForm(c *gin.Context, editing bool) (bucketForm, manage.BucketPatch) {
	f := bucketForm{
		Name:        postValue(c, "name"),
		OwnerApp:    postValue(c, "owner_app"),
		Kind:        postValue(c, "kind"),
		Description: postValue(c, "description"),
		MaxPermits:  postValue(c, "max_permits"),
		Rate:        postValue(c, "rate"),
		AllowedApps: allowedAppsOf(c),
		Keyed:       c.PostForm("keyed") == "true",
		Shadow:      c.PostForm("shadow") == "true",
		LeaseMillis: postValue(c, "lease_ms"),
		SlotLease:   postValue(c, "slot_ms"),
		QuotaPeriod: postValue(c, "quota_period"),
		TimeZone:    postValue(c, "time_zone"),
		Reserve:     postValue(c, "reserve"),
	}
	f.Version, _ = strconv.ParseInt(c.PostForm("version"), 10, 64)
	allowed := splitApps(f.AllowedApps)
	p := manage.BucketPatch{Description: &f.Description, Rate: &f.Rate, AllowedApps: &allowed, Shadow: &f.Shadow}
	if f.Kind == string(buckets.KindQuota) {
		// The form hides the rate of a quota and shows its calendar; a
		// rate typed before the kind was chosen is ignored, not refused.
		none := ""
		p.Rate, f.Rate = &none, ""
		p.QuotaPeriod, p.TimeZone = &f.QuotaPeriod, &f.TimeZone
	} else {
		f.QuotaPeriod, f.TimeZone = "", ""
	}
	if !editing {
		// Kind and keyed are fixed at creation: the edit form shows them but does not send them.
		p.Name, p.OwnerApp, p.Kind, p.Keyed = &f.Name, &f.OwnerApp, &f.Kind, &f.Keyed
	}
	if n, err := buckets.ParseMaxPermits(f.MaxPermits); err != nil {
		p.Problems.Fields = append(p.Problems.Fields, errs.Fields(err).Fields...)
	} else {
		p.MaxPermits = &n
	}
	if n, ok := parseLease(f.LeaseMillis); !ok {
		p.Problems.Add("lease_ms", buckets.LeaseRule)
	} else {
		p.LeaseMillis = &n
	}
	if n, ok := parseSlotLease(f.SlotLease); !ok {
		p.Problems.Add("slot_ms", slotLeaseRule)
	} else {
		p.SlotMillis = &n
	}
	if n, err := buckets.ParseReserve(f.Reserve); err != nil {
		p.Problems.Fields = append(p.Problems.Fields, errs.Fields(err).Fields...)
	} else {
		p.Reserve = &n
	}
	return f, p
}

// slotLeaseRule is what the form's slot lease time must be, in words.
var slotLeaseRule = "must be a duration from 10ms to 24h, like “30s”, “2m” or “1500ms” (a number alone is milliseconds)"

// parseSlotLease reads the slot lease time field in milliseconds: a
// duration ("30s", "1m30s", "1500ms") or milliseconds alone; empty is 0
// (no slot lease time: every kind but concurrency). Its range is checked
// by the bucket's validation; a fraction of a millisecond is not a value.
func parseSlotLease(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, true
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	d, err := time.ParseDuration(strings.ReplaceAll(s, " ", ""))
	if err != nil || d%time.Millisecond != 0 || d < 0 {
		return 0, false
	}
	return d.Milliseconds(), true
}

// slotLeaseText shows a slot lease time as the form reads it back: "30s",
// "1m30s", "1.5s".
func slotLeaseText(ms int64) string {
	if ms == 0 {
		return ""
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// parseLease reads the lease time field: empty is 0 (off). Its range is
// checked by the bucket's validation.
func parseLease(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// splitApps reads a list of app names separated by commas or white space.
func splitApps(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

func (s *server) createBucket(c *gin.Context) {
	if c.PostForm("preview") != "" {
		s.previewBucket(c, "")
		return
	}
	form, patch := readBucketForm(c, false)
	b, err := s.svc.CreateBucket(ctx(c), caller(c), manage.CreateBucket{Fields: patch})
	if err == nil {
		s.redirect(c, "/buckets/"+url.PathEscape(b.Name), "Bucket "+b.Name+" created.")
		return
	}
	s.failForm(c, err, "name", func(st int, v *errs.Validation) {
		owned, err := s.svc.OwnedApps(ctx(c), caller(c))
		if err != nil {
			s.fail(c, err)
			return
		}
		s.renderBucketForm(c, st, &bucketFormPage{layout: layout{Title: "New bucket", Nav: "buckets"},
			New: true, Form: form, Errors: v, OwnerApps: owned, limitPreview: limitPreview{Pattern: patternOf(c)}})
	})
}

func (s *server) showBucket(c *gin.Context) { s.bucketDetail(c, http.StatusOK, nil) }

// bucketDetail renders the detail page of the bucket in the path; adjust,
// when given, changes the overrides part of a keyed bucket (a refused
// override form shown again).
func (s *server) bucketDetail(c *gin.Context, st int, adjust func(*overridesView)) {
	d, err := s.svc.BucketDetail(ctx(c), caller(c), c.Param("bucket"), requestedWindow(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	p := &bucketPage{layout: layout{Title: d.Name, Nav: "buckets"}, Bucket: d.Bucket,
		CanEdit: d.CanEdit, Role: string(s.svc.Roles(caller(c))[d.OwnerApp]), Live: liveOf(d), Usage: usageOf(d)}
	if d.Keyed {
		p.Overrides = s.overridesOf(c, d.Bucket)
		if adjust != nil {
			adjust(p.Overrides)
		}
	}
	s.render(c, st, "bucket", p)
}

// liveOf words the live state for the detail page.
func liveOf(d *manage.BucketDetail) liveState {
	switch {
	case errors.Is(d.LiveErr, manage.ErrNoRedis):
		return liveState{Status: "unavailable", Message: "This console is not connected to Redis."}
	case d.LiveErr != nil:
		return liveState{Status: "unavailable", Message: "Redis did not answer; the live state cannot be shown right now."}
	case d.Live.Keyed && d.Live.InRedis:
		l := liveState{Status: "pending", PerKey: true, Capacity: d.Live.Config.Capacity, Version: d.Live.Config.Version,
			Now: d.Live.RedisTime, Groups: d.Live.Groups, GroupsInSync: d.Live.GroupsInSync}
		if d.Live.Sync == manage.InSync {
			l.Status = "in-sync"
		}
		return l
	case !d.Live.InRedis:
		return liveState{Status: "missing", Now: d.Live.RedisTime,
			Message: "Redis has no config for this bucket yet. The sync worker writes it within a second of a change; if this persists, check that the sync worker is running."}
	}
	l := liveState{Status: "pending", Exists: true, Tokens: d.Live.Tokens, Capacity: d.Live.Config.Capacity,
		Refilled: d.Live.Refilled, Version: d.Live.Config.Version, Now: d.Live.RedisTime, Reserve: d.Live.Config.Reserve,
		ReserveLeft: d.Live.Config.ReserveLeft(d.Live.Tokens)}
	if d.Live.Config.Kind == redisscript.KindQuota {
		l.Quota, l.Used, l.Reset = true, d.Live.Used, d.Live.PeriodEnd
	}
	l.Whole = int64(math.Floor(d.Live.Tokens))
	l.Gauge = chart.Gauge(d.Live.Tokens, d.Live.Config.Capacity)
	if d.Live.Slots {
		l.Slots, l.InUse, l.NextExpiry = true, d.Live.InUse, d.Live.NextExpiry
		l.Gauge = chart.SlotGauge(l.Whole, d.Live.Config.Capacity)
	}
	if d.Live.Sync == manage.InSync {
		l.Status = "in-sync"
	}
	return l
}

func formOf(b *buckets.Bucket) bucketForm {
	return bucketForm{Name: b.Name, OwnerApp: b.OwnerApp, Kind: string(b.Kind.Or()), Description: b.Description,
		MaxPermits: strconv.FormatInt(b.MaxPermits, 10), Rate: b.Rate.Human(),
		AllowedApps: strings.Join(b.AllowedApps, ", "), Keyed: b.Keyed, Shadow: b.Shadow,
		LeaseMillis: strconv.FormatInt(b.LeaseMillis, 10), SlotLease: slotLeaseText(b.SlotMillis), QuotaPeriod: string(b.QuotaPeriod),
		TimeZone: b.TimeZone, Reserve: strconv.FormatInt(b.Reserve, 10), Version: b.Version}
}

func (s *server) editBucket(c *gin.Context) {
	b, err := s.svc.EditableBucket(ctx(c), caller(c), c.Param("bucket"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.renderBucketForm(c, http.StatusOK, &bucketFormPage{layout: layout{Title: "Edit " + b.Name, Nav: "buckets"},
		Form: formOf(b), limitPreview: limitPreview{Pattern: defaultPattern}})
}

// updateBucket saves an edit made on the version the form was loaded
// with. If someone saved a newer version meanwhile, nothing is written:
// the form comes back with the user's values, the newer values beside
// them, and the newer version, so that saving again is a deliberate choice.
func (s *server) updateBucket(c *gin.Context) {
	name := c.Param("bucket")
	if c.PostForm("preview") != "" {
		s.previewBucket(c, name)
		return
	}
	form, patch := readBucketForm(c, true)
	form.Name = name
	version := form.Version
	if version < 1 {
		version = -1 // a form without its version matches no version
	}
	ch, err := s.svc.UpdateBucket(ctx(c), caller(c), manage.UpdateBucket{Name: name, Version: version, Fields: patch})
	if err == nil {
		msg := "Bucket " + name + " saved (version " + strconv.FormatInt(ch.Bucket.Version, 10) + ")."
		if !ch.Changed {
			msg = "Bucket " + name + " has no changes to save."
		}
		s.redirect(c, "/buckets/"+url.PathEscape(name), msg)
		return
	}
	p := &bucketFormPage{layout: layout{Title: "Edit " + name, Nav: "buckets"}, Form: form, limitPreview: limitPreview{Pattern: patternOf(c)}}
	switch cur, ok := staleCurrent[*buckets.Bucket](err); {
	case ok:
		p.Form.OwnerApp = cur.OwnerApp
		p.Stale, p.Conflict = err, cur
		p.Form.Version = cur.Version
		s.renderBucketForm(c, status(err), p)
	case status(err) == http.StatusUnprocessableEntity:
		p.Errors = errs.Fields(err)
		s.renderBucketForm(c, http.StatusUnprocessableEntity, p)
	default:
		s.fail(c, err)
	}
}

func (s *server) confirmDeleteBucket(c *gin.Context) {
	b, err := s.svc.EditableBucket(ctx(c), caller(c), c.Param("bucket"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.render(c, http.StatusOK, "bucket_delete", &bucketDeletePage{layout: layout{Title: "Delete " + b.Name, Nav: "buckets"}, Bucket: b})
}

// deleteBucket deletes the version the confirmation page showed; a bucket
// changed since is not deleted, and the page comes back with the newer
// values.
func (s *server) deleteBucket(c *gin.Context) {
	name := c.Param("bucket")
	version, err := strconv.ParseInt(c.PostForm("version"), 10, 64)
	if err != nil || version < 1 {
		// Still checked first: a refusal must not depend on the form.
		if _, err := s.svc.EditableBucket(ctx(c), caller(c), name); err != nil {
			s.fail(c, err)
			return
		}
		s.fail(c, errs.Invalid("version", "is missing; open the delete page again"))
		return
	}
	err = s.svc.DeleteBucket(ctx(c), caller(c), manage.DeleteBucket{Name: name, Version: version})
	cur, ok := staleCurrent[*buckets.Bucket](err)
	switch {
	case err == nil:
		s.redirect(c, "/buckets", "Bucket "+name+" deleted.")
	case ok:
		s.render(c, status(err), "bucket_delete", &bucketDeletePage{layout: layout{Title: "Delete " + name, Nav: "buckets"},
			Bucket: cur, Stale: err})
	default:
		s.fail(c, err)
	}
}

// bucketState is the live state of one bucket as web/static/app.js reads
// it (docs/console.md, "Live state").
type bucketState struct {
	Name     string  `json:"name"`
	Exists   bool    `json:"exists"`
	Keyed    bool    `json:"keyed,omitempty"`
	Tokens   float64 `json:"tokens"`
	Capacity int64   `json:"capacity"`
	// Reserve is the tokens kept for critical requests (0: none).
	Reserve int64 `json:"reserve"`
	// Refilled is when an acquire last refilled the bucket (absent:
	// never), Now the Redis clock at the read, both RFC 3339 in UTC, so
	// that every live figure of a page updates together.
	Refilled string `json:"refilled,omitempty"`
	Now      string `json:"now,omitempty"`
	// A concurrency limit: Tokens are its free slots, InUse the held
	// ones, the first of which expires at NextExpiry (absent: none held).
	InUse      *int64 `json:"in_use,omitempty"`
	NextExpiry string `json:"next_expiry,omitempty"`
	// A plain quota: Used is its count this period (Tokens are 0),
	// Reset when the period ends (absent: Redis's clock is outside its
	// table of periods).
	Used  *int64 `json:"used,omitempty"`
	Reset string `json:"reset,omitempty"`
}

func stateOf(name string, st redisscript.State) bucketState {
	out := bucketState{Name: name, Exists: st.Exists}
	if st.Exists {
		out.Tokens, out.Capacity, out.Reserve = st.Tokens, st.Config.Capacity, st.Config.Reserve
	}
	return out
}

// bucketStateJSON answers the live state of one bucket, visible as its page.
func (s *server) bucketStateJSON(c *gin.Context) {
	b, st, err := s.svc.BucketState(ctx(c), caller(c), c.Param("bucket"))
	if err != nil {
		s.fail(c, err)
		return
	}
	out := bucketState{Name: b.Name, Exists: st.InRedis && !st.Keyed, Keyed: st.Keyed}
	if st.InRedis {
		out.Tokens, out.Capacity, out.Reserve = st.Tokens, st.Config.Capacity, st.Config.Reserve
	}
	if !st.Refilled.IsZero() {
		out.Refilled = st.Refilled.UTC().Format(time.RFC3339Nano)
	}
	if !st.RedisTime.IsZero() {
		out.Now = st.RedisTime.UTC().Format(time.RFC3339Nano)
	}
	if st.Slots {
		out.InUse = &st.InUse
		if !st.NextExpiry.IsZero() {
			out.NextExpiry = st.NextExpiry.UTC().Format(time.RFC3339Nano)
		}
	}
	if out.Exists && st.Config.Kind == redisscript.KindQuota {
		out.Used = &st.Used
		if !st.PeriodEnd.IsZero() {
			out.Reset = st.PeriodEnd.UTC().Format(time.RFC3339Nano)
		}
	}
	c.JSON(http.StatusOK, out)
}

// bucketStatesJSON answers the live state of the buckets named in
// ?names=a,b (a page of the list) that the user may see.
func (s *server) bucketStatesJSON(c *gin.Context) {
	names := strings.Split(queryValue(c, "names", 8000), ",")
	bs, st, err := s.svc.BucketStates(ctx(c), caller(c), names)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := struct {
		Buckets []bucketState `json:"buckets"`
	}{Buckets: []bucketState{}}
	for _, b := range bs {
		bs := stateOf(b.Name, st[b.Name])
		bs.Keyed = b.Keyed
		out.Buckets = append(out.Buckets, bs)
	}
	c.JSON(http.StatusOK, out)
}

// QuotaText is a quota's limit and reset in words, for the bucket page.
func (p *bucketPage) QuotaText() string {
	b := p.Bucket
	return buckets.QuotaSummary(b.MaxPermits, b.QuotaPeriod, b.TimeZone)
}
