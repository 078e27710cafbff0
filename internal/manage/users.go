package manage

import (
	"context"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
)

// requireAdmin refuses (audited) a caller without the admin role.
func (s *Service) requireAdmin(ctx context.Context, c Caller, target string) error {
	if s.IsAdmin(c) {
		return nil
	}
	return s.Refuse(ctx, c, Refusal{ObjectType: "user", ObjectName: target, Why: "admin role required"},
		errs.Forbiddenf("managing users needs the admin role"))
}

// adminOfAnother refuses (audited) a caller without the admin role, and an
// admin's change of their own account: disabling or demoting themselves
// could leave nobody able to manage users.
func (s *Service) adminOfAnother(ctx context.Context, c Caller, user string) error {
	if err := s.requireAdmin(ctx, c, user); err != nil {
		return err
	}
	if user == c.Name() {
		return errs.Invalid("user", "you cannot change your own account here; ask another admin")
	}
	return nil
}

// UserRow is one account of the users list.
type UserRow struct {
	*accounts.User
	Admin bool
}

// ListUsers returns every account; admins only.
func (s *Service) ListUsers(ctx context.Context, c Caller) ([]UserRow, error) {
	if err := s.requireAdmin(ctx, c, ""); err != nil {
		return nil, err
	}
	users, err := s.accounts.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]UserRow, 0, len(users))
	for _, u := range users {
		out = append(out, UserRow{User: u, Admin: s.enf.IsAdmin(u.Username)})
	}
	return out, nil
}

// CreateUser creates an account, optionally an admin. The password is set
// by the admin and meant to be changed by its owner.
type CreateUser struct {
	Username string
	Password string
	Admin    bool
}

