package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// ErrDisabled refuses a sign-in through the provider to a disabled
// account. It matches errs.ErrUnauthenticated.
var ErrDisabled = fmt.Errorf("the account is disabled: %w", errs.ErrUnauthenticated)

// SignInIdentity returns the user linked to the provider's (issuer,
// subject), creating the user (named username, with no password: only the
// provider signs them in) and the link at the first sign-in. The link is
// for good: a user name changed at the provider later does not rename the
// account. An existing account of that name that is not linked is never
// taken over: that is errs.ErrConflict. The creation is audited
// ("user.create") as done by actor.
func (s *Store) SignInIdentity(ctx context.Context, actor audit.Actor, issuer, subject, username string) (u *User, created bool, err error) {
	if issuer == "" || subject == "" || len(issuer) > 255 || len(subject) > 255 {
		return nil, false, errs.Invalid("subject", "the provider's issuer and subject must be 1 to 255 characters")
	}
	now := s.now()
	err = database.InTx(ctx, s.db, func(tx *database.Tx) error {
		var r userRow
		err := tx.GetContext(ctx, &r, `SELECT u.id, u.username, u.password_hash, u.disabled, u.created_at, u.updated_at
			FROM user_identities i JOIN users u ON u.id = i.user_id
			WHERE i.issuer = ? AND i.subject = ? FOR UPDATE`, issuer, subject)
		switch {
		case err == nil:
			u = r.user()
			if u.Disabled {
				return ErrDisabled
			}
			if _, err := tx.ExecContext(ctx, `UPDATE user_identities SET last_signin_at = ? WHERE issuer = ? AND subject = ?`,
				now, issuer, subject); err != nil {
				return fmt.Errorf("record sign-in of %q: %w", u.Username, database.Translate(err))
			}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read identity: %w", database.Translate(err))
		}
		if p := names.Problem(username); p != "" {
			return errs.Invalid("username", "the provider gave no usable user name: "+p)
		}
		u = &User{Username: username, CreatedAt: now, UpdatedAt: now}
		id, err := database.Insert(ctx, tx, `INSERT INTO users (username, password_hash, disabled, created_at, updated_at)
			VALUES (?, '', FALSE, ?, ?)`, username, now, now)
		if database.IsDuplicate(err) {
			return errs.Conflictf("a local account named %q exists and is not linked to this identity", username)
		}
		if err != nil {
			return fmt.Errorf("insert user %q: %w", username, err)
		}
		u.ID = id
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_identities (issuer, subject, user_id, created_at, last_signin_at)
			VALUES (?, ?, ?, ?, ?)`, issuer, subject, id, now, now); err != nil {
			return fmt.Errorf("link identity of %q: %w", username, database.Translate(err))
		}
		created = true
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "user.create", ObjectType: "user", ObjectName: username, After: audit.Snapshot(u),
			Detail: "first sign-in through the identity provider " + clip(issuer, 200),
		})
	})
	if err != nil {
		return nil, false, err
	}
	return u, created, nil
}

// Identity is a provider identity linked to a user.
type Identity struct {
	Issuer  string `db:"issuer" json:"issuer"`
	Subject string `db:"subject" json:"subject"`
}

// Identities returns the provider identities linked to the user with
// userID.
func (s *Store) Identities(ctx context.Context, userID int64) ([]Identity, error) {
	out := []Identity{}
	if err := s.db.SelectContext(ctx, &out, `SELECT issuer, subject FROM user_identities WHERE user_id = ? ORDER BY issuer, subject`,
		userID); err != nil {
		return nil, fmt.Errorf("list identities: %w", database.Translate(err))
	}
	return out, nil
}
