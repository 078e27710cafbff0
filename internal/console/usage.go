package console

import (
	"context"
	"html/template"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/chart"
	"github.com/sluicehq/sluice/internal/usage"
)

// usageTimeout bounds the Redis reads of a usage chart or the overview:
// a week is 168 hashes, a day 1440, read in one pipeline.
const usageTimeout = 2 * time.Second

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
	// Message replaces the chart when the counts cannot be read.
	Message string
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

// bucketUsage reads the usage of bucket b over window w.
func (s *server) bucketUsage(ctx context.Context, b *buckets.Bucket, w usage.Window) usageView {
	v := usageView{Window: w.String(), Windows: windowLinks(w)}
	if s.usage == nil {
		v.Message = "This console is not connected to Redis, so usage cannot be shown."
		return v
	}
	rctx, cancel := context.WithTimeout(ctx, usageTimeout)
	defer cancel()
	series, err := s.usage.Series(rctx, b.Name, w)
	if err != nil {
		s.log.WarnContext(rctx, "console: read usage", "bucket", b.Name, "window", w.String(), "err", err)
		v.Message = "Redis did not answer; usage cannot be shown right now."
		return v
	}
	v.Series = series
	v.Chart = chart.Usage(series, chart.Options{Title: "Acquires per app, last " + w.String()})
	return v
}

// topRow is one bucket of the overview.
type topRow struct {
	Bucket   *buckets.Bucket
	Allowed  int64
	Denied   int64
	Requests int64
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
// acquires in the last hour. Only visible buckets are read, so the page
// says nothing about the others, not even that they exist.
func (s *server) usageOverview(c *gin.Context) {
	p := &usagePage{layout: layout{Title: "Usage", Nav: "usage"}}
	visible, err := s.visibleBuckets(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	p.Buckets = len(visible)
	switch {
	case s.usage == nil:
		p.Message = "This console is not connected to Redis, so usage cannot be shown."
	case len(visible) > 0:
		byName := make(map[string]*buckets.Bucket, len(visible))
		names := make([]string, 0, len(visible))
		for _, b := range visible {
			byName[b.Name] = b
			names = append(names, b.Name)
		}
		rctx, cancel := context.WithTimeout(ctx(c), usageTimeout)
		defer cancel()
		top, err := s.usage.TopDenied(rctx, names, time.Hour, topDeniedLimit)
		if err != nil {
			s.log.WarnContext(rctx, "console: read top denied buckets", "err", err)
			p.Message = "Redis did not answer; usage cannot be shown right now."
			break
		}
		for _, t := range top {
			if byName[t.Bucket] == nil {
				continue
			}
			p.Rows = append(p.Rows, topRow{Bucket: byName[t.Bucket], Allowed: t.Allowed, Denied: t.Denied,
				Requests: t.Allowed + t.Denied})
		}
	}
	s.render(c, http.StatusOK, "usage", p)
}

// visibleBuckets returns every bucket the user may see, all pages of it.
func (s *server) visibleBuckets(c *gin.Context) ([]*buckets.Bucket, error) {
	f := buckets.Filter{VisibleTo: s.enf.Visible(username(c)), Limit: buckets.MaxLimit}
	if f.VisibleTo != nil && len(f.VisibleTo) == 0 {
		return nil, nil
	}
	var out []*buckets.Bucket
	for {
		page, err := s.buckets.List(ctx(c), f)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Buckets...)
		if page.Next == "" || len(page.Buckets) == 0 {
			return out, nil
		}
		f.After = page.Next
	}
}
