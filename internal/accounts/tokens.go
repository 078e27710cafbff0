package accounts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/bearer"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/secrets"
)

// TokenPrefix starts every API token, so that a leaked one is easy to
// recognise (and to scan for in code).
const TokenPrefix = "slc_"

// Token is a personal API token. The secret itself is shown once, at
// creation; Prefix is its first characters, to tell tokens apart.
type Token struct {
	ID         int64      `db:"id" json:"id"`
	UserID     int64      `db:"user_id" json:"user_id"`
	Name       string     `db:"name" json:"name"`
	Prefix     string     `db:"prefix" json:"prefix"`
	CreatedAt  time.Time  `db:"created_at" json:"created_at"`
	ExpiresAt  *time.Time `db:"expires_at" json:"expires_at,omitempty"`
	LastUsedAt *time.Time `db:"last_used_at" json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `db:"revoked_at" json:"revoked_at,omitempty"`
}

// Active reports whether t can be used at now: neither revoked nor expired.
func (t *Token) Active(now time.Time) bool {
	return secrets.Active(t.RevokedAt, t.ExpiresAt, now)
}

const tokenColumns = `id, user_id, name, prefix, created_at, expires_at, last_used_at, revoked_at`

// apiTokens is the table of personal API tokens.
var apiTokens = bearer.Table{Name: "api_tokens", Owner: "user_id", Noun: "token"}

// CreateToken creates an API token for the user with userID and returns
// its secret, shown to the user once and never stored. expires, if set,
// must be in the future. A name already used by another active token of
// the user gives errs.ErrConflict. The creation is audited, without the
// secret.
func (s *Store) CreateToken(ctx context.Context, actor audit.Actor, userID int64, name string, expires *time.Time) (string, *Token, error) {
	now := s.now()
	nt, err := secrets.NewToken(TokenPrefix, name, expires, now)
	if err != nil {
		return "", nil, err
	}
	name, plaintext := nt.Name, nt.Plaintext
	t := &Token{UserID: userID, Name: name, Prefix: nt.Display, CreatedAt: now, ExpiresAt: nt.ExpiresAt}
	err = database.InTx(ctx, s.db, func(tx *database.Tx) error {
		u, err := userBy(ctx, tx, "id", userID, true)
		if err != nil {
			return err
		}
		taken, err := apiTokens.NameTaken(ctx, tx, userID, name, now)
		if err != nil {
			return err
		}
		if taken {
			return errs.Conflictf("you already have an active token named %q; choose another name or revoke it first", name)
		}
		if t.ID, err = database.Insert(ctx, tx, `INSERT INTO api_tokens (user_id, name, prefix, token_hash, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, userID, name, t.Prefix, secrets.Digest(plaintext), t.CreatedAt, t.ExpiresAt); err != nil {
			return fmt.Errorf("insert token: %w", err)
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "token.create", ObjectType: "token", ObjectName: name,
			After: audit.Snapshot(t), Detail: "for user " + u.Username,
		})
	})
	if err != nil {
		return "", nil, err
	}
	return plaintext, t, nil
}

// Tokens returns every token of the user with userID, revoked and expired
// ones included, newest first.
func (s *Store) Tokens(ctx context.Context, userID int64) ([]*Token, error) {
	out := []*Token{}
	if err := s.db.SelectContext(ctx, &out, `SELECT `+tokenColumns+` FROM api_tokens
		WHERE user_id = ? ORDER BY id DESC`, userID); err != nil {
		return nil, fmt.Errorf("list tokens: %w", database.Translate(err))
	}
	return out, nil
}

// RevokeToken revokes the token id of the user with userID at once. A
// token that does not exist, is another user's or is already revoked gives
// errs.ErrNotFound. The revocation is audited, naming the token's owner:
// admins revoke other users' tokens with it (see TokensOf).
func (s *Store) RevokeToken(ctx context.Context, actor audit.Actor, userID, id int64) error {
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		u, err := userBy(ctx, tx, "id", userID, false)
		if err != nil {
			return apiTokens.NotFound(id)
		}
		var t Token
		now := s.now()
		if err := apiTokens.Revoke(ctx, tx, id, now, &t, `SELECT `+tokenColumns+` FROM api_tokens
			WHERE id = ? AND user_id = ? AND revoked_at IS NULL FOR UPDATE`, id, userID); err != nil {
			return err
		}
		before := t
		t.RevokedAt = &now
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "token.revoke", ObjectType: "token", ObjectName: t.Name,
			Before: audit.Snapshot(before), After: audit.Snapshot(t), Detail: "of user " + u.Username,
		})
	})
}

// TokensOf returns the user named username and every token of theirs,
// newest first, for an admin's view of another user's tokens (revoke them
// with RevokeToken and the user's ID). An unknown user gives
// errs.ErrNotFound.
func (s *Store) TokensOf(ctx context.Context, username string) (*User, []*Token, error) {
	u, err := s.UserByName(ctx, username)
	if err != nil {
		return nil, nil, err
	}
	ts, err := s.Tokens(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	return u, ts, nil
}

// revokeTokens revokes every token of the user with userID not revoked yet
// and returns how many, inside tx, the change that calls for it.
func revokeTokens(ctx context.Context, tx *database.Tx, userID int64, now time.Time) (int64, error) {
	n, err := database.ExecCount(ctx, tx, `UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, now, userID)
	if err != nil {
		return 0, fmt.Errorf("revoke tokens of user %d: %w", userID, err)
	}
	return n, nil
}

// AuthenticateToken returns the token whose secret plaintext is and its
// user. Unknown, malformed, revoked and expired tokens and disabled users
// all give errs.ErrUnauthenticated. Use refreshes the last-used time, at
// most once a minute.
func (s *Store) AuthenticateToken(ctx context.Context, plaintext string) (*Token, *User, error) {
	if !strings.HasPrefix(plaintext, TokenPrefix) || len(plaintext) > maxSecret {
		return nil, nil, errBadToken
	}
	var row struct {
		Token
		U userRow `db:"u"`
	}
	if err := s.credential(ctx, &row, errBadToken, "token", `SELECT t.id, t.user_id, t.name, t.prefix, t.created_at, t.expires_at,
			t.last_used_at, t.revoked_at, `+joinedUserColumns+`
		FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?`, secrets.Digest(plaintext)); err != nil {
		return nil, nil, err
	}
	t, u := &row.Token, row.U.user()
	now := s.now()
	if !t.Active(now) || u.Disabled {
		return nil, nil, errBadToken
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= touchEvery {
		if _, err := s.db.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, now, t.ID); err != nil {
			return nil, nil, fmt.Errorf("touch token: %w", database.Translate(err))
		}
		t.LastUsedAt = &now
	}
	return t, u, nil
}

var errBadToken = fmt.Errorf("invalid, revoked or expired API token: %w", errs.ErrUnauthenticated)
