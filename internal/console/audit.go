package console

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/audit"
)

// auditPage shows the audit log, newest first, filtered by app and bucket.
type auditPage struct {
	layout
	Entries []audit.Entry
	App     string
	Bucket  string
	Apps    []string
	Next    int64
}

// listAudit shows the entries the user may see: all of them for admins,
// otherwise those about the apps they are a member of.
func (s *server) listAudit(c *gin.Context) {
	f := audit.Filter{App: queryValue(c, "app", 63), Apps: s.enf.Visible(username(c)), Limit: 50}
	if f.Apps != nil && len(f.Apps) == 0 {
		f.Apps = []string{}
	}
	bucket := queryValue(c, "bucket", 100)
	if bucket != "" {
		f.ObjectType, f.ObjectName = "bucket", bucket
	}
	if before, err := strconv.ParseInt(c.Query("before"), 10, 64); err == nil && before > 0 {
		f.Before = before
	}
	page, err := s.audit.List(ctx(c), f)
	if err != nil {
		s.fail(c, err)
		return
	}
	names, err := s.appChoices(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.render(c, http.StatusOK, "audit", &auditPage{layout: layout{Title: "Audit log", Nav: "audit"},
		Entries: page.Entries, App: f.App, Bucket: bucket, Apps: names, Next: page.Next})
}
