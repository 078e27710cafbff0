package console

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/manage"
)

// auditPage shows the audit log, newest first, filtered by app and part of
// a bucket name, one page at a time in both directions.
type auditPage struct {
	layout
	appFilter
	Entries []manage.AuditEntry
	Bucket  string
	// Next and Prev are the cursors of the older and the newer page, 0
	// when there is none.
	Next, Prev int64
	// Count is how many entries the filter selects, at most a cap;
	// CountMore tells there are more.
	Count     int64
	CountMore bool
}

// appFilter is the app choice of a list's filter, as the "appfilter"
// partial shows it.
type appFilter struct {
	// App is the app chosen, "" for all.
	App string
	// Apps are the apps the user may choose from.
	Apps []string
}

// appFilterOf reads the app chosen by ?app= and lists the apps to choose
// from.
func (s *server) appFilterOf(c *gin.Context) (appFilter, error) {
	names, err := s.svc.AppNames(ctx(c), caller(c))
	return appFilter{App: queryValue(c, "app", 63), Apps: names}, err
}

// listAudit shows the entries the user may see.
func (s *server) listAudit(c *gin.Context) {
	filter, err := s.appFilterOf(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	q := manage.AuditQuery{App: filter.App, Limit: 50}
	bucket := queryValue(c, "bucket", 100)
	if bucket != "" {
		q.ObjectType, q.NameContains = "bucket", bucket
	}
	if before, err := strconv.ParseInt(c.Query("before"), 10, 64); err == nil && before > 0 {
		q.Before = before
	} else if after, err := strconv.ParseInt(c.Query("after"), 10, 64); err == nil && after > 0 {
		q.After = after
	}
	page, err := s.svc.AuditLog(ctx(c), caller(c), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	n, more := page.Count, page.More
	prev := page.Prev
	if q.Before > 0 && len(page.Entries) > 0 {
		// Came from a newer page: it is still there.
		prev = page.Entries[0].ID
	}
	s.render(c, http.StatusOK, "audit", &auditPage{layout: layout{Title: "Audit log", Nav: "audit"}, appFilter: filter,
		Entries: page.Entries, Bucket: bucket, Next: page.Next, Prev: prev,
		Count: int64(n), CountMore: more})
}
