package rbac

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// IdentityRoles are the roles an identity provider's groups give a user.
type IdentityRoles struct {
	Admin bool
	// Apps holds one role per app.
	Apps map[string]Role
}

// ApplyIdentityRoles makes the roles the provider manages for user equal
// to want, at each sign-in through the provider. The provider manages the
// roles it gave (listed in idp_roles) and the roles user does not hold:
//   - a role want names is granted when user holds no role on that app
//     (or no admin role), or holds the one the provider gave before;
//   - a role the provider gave and want no longer names is revoked;
//   - a role granted in the console (by an admin, an owner, or at the
//     app's creation) is never changed: the console's grant wins, and
//     the role leaves the provider's list;
//   - the last owner of an app and the last admin keep their role, as in
//     the console; the provider tries again at the next sign-in.
//
// Each change is audited as the console's (member.grant, member.revoke,
// user.admin) by actor, in one transaction. The returned notes say what
// was left as it was, and why, for the caller's audit row.
func (e *Enforcer) ApplyIdentityRoles(ctx context.Context, actor audit.Actor, user string, want IdentityRoles) (notes []string, err error) {
	if p := names.Problem(user); p != "" {
		return nil, errs.Invalid("user", p)
	}
	changed := false
	err = database.InTx(ctx, e.db, func(tx *database.Tx) error {
		notes, changed = nil, false
		if err := bump(ctx, tx); err != nil {
			return err
		}
		if err := userExists(ctx, tx, user); err != nil {
			return err
		}
		given, err := identityRoles(ctx, tx, user)
		if err != nil {
			return err
		}
		held, admin, err := heldRoles(ctx, tx, user)
		if err != nil {
			return err
		}
		note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
		for _, app := range slices.Sorted(maps.Keys(want.Apps)) {
			r := want.Apps[app]
			cur := held[app]
			g, gave := given[app]
			if cur != "" && (!gave || g != string(cur)) {
				note("kept the console's role %s on %s (the groups give %s)", cur, app, r)
				if gave {
					if err := forgetIdentityRole(ctx, tx, user, app); err != nil {
						return err
					}
				}
				continue
			}
			if cur != r {
				if !names.Valid(app) || !r.Valid() {
					note("%s: not an app name or role", app)
					continue
				}
				before, err := grant(ctx, tx, user, app, r)
				switch {
				case errors.Is(err, errs.ErrNotFound):
					note("no app %s: its role was not given", app)
					continue
				case errors.Is(err, errs.ErrConflict):
					note("kept %s as owner of %s: the last owner", user, app)
					continue
				case err != nil:
					return err
				}
				changed = true
				if err := audit.Write(ctx, tx, actor, audit.Entry{
					Action: "member.grant", ObjectType: "member", ObjectName: user, App: app,
					Before: memberSnapshot(user, before), After: memberSnapshot(user, r),
					Detail: "from the identity provider's groups",
				}); err != nil {
					return err
				}
			}
			if err := rememberIdentityRole(ctx, tx, user, app, string(r)); err != nil {
				return err
			}
		}
		for _, app := range slices.Sorted(maps.Keys(given)) {
			if _, still := want.Apps[app]; still || app == globalDomain {
				continue
			}
			if held[app] != Role(given[app]) {
				// Changed in the console meanwhile: the console's now.
				if err := forgetIdentityRole(ctx, tx, user, app); err != nil {
					return err
				}
				continue
			}
			ms, err := members(ctx, tx, app, true)
			if err != nil {
				return err
			}
			if held[app] == RoleOwner && owners(ms) == 1 {
				note("kept %s as owner of %s: the last owner", user, app)
				continue
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule WHERE ptype = 'g' AND v0 = ? AND v2 = ?`, userSubject(user), app); err != nil {
				return fmt.Errorf("revoke role of %q on app %q: %w", user, app, database.Translate(err))
			}
			changed = true
			if err := audit.Write(ctx, tx, actor, audit.Entry{
				Action: "member.revoke", ObjectType: "member", ObjectName: user, App: app,
				Before: memberSnapshot(user, held[app]), Detail: "no longer in the identity provider's groups",
			}); err != nil {
				return err
			}
			if err := forgetIdentityRole(ctx, tx, user, app); err != nil {
				return err
			}
		}
		_, gaveAdmin := given[globalDomain]
		rule := []string{userSubject(user), roleSubject(roleAdmin), globalDomain}
		switch {
		case want.Admin && !admin:
			if err := insertRule(ctx, tx, "g", rule); err != nil {
				return err
			}
			changed = true
			if err := audit.Write(ctx, tx, actor, audit.Entry{
				Action: "user.admin", ObjectType: "user", ObjectName: user,
				Before: audit.Snapshot(map[string]bool{"admin": false}), After: audit.Snapshot(map[string]bool{"admin": true}),
				Detail: "from the identity provider's groups",
			}); err != nil {
				return err
			}
			return rememberIdentityRole(ctx, tx, user, globalDomain, roleAdmin)
		case !want.Admin && gaveAdmin && admin:
			var n int
			if err := tx.GetContext(ctx, &n, `SELECT COUNT(*) FROM casbin_rule WHERE ptype = 'g' AND v1 = ? AND v2 = ?`,
				roleSubject(roleAdmin), globalDomain); err != nil {
				return fmt.Errorf("count admins: %w", database.Translate(err))
			}
			if n == 1 {
				note("kept %s as admin: the last admin", user)
				return nil
			}
			if _, err := deleteRule(ctx, tx, "g", rule); err != nil {
				return err
			}
			changed = true
			if err := audit.Write(ctx, tx, actor, audit.Entry{
				Action: "user.admin", ObjectType: "user", ObjectName: user,
				Before: audit.Snapshot(map[string]bool{"admin": true}), After: audit.Snapshot(map[string]bool{"admin": false}),
				Detail: "no longer in the identity provider's admin groups",
			}); err != nil {
				return err
			}
			return forgetIdentityRole(ctx, tx, user, globalDomain)
		case !want.Admin && gaveAdmin:
			return forgetIdentityRole(ctx, tx, user, globalDomain)
		case want.Admin && admin && !gaveAdmin:
			note("kept the console's admin role")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if changed {
		e.refresh(ctx)
	}
	return notes, nil
}

// IdentityManaged returns the roles the provider manages for user: the
// app (or "*" for admin) and role of each.
func (e *Enforcer) IdentityManaged(ctx context.Context, user string) (map[string]string, error) {
	return identityRoles(ctx, e.db, user)
}

func identityRoles(ctx context.Context, q sqlx.QueryerContext, user string) (map[string]string, error) {
	var rows []struct {
		Domain string `db:"domain"`
		Role   string `db:"role"`
	}
	query := `SELECT domain, role FROM idp_roles WHERE username = ?`
	if _, inTx := q.(*database.Tx); inTx {
		query += ` FOR UPDATE`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, query, user); err != nil {
		return nil, fmt.Errorf("read the provider's roles of %q: %w", user, database.Translate(err))
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.Domain] = r.Role
	}
	return out, nil
}

// heldRoles reads user's roles from the stored policy: the role on each
// app, and whether user is an admin.
func heldRoles(ctx context.Context, tx *database.Tx, user string) (map[string]Role, bool, error) {
	var rows []struct {
		Role   string `db:"v1"`
		Domain string `db:"v2"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT v1, v2 FROM casbin_rule WHERE ptype = 'g' AND v0 = ? FOR UPDATE`,
		userSubject(user)); err != nil {
		return nil, false, fmt.Errorf("read roles of %q: %w", user, database.Translate(err))
	}
	held, admin := map[string]Role{}, false
	for _, r := range rows {
		role, ok := roleOfSubject(r.Role)
		switch {
		case !ok:
		case role == roleAdmin && r.Domain == globalDomain:
			admin = true
		case Role(role).rank() > held[r.Domain].rank():
			held[r.Domain] = Role(role)
		}
	}
	return held, admin, nil
}

func rememberIdentityRole(ctx context.Context, tx *database.Tx, user, domain, role string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO idp_roles (username, domain, role) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE role = VALUES(role)`, user, domain, role); err != nil {
		return fmt.Errorf("record the provider's role of %q: %w", user, database.Translate(err))
	}
	return nil
}

// forgetIdentityRole makes user's role on domain the console's: a grant,
// a revocation or an admin change made in the console calls it.
func forgetIdentityRole(ctx context.Context, tx *database.Tx, user, domain string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM idp_roles WHERE username = ? AND domain = ?`, user, domain); err != nil {
		return fmt.Errorf("forget the provider's role of %q: %w", user, database.Translate(err))
	}
	return nil
}