// CreateUser needs the admin role.
func (s *Service) CreateUser(ctx context.Context, c Caller, req CreateUser) (*accounts.User, error) {
	if err := s.requireAdmin(ctx, c, req.Username); err != nil {
		return nil, err
	}
	u, err := s.accounts.CreateUser(ctx, c.Actor(), req.Username, req.Password)
	if err != nil {
		return nil, err
	}
	if req.Admin {
		if err := s.enf.SetAdmin(ctx, c.Actor(), u.Username, true); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// SetDisabled disables or enables an account; disabling ends its sessions.
type SetDisabled struct {
	User     string
	Disabled bool
}

// SetDisabled needs the admin role, on another account than the caller's.
func (s *Service) SetDisabled(ctx context.Context, c Caller, req SetDisabled) error {
	if err := s.adminOfAnother(ctx, c, req.User); err != nil {
		return err
	}
	return s.accounts.SetDisabled(ctx, c.Actor(), req.User, req.Disabled)
}

// SetAdmin grants or takes the global admin role.
type SetAdmin struct {
	User  string
	Admin bool
}

// SetAdmin needs the admin role, on another account than the caller's.
// The last admin keeps the role (a conflict).
func (s *Service) SetAdmin(ctx context.Context, c Caller, req SetAdmin) error {
	if err := s.adminOfAnother(ctx, c, req.User); err != nil {
		return err
	}
	if _, err := s.accounts.UserByName(ctx, req.User); err != nil {
		return err
	}
	return s.enf.SetAdmin(ctx, c.Actor(), req.User, req.Admin)
}

// SetPassword sets a new password for a user who forgot theirs and ends
// their sessions.
type SetPassword struct {
	User     string
	Password string
}

// SetPassword needs the admin role, on another account than the caller's.
func (s *Service) SetPassword(ctx context.Context, c Caller, req SetPassword) error {
	if err := s.adminOfAnother(ctx, c, req.User); err != nil {
		return err
	}
	return s.accounts.SetPassword(ctx, c.Actor(), req.User, req.Password)
}

// Tokens returns the caller's own API tokens.
func (s *Service) Tokens(ctx context.Context, c Caller) ([]*accounts.Token, error) {
	if c.User == nil {
		return nil, errs.ErrUnauthenticated
	}
	return s.accounts.Tokens(ctx, c.User.ID)
}

// CreateToken makes an API token for the caller.
type CreateToken struct {
	Name string
	// Expires is when the token stops working; nil never.
	Expires *time.Time
}

// CreateToken returns the token's secret, which is shown once and never
// stored, and the token.
func (s *Service) CreateToken(ctx context.Context, c Caller, req CreateToken) (string, *accounts.Token, error) {
	if c.User == nil {
		return "", nil, errs.ErrUnauthenticated
	}
	return s.accounts.CreateToken(ctx, c.Actor(), c.User.ID, req.Name, req.Expires)
}

// RevokeToken revokes one of the caller's own tokens.
type RevokeToken struct {
	ID int64
}

// RevokeToken answers another user's token like a missing one, and audits
// the attempt.
func (s *Service) RevokeToken(ctx context.Context, c Caller, req RevokeToken) error {
	mine, err := s.Tokens(ctx, c)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(mine, func(t *accounts.Token) bool { return t.ID == req.ID }) {
		return s.Refuse(ctx, c, Refusal{ObjectType: "token", ObjectName: itoa(req.ID), Why: "not visible to the user"},
			errs.NotFoundf("token %d not found", req.ID))
	}
	return s.accounts.RevokeToken(ctx, c.Actor(), c.User.ID, req.ID)
}

// AuditQuery selects audit entries; visibility is added by ListAudit.
type AuditQuery = audit.Filter

// ListAudit returns the entries the caller may see, newest first: all of
// them for an admin, otherwise those about the apps they are a member of
// (and those apps' buckets).
func (s *Service) ListAudit(ctx context.Context, c Caller, q AuditQuery) (audit.Page, error) {
	q.Apps = s.Visible(c)
	q, err := s.auditNames(ctx, q)
	if err != nil {
		return audit.Page{}, err
	}
	return s.audit.List(ctx, q)
}

// auditNames turns a filter on part of a bucket name into the names of the
// buckets that match, when they are few, so that the log is read one index
// range per bucket rather than newest first filtered row by row. A deleted
// bucket matches by its full name. When many buckets match, a member's
// filter takes the names among the buckets they see, if those are few:
// the entries they may read are about those (an entry about a bucket
// since moved to an app they do not see is then left out).
func (s *Service) auditNames(ctx context.Context, q AuditQuery) (AuditQuery, error) {
	if q.NameContains == "" || q.ObjectType != "bucket" || q.ObjectName != "" || !utf8.ValidString(q.NameContains) {
		return q, nil
	}
	names, err := s.buckets.NamesContaining(ctx, q.NameContains, nil, audit.MaxNames)
	if err != nil {
		return q, err
	}
	if len(names) == audit.MaxNames && q.Apps != nil {
		if names, err = s.buckets.NamesContaining(ctx, q.NameContains, q.Apps, audit.MaxNames); err != nil {
			return q, err
		}
	}
	if len(names) == audit.MaxNames {
		return q, nil // many: matching rows are common, read newest first
	}
	if !slices.Contains(names, q.NameContains) {
		names = append(names, q.NameContains)
	}
	q.ObjectNames, q.NameContains = names, ""
	return q, nil
}

// AuditLogPage is a page of the audit log with the count of the entries
// its filter selects.
type AuditLogPage struct {
	audit.Page
	// Count is how many entries the filter selects, up to a cap; More
	// tells there are more.
	Count int
	More  bool
}

// AuditLog is ListAudit and CountAudit of one filter, for a page that
// shows both: a filter on part of a bucket name is turned into names once.
func (s *Service) AuditLog(ctx context.Context, c Caller, q AuditQuery) (AuditLogPage, error) {
	q.Apps = s.Visible(c)
	q, err := s.auditNames(ctx, q)
	if err != nil {
		return AuditLogPage{}, err
	}
	var p AuditLogPage
	if p.Page, err = s.audit.List(ctx, q); err != nil {
		return AuditLogPage{}, err
	}
	p.Count, p.More, err = s.audit.Count(ctx, q)
	return p, err
}

// UserTokens returns the API tokens of another user, newest first; admins
// only. An unknown user is errs.ErrNotFound.
func (s *Service) UserTokens(ctx context.Context, c Caller, user string) ([]*accounts.Token, error) {
	if err := s.requireAdmin(ctx, c, user); err != nil {
		return nil, err
	}
	_, ts, err := s.accounts.TokensOf(ctx, user)
	return ts, err
}

// RevokeUserToken revokes one API token of a user.
type RevokeUserToken struct {
	User string
	ID   int64
}

// RevokeUserToken needs the admin role; the revocation is audited naming
// the token's owner. A token that is not the user's is errs.ErrNotFound.
func (s *Service) RevokeUserToken(ctx context.Context, c Caller, req RevokeUserToken) error {
	if err := s.requireAdmin(ctx, c, req.User); err != nil {
		return err
	}
	u, err := s.accounts.UserByName(ctx, req.User)
	if err != nil {
		return err
	}
	return s.accounts.RevokeToken(ctx, c.Actor(), u.ID, req.ID)
}

// UserNames returns the names of enabled users starting with prefix, for a
// member picker, to any signed-in caller: user names are not secret among
// signed-in users (docs/console.md), nothing else about an account is told.
func (s *Service) UserNames(ctx context.Context, c Caller, prefix string) ([]string, error) {
	if c.User == nil {
		return nil, errs.ErrUnauthenticated
	}
	return s.accounts.Names(ctx, prefix, accounts.MaxNames)
}
