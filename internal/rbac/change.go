package rbac

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// check validates a user name, an app name and, when non-empty, a role.
func check(user, app string, r Role, needRole bool) error {
	var v errs.Validation
	if p := names.Problem(user); p != "" {
		v.Add("user", p)
	}
	if p := names.Problem(app); p != "" {
		v.Add("app", p)
	}
	if needRole && !r.Valid() {
		v.Add("role", `must be "owner" or "viewer"`)
	}
	return v.Err()
}

// Grant gives user the role r on app, replacing the role they held there.
// The user must exist (else a *errs.Validation on "user") and the app too
// (else errs.ErrNotFound). Making the last owner a viewer is refused with
// errs.ErrConflict. The change is audited ("member.grant") in the same
// transaction and applies on this instance once committed, before Grant
// returns.
func (e *Enforcer) Grant(ctx context.Context, actor audit.Actor, user, app string, r Role) error {
	if err := check(user, app, r, true); err != nil {
		return err
	}
	var before Role
	err := database.InTx(ctx, e.db, func(tx *database.Tx) error {
		var err error
		before, err = grant(ctx, tx, user, app, r)
		if err != nil {
			return err
		}
		// A role set in the console is the console's, not the provider's.
		if err := forgetIdentityRole(ctx, tx, user, app); err != nil || before == r {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "member.grant", ObjectType: "member", ObjectName: user, App: app,
			Before: memberSnapshot(user, before), After: memberSnapshot(user, r),
		})
	})
	if err != nil {
		return err
	}
	e.refresh(ctx)
	return nil
}

// GrantTx gives user the role r on app inside tx, a transaction of the
// caller (registering an app, where the creator becomes its owner). It
// writes no audit row: the caller's change is audited. Other instances see
// the role once tx commits; see Enforcer.GrantTx for this one.
func GrantTx(ctx context.Context, tx *database.Tx, user, app string, r Role) error {
	if err := check(user, app, r, true); err != nil {
		return err
	}
	_, err := grant(ctx, tx, user, app, r)
	return err
}

// GrantTx is the package's GrantTx that also applies the role on this
// instance once tx has committed, so
// that the creator of an app can use it on the very next request. Should
// tx roll back or its commit fail, nothing changes in memory.
func (e *Enforcer) GrantTx(ctx context.Context, tx *database.Tx, user, app string, r Role) error {
	if err := GrantTx(ctx, tx, user, app, r); err != nil {
		return err
	}
	e.afterCommit(ctx, tx)
	return nil
}

// afterCommit loads the policy once tx has committed.
func (e *Enforcer) afterCommit(ctx context.Context, tx *database.Tx) {
	tx.AfterCommit(func() { e.refresh(ctx) })
}

// grant stores the role inside tx and returns the role user held before
// ("" for none).
func grant(ctx context.Context, tx *database.Tx, user, app string, r Role) (Role, error) {
	if err := bump(ctx, tx); err != nil {
		return "", err
	}
	if err := userExists(ctx, tx, user); err != nil {
		return "", err
	}
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT COUNT(*) FROM apps WHERE name = ?`, app); err != nil {
		return "", fmt.Errorf("find app %q: %w", app, database.Translate(err))
	}
	if n == 0 {
		return "", fmt.Errorf("app %q: %w", app, errs.ErrNotFound)
	}
	ms, err := members(ctx, tx, app, true)
	if err != nil {
		return "", err
	}
	before := roleOf(ms, user)
	if before == r {
		return before, nil
	}
	if before == RoleOwner && owners(ms) == 1 {
		return "", lastOwner(user, app)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule WHERE ptype = 'g' AND v0 = ? AND v2 = ?`, userSubject(user), app); err != nil {
		return "", fmt.Errorf("replace role of %q on app %q: %w", user, app, database.Translate(err))
	}
	if err := insertRule(ctx, tx, "g", []string{userSubject(user), roleSubject(string(r)), app}); err != nil {
		return "", err
	}
	return before, nil
}

