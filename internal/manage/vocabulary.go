package manage

import (
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/rbac"
)

// The types the use cases take and return, named here so that transports
// depend on this package alone and never reach past it into the audit log
// or the permission model.
type (
	// AuditFilter selects audit log entries (AuditLog).
	AuditFilter = audit.Filter
	// AuditEntry is one audit log entry.
	AuditEntry = audit.Entry
	// AuditChange is one field an audit entry changed.
	AuditChange = audit.Change
	// Role is a role on an app.
	Role = rbac.Role
)

// The roles on an app.
const (
	RoleOwner  = rbac.RoleOwner
	RoleViewer = rbac.RoleViewer
)

// RoleDescription says in plain words what the role named role ("owner",
// "viewer" or "admin") lets its holder do, "" for any other name. The
// texts are the permission model's (internal/rbac).
func RoleDescription(role string) string {
	if role == "admin" {
		return rbac.AdminDescription
	}
	return rbac.Role(role).Description()
}
