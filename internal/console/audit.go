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
	Entries []manage.AuditEntry
	App     string
	Bucket  string
	Apps    []string
	// Next and Prev are the cursors of the older and the newer page, 0
	// when there is none.
	Next, Prev int64
	// Count is how many entries the filter selects, at most a cap;
	// CountMore tells there are more.
	Count     int64
	CountMore bool
}

// listAudit shows the entries the user may see.
func (s *server) listAudit(c *gin.Context) {
	q := manage.AuditQuery{App: queryValue(c, "app", 63), Limit: 50}
	bucket := queryValue(c, "bucket", 100)
	if bucket != "" {
		q.ObjectType, q.NameContains = "bucket", bucket
	}
	if before, err := strconv.ParseInt(c.Query("before"), 10, 64); err == nil && before > 0 {
		q.Before = before
	} else if after, err := strconv.ParseInt(c.Query("after"), 10, 64); err == nil && after > 0 {
		q.After = after
	}
	page, err := s.svc.ListAudit(ctx(c), caller(c), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	n, more, err := s.svc.CountAudit(ctx(c), caller(c), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	names, err := s.svc.AppNames(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	prev := page.Prev
	if q.Before > 0 && len(page.Entries) > 0 {
		// Came from a newer page: it is still there.
		prev = page.Entries[0].ID
	}
	s.render(c, http.StatusOK, "audit", &auditPage{layout: layout{Title: "Audit log", Nav: "audit"},
		Entries: page.Entries, App: q.App, Bucket: bucket, Apps: names, Next: page.Next, Prev: prev,
		Count: int64(n), CountMore: more})
}
