package console

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/manage"
)

// auditPage shows the audit log, newest first, filtered by app and bucket.
type auditPage struct {
	layout
	Entries []manage.AuditEntry
	App     string
	Bucket  string
	Apps    []string
	Next    int64
}

// listAudit shows the entries the user may see.
func (s *server) listAudit(c *gin.Context) {
	q := manage.AuditQuery{App: queryValue(c, "app", 63), Limit: 50}
	bucket := queryValue(c, "bucket", 100)
	if bucket != "" {
		q.ObjectType, q.ObjectName = "bucket", bucket
	}
	if before, err := strconv.ParseInt(c.Query("before"), 10, 64); err == nil && before > 0 {
		q.Before = before
	}
	page, err := s.svc.ListAudit(ctx(c), caller(c), q)
	if err != nil {
		s.fail(c, err)
		return
	}
	names, err := s.svc.AppNames(ctx(c), caller(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.render(c, http.StatusOK, "audit", &auditPage{layout: layout{Title: "Audit log", Nav: "audit"},
		Entries: page.Entries, App: q.App, Bucket: bucket, Apps: names, Next: page.Next})
}