// Revoke removes user's role on app. A user without a role there gives
// errs.ErrNotFound; the last owner cannot be removed (errs.ErrConflict).
// The change is audited ("member.revoke") and applies here once committed.
func (e *Enforcer) Revoke(ctx context.Context, actor audit.Actor, user, app string) error {
	if err := check(user, app, "", false); err != nil {
		return err
	}
	err := database.InTx(ctx, e.db, func(tx *database.Tx) error {
		if err := bump(ctx, tx); err != nil {
			return err
		}
		ms, err := members(ctx, tx, app, true)
		if err != nil {
			return err
		}
		before := roleOf(ms, user)
		switch {
		case before == "":
			return fmt.Errorf("user %q has no role on app %q: %w", user, app, errs.ErrNotFound)
		case before == RoleOwner && owners(ms) == 1:
			return lastOwner(user, app)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule WHERE ptype = 'g' AND v0 = ? AND v2 = ?`, userSubject(user), app); err != nil {
			return fmt.Errorf("revoke role of %q on app %q: %w", user, app, database.Translate(err))
		}
		if err := forgetIdentityRole(ctx, tx, user, app); err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "member.revoke", ObjectType: "member", ObjectName: user, App: app,
			Before: memberSnapshot(user, before),
		})
	})
	if err != nil {
		return err
	}
	e.refresh(ctx)
	return nil
}

// SetAdmin grants or revokes the global admin role. Granting needs an
// existing user; revoking the last admin is refused (errs.ErrConflict).
// A change is audited ("user.admin"); asking for the current state changes
// nothing.
func (e *Enforcer) SetAdmin(ctx context.Context, actor audit.Actor, user string, admin bool) error {
	if p := names.Problem(user); p != "" {
		return errs.Invalid("user", p)
	}
	changed := false
	err := database.InTx(ctx, e.db, func(tx *database.Tx) error {
		if err := bump(ctx, tx); err != nil {
			return err
		}
		var admins []string
		if err := tx.SelectContext(ctx, &admins, `SELECT v0 FROM casbin_rule
			WHERE ptype = 'g' AND v1 = ? AND v2 = ? FOR UPDATE`, roleSubject(roleAdmin), globalDomain); err != nil {
			return fmt.Errorf("list admins: %w", database.Translate(err))
		}
		was := slices.Contains(admins, userSubject(user))
		if err := forgetIdentityRole(ctx, tx, user, globalDomain); err != nil || was == admin {
			return err
		}
		rule := []string{userSubject(user), roleSubject(roleAdmin), globalDomain}
		if admin {
			if err := userExists(ctx, tx, user); err != nil {
				return err
			}
			if err := insertRule(ctx, tx, "g", rule); err != nil {
				return err
			}
		} else {
			if len(admins) == 1 {
				return errs.Conflictf("%q is the last admin and cannot lose the admin role; make someone else an admin first", user)
			}
			if _, err := deleteRule(ctx, tx, "g", rule); err != nil {
				return err
			}
		}
		changed = true
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "user.admin", ObjectType: "user", ObjectName: user,
			Before: audit.Snapshot(map[string]bool{"admin": was}),
			After:  audit.Snapshot(map[string]bool{"admin": admin}),
		})
	})
	if err != nil || !changed {
		return err
	}
	e.refresh(ctx)
	return nil
}

func userExists(ctx context.Context, tx *database.Tx, user string) error {
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT COUNT(*) FROM users WHERE username = ?`, user); err != nil {
		return fmt.Errorf("find user %q: %w", user, database.Translate(err))
	}
	if n == 0 {
		return errs.Invalid("user", "is not a known user")
	}
	return nil
}

func roleOf(ms []Member, user string) Role {
	for _, m := range ms {
		if m.User == user {
			return m.Role
		}
	}
	return ""
}

func owners(ms []Member) int {
	n := 0
	for _, m := range ms {
		if m.Role == RoleOwner {
			n++
		}
	}
	return n
}

func lastOwner(user, app string) error {
	return errs.Conflictf("%q is the last owner of app %q and cannot be removed; make someone else an owner first", user, app)
}

func memberSnapshot(user string, r Role) string {
	if r == "" {
		return ""
	}
	return audit.Snapshot(Member{User: user, Role: r})
}
