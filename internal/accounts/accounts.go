// Package accounts keeps the console's local users, their server-side
// sessions and their personal API tokens, all in MySQL.
//
// Passwords are hashed with Argon2id. Session ids and API tokens are random
// secrets of 256 bits handed to the client once; only their SHA-256 is
// stored, so a copy of the database lets nobody sign in.
package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
	"github.com/sluicehq/sluice/internal/secrets"
)

// Session lifetimes by default.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxAge      = 12 * time.Hour
)

// touchEvery bounds how often a session's last-seen time and a token's
// last-used time are written: once a minute is precise enough for the idle
// timeout and for display, and spares a write per request.
const touchEvery = time.Minute

// Store keeps users, sessions and API tokens. It is safe for concurrent
// use; set its fields before the first call.
type Store struct {
	db *sqlx.DB

	// Now is the clock; tests move it to expire sessions and tokens.
	Now func() time.Time
	// IdleTimeout ends a session unused for that long.
	IdleTimeout time.Duration
	// MaxAge ends a session that long after sign-in, used or not.
	MaxAge time.Duration
	// Hash are the Argon2id parameters of new password hashes.
	Hash HashParams

	hasherOnce sync.Once
	h          *hasher
}

// NewStore returns a Store on db, a pool opened with database.Open, with
// the default lifetimes and hash parameters.
func NewStore(db *sqlx.DB) *Store {
	return &Store{
		db:          db,
		Now:         time.Now,
		IdleTimeout: DefaultIdleTimeout,
		MaxAge:      DefaultMaxAge,
		Hash:        DefaultHashParams,
	}
}

func (s *Store) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

func (s *Store) hasher() *hasher {
	s.hasherOnce.Do(func() { s.h = newHasher(s.Hash) })
	return s.h
}

// User is a local account.
type User struct {
	ID        int64     `db:"id" json:"id"`
	Username  string    `db:"username" json:"username"`
	Disabled  bool      `db:"disabled" json:"disabled"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`

	passwordHash string
}

// HasPassword reports whether the user can sign in with a password: an
// account created at a sign-in through the identity provider has none
// until an admin sets one.
func (u *User) HasPassword() bool { return u.passwordHash != "" }

// userRow is User as stored, with the password hash.
type userRow struct {
	User
	PasswordHash string `db:"password_hash"`
}

func (r *userRow) user() *User {
	u := r.User
	u.passwordHash = r.PasswordHash
	return &u
}

const userColumns = `id, username, password_hash, disabled, created_at, updated_at`

// joinedUserColumns reads a user joined as u into a field U userRow.
const joinedUserColumns = `u.id AS "u.id", u.username AS "u.username", u.password_hash AS "u.password_hash",
	u.disabled AS "u.disabled", u.created_at AS "u.created_at", u.updated_at AS "u.updated_at"`

// CreateUser creates an enabled account. Invalid names and passwords give
// a *errs.Validation ("username", "password"); a taken name errs.ErrConflict.
func (s *Store) CreateUser(ctx context.Context, actor audit.Actor, username, password string) (*User, error) {
	var v errs.Validation
	// User names follow the app name rule, which keeps them safe as role
	// subjects.
	if p := names.Problem(username); p != "" {
		v.Add("username", p)
	}
	if p := PasswordProblem(password); p != "" {
		v.Add("password", p)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	hash, err := s.hasher().hash(ctx, password)
	if err != nil {
		return nil, err
	}
	u := &User{Username: username, CreatedAt: s.now()}
	u.UpdatedAt = u.CreatedAt
	err = database.InTx(ctx, s.db, func(tx *database.Tx) error {
		id, err := database.Insert(ctx, tx, `INSERT INTO users (username, password_hash, disabled, created_at, updated_at)
			VALUES (?, ?, FALSE, ?, ?)`, username, hash, u.CreatedAt, u.UpdatedAt)
		if database.IsDuplicate(err) {
			return errs.Conflictf("a user named %q already exists", username)
		}
		if err != nil {
			return fmt.Errorf("insert user %q: %w", username, err)
		}
		u.ID = id
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "user.create", ObjectType: "user", ObjectName: username, After: audit.Snapshot(u),
		})
	})
	if err != nil {
		return nil, err
	}
	u.passwordHash = hash
	return u, nil
}

