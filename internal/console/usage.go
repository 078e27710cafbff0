package console

import (
	"errors"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/chart"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/usage"
)

// topDeniedLimit is how many buckets the overview lists.
const topDeniedLimit = 25

// windowLink is one choice of the time window switch.
type windowLink struct {
	Key     string // the query value: "hour", "day" or "week"
	Label   string
	Current bool
}

// usageView is the usage section of a bucket's page.
type usageView struct {
	Window  string
	Windows []windowLink
	// Chart is the SVG drawing, escaped by package chart.
	Chart  template.HTML
	Series usage.Series
	// ShowWouldDeny adds the would-deny counts (shadow mode) beside the
	// others: the bucket is in shadow mode or was in the window.
	ShowWouldDeny bool
	// ShowFallback adds the calls the clients' failure policy answered
	// (granted and refused) while Redis did not: there were some.
	ShowFallback bool
	// Message replaces the chart when the counts cannot be read.
	Message string
	// Calls names what is counted, Calls in a title: "acquires", "slot
	// takes" for a concurrency limit, "calls" for a quota.
	Calls, CallsTitle string
}

// windowLinks lists the windows with cur marked.
func windowLinks(cur usage.Window) []windowLink {
	labels := map[usage.Window]string{usage.Hour: "Last hour", usage.Day: "Last day", usage.Week: "Last week"}
	var out []windowLink
	for _, w := range []usage.Window{usage.Hour, usage.Day, usage.Week} {
		out = append(out, windowLink{Key: w.String(), Label: labels[w], Current: w == cur})
	}
	return out
}

// requestedWindow is the window a bucket page asks for with
// ?window=hour|day|week; anything else shows the last hour, as a view
// switch is not worth an error page.
func requestedWindow(c *gin.Context) usage.Window {
	w, err := usage.ParseWindow(c.Query("window"))
	if err != nil {
		return usage.Hour
	}
	return w
}

// usageOf draws the usage part of a bucket's detail.
func usageOf(d *manage.BucketDetail) usageView {
	w := d.Window
	words := wordsFor(d.Kind)
	v := usageView{Window: w.String(), Windows: windowLinks(w), Calls: words.calls, CallsTitle: words.callsTitle}
	switch {
	case errors.Is(d.UsageErr, manage.ErrNoRedis):
		v.Message = "This console is not connected to Redis, so usage cannot be shown."
	case d.UsageErr != nil:
		v.Message = "Redis did not answer; usage cannot be shown right now."
	default:
		v.Series = d.Usage
		unit := stepUnit(d.Usage.Step)
		limit := chart.Sustained(d.Rate.PerSecond(), d.Usage.Step)
		label := "limit: " + chart.Count(int64(math.Round(limit))) + " per " + unit
		if d.Keyed {
			// Every key has this limit: the bars add up all keys.
			label = "limit per key: " + chart.Count(int64(math.Round(limit))) + " per " + unit
		}
		if limit < 1 {
			label = "limit: " + d.Rate.Human()
		}
		if !d.Kind.Or().Refills() {
			// A concurrency limit or a quota bounds no calls per minute.
			limit, label = 0, ""
		}
		v.Chart = chart.UsageResponsive(d.Usage, chart.Options{Title: v.CallsTitle + " per " + unit + ", last " + w.String(),
			Limit: limit, LimitLabel: label, Unit: "per " + unit, Shadow: d.Shadow, Calls: v.Calls})
		v.ShowWouldDeny = d.Shadow || d.Usage.WouldDeny > 0
		v.ShowFallback = d.Usage.Fallbacks() > 0
	}
	return v
}

// topRow is one bucket of the overview.
type topRow struct {
	Bucket  *buckets.Bucket
	Allowed int64
	Denied  int64
	// WouldDeny counts the acquires a bucket in shadow mode would have
	// denied (a part of Allowed).
	WouldDeny int64
	Requests  int64
	// Sparkline draws the last hour, per minute.
	Sparkline template.HTML
}

// usagePage is the overview: the buckets that denied the most lately.
type usagePage struct {
	layout
	Rows []topRow
	// Buckets is how many buckets the user can see, all of them read.
	Buckets int
	Message string
}

// usageOverview lists the buckets the user can see that denied the most
// acquires in the last hour.
func (s *server) usageOverview(c *gin.Context) {
	ov, err := s.svc.TopDenied(ctx(c), caller(c), topDeniedLimit)
	if err != nil {
		s.fail(c, err)
		return
	}
	p := &usagePage{layout: layout{Title: "Usage", Nav: "usage"}, Buckets: ov.Buckets}
	for _, r := range ov.Rows {
		p.Rows = append(p.Rows, topRow{Bucket: r.Bucket, Allowed: r.Allowed, Denied: r.Denied, Requests: r.Allowed + r.Denied,
			WouldDeny: r.Recent.TotalWouldDeny,
			Sparkline: chart.Sparkline(r.Recent.Allowed, r.Recent.Denied, r.Recent.WouldDeny)})
	}
	s.render(c, http.StatusOK, "usage", p)
}

// stepUnit names the span of one point of a usage chart: "minute",
// "hour", "2 hours".
func stepUnit(step time.Duration) string {
	switch {
	case step == time.Minute:
		return "minute"
	case step == time.Hour:
		return "hour"
	case step%time.Hour == 0:
		return strconv.Itoa(int(step/time.Hour)) + " hours"
	case step%time.Minute == 0:
		return strconv.Itoa(int(step/time.Minute)) + " minutes"
	}
	return step.String()
}