// SetPassword gives the user named username a new password, ends every
// session of theirs and revokes every API token of theirs, so that
// whoever knew the old password, or made a token with it, is locked out.
func (s *Store) SetPassword(ctx context.Context, actor audit.Actor, username, password string) error {
	if p := PasswordProblem(password); p != "" {
		return errs.Invalid("password", p)
	}
	hash, err := s.hasher().hash(ctx, password)
	if err != nil {
		return err
	}
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		u, err := userBy(ctx, tx, "username", username, true)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ?, updated_at = ? WHERE id = ?`,
			hash, s.now(), u.ID); err != nil {
			return fmt.Errorf("set password of %q: %w", username, database.Translate(err))
		}
		if err := endSessions(ctx, tx, u.ID); err != nil {
			return err
		}
		n, err := revokeTokens(ctx, tx, u.ID, s.now())
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "user.password", ObjectType: "user", ObjectName: u.Username,
			Detail: fmt.Sprintf("password changed; sessions ended; %d API tokens revoked", n),
		})
	})
}

// ChangePassword is a user's change of their own password, proven by the
// current one. A wrong current password (or a disabled account) is
// errs.ErrUnauthenticated; an unacceptable new one a *errs.Validation
// ("new_password"). Every session of the user but keep (the session the
// change is made from) ends; API tokens stay, since the user made them
// and can revoke any of them. The change is audited ("user.password").
func (s *Store) ChangePassword(ctx context.Context, actor audit.Actor, userID int64, current, next, keep string) error {
	if p := PasswordProblem(next); p != "" {
		return errs.Invalid("new_password", p)
	}
	u, err := userBy(ctx, s.db, "id", userID, false)
	if err != nil {
		return err
	}
	h := s.hasher()
	if len(current) > MaxPassword {
		return errWrongPassword
	}
	ok, _, err := h.verify(ctx, current, u.passwordHash)
	if err != nil {
		return err
	}
	if !ok || u.Disabled {
		return errWrongPassword
	}
	hash, err := h.hash(ctx, next)
	if err != nil {
		return err
	}
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		// Only over the hash just checked: a password changed meanwhile
		// (by an admin's reset, or another tab) is not overwritten.
		res, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ?, updated_at = ?
			WHERE id = ? AND password_hash = ? AND NOT disabled`, hash, s.now(), u.ID, u.passwordHash)
		if err != nil {
			return fmt.Errorf("change password of %q: %w", u.Username, database.Translate(err))
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errs.Conflictf("your password was changed or your account disabled meanwhile; sign in again")
		}
		res, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ? AND id <> ?`, u.ID, secrets.Digest(keep))
		if err != nil {
			return fmt.Errorf("end other sessions of %q: %w", u.Username, database.Translate(err))
		}
		ended, _ := res.RowsAffected()
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "user.password", ObjectType: "user", ObjectName: u.Username,
			Detail: fmt.Sprintf("changed by the user; %d other sessions ended; API tokens kept", ended),
		})
	})
}

// SetDisabled disables or enables the account named username. Disabling
// ends its sessions and revokes its API tokens: enabling it again brings
// none of them back.
func (s *Store) SetDisabled(ctx context.Context, actor audit.Actor, username string, disabled bool) error {
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		u, err := userBy(ctx, tx, "username", username, true)
		if err != nil {
			return err
		}
		if u.Disabled == disabled {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET disabled = ?, updated_at = ? WHERE id = ?`,
			disabled, s.now(), u.ID); err != nil {
			return fmt.Errorf("update user %q: %w", username, database.Translate(err))
		}
		action, detail := "user.enable", ""
		if disabled {
			action = "user.disable"
			if err := endSessions(ctx, tx, u.ID); err != nil {
				return err
			}
			n, err := revokeTokens(ctx, tx, u.ID, s.now())
			if err != nil {
				return err
			}
			detail = fmt.Sprintf("sessions ended; %d API tokens revoked", n)
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: action, ObjectType: "user", ObjectName: u.Username,
			Before: audit.Snapshot(map[string]bool{"disabled": u.Disabled}),
			After:  audit.Snapshot(map[string]bool{"disabled": disabled}),
			Detail: detail,
		})
	})
}

// Authenticate returns the enabled user whose name and password these are.
// Any failure, unknown name, wrong password or disabled account, is the
// same errs.ErrUnauthenticated and takes about the same time. Stored
// hashes made with other parameters than the store's are upgraded.
func (s *Store) Authenticate(ctx context.Context, username, password string) (*User, error) {
	username = strings.ToLower(strings.TrimSpace(username))
	h := s.hasher()
	if !names.Valid(username) || len(password) > MaxPassword {
		if err := h.burn(ctx, password[:min(len(password), MaxPassword)]); err != nil {
			return nil, err
		}
		return nil, errWrongPassword
	}
	u, err := userBy(ctx, s.db, "username", username, false)
	if errors.Is(err, errs.ErrNotFound) {
		if err := h.burn(ctx, password); err != nil {
			return nil, err
		}
		return nil, errWrongPassword
	}
	if err != nil {
		return nil, err
	}
	ok, outdated, err := h.verify(ctx, password, u.passwordHash)
	if err != nil {
		return nil, err
	}
	if !ok || u.Disabled {
		return nil, errWrongPassword
	}
	if outdated {
		s.rehash(ctx, u, password)
	}
	return u, nil
}

var errWrongPassword = fmt.Errorf("wrong user name or password: %w", errs.ErrUnauthenticated)

// rehash replaces u's password hash with one made with the current
// parameters. A failure is not the sign-in's: the old hash still works.
func (s *Store) rehash(ctx context.Context, u *User, password string) {
	hash, err := s.hasher().hash(ctx, password)
	if err != nil {
		return
	}
	// Only if unchanged since it was read: never undo a password change.
	_, _ = s.db.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?`,
		hash, u.ID, u.passwordHash)
}

// User returns the user with id, or an error matching errs.ErrNotFound.
func (s *Store) User(ctx context.Context, id int64) (*User, error) {
	return userBy(ctx, s.db, "id", id, false)
}

// UserByName returns the user named username, or an error matching
// errs.ErrNotFound.
func (s *Store) UserByName(ctx context.Context, username string) (*User, error) {
	return userBy(ctx, s.db, "username", username, false)
}

// ListUsers returns every user ordered by name.
func (s *Store) ListUsers(ctx context.Context) ([]*User, error) {
	var rows []userRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+userColumns+` FROM users ORDER BY username`); err != nil {
		return nil, fmt.Errorf("list users: %w", database.Translate(err))
	}
	out := make([]*User, 0, len(rows))
	for i := range rows {
		out = append(out, rows[i].user())
	}
	return out, nil
}

// MaxNames bounds the names Names returns.
const MaxNames = 50

// Names returns the names of enabled users starting with prefix (case
// does not matter), in order, at most limit of them (MaxNames when 0 or
// more). It is what a member picker may show any signed-in user: user
// names are not secret in Sluice (see docs/console.md), everything else
// about an account is.
func (s *Store) Names(ctx context.Context, prefix string, limit int) ([]string, error) {
	if limit <= 0 || limit > MaxNames {
		limit = MaxNames
	}
	prefix = strings.ToLower(strings.TrimSpace(prefix))
	out := []string{}
	if prefix != "" && !names.Valid(prefix) && !validPrefix(prefix) {
		return out, nil
	}
	if err := s.db.SelectContext(ctx, &out, `SELECT username FROM users
		WHERE disabled = FALSE AND username LIKE ? ESCAPE '!' ORDER BY username LIMIT ?`,
		database.LikePrefix(prefix), limit); err != nil {
		return nil, fmt.Errorf("list user names: %w", database.Translate(err))
	}
	return out, nil
}

// validPrefix reports whether p can start a user name: a name cut short may
// end with a character a whole name cannot (a dash).
func validPrefix(p string) bool { return names.Valid(p + "a") }

// userBy reads one user by column ("id" or "username"); lock takes a row
// lock for a change.
func userBy(ctx context.Context, q sqlx.QueryerContext, column string, value any, lock bool) (*User, error) {
	if name, ok := value.(string); ok && !names.Valid(name) {
		return nil, fmt.Errorf("user %q: %w", name, errs.ErrNotFound)
	}
	query := `SELECT ` + userColumns + ` FROM users WHERE ` + column + ` = ?`
	if lock {
		query += ` FOR UPDATE`
	}
	var r userRow
	err := sqlx.GetContext(ctx, q, &r, query, value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("user %v: %w", value, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read user %v: %w", value, database.Translate(err))
	}
	return r.user(), nil
}
