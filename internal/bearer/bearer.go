// Package bearer holds what the stores of bearer tokens share. Personal
// API tokens (accounts) and app tokens (apptokens) are named and revoked
// by the same rules, each kind in its own table; the secrets themselves
// are made and digested by package secrets.
package bearer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
)

// Table is the MySQL table of one kind of token. Besides its own columns
// it has id, name, expires_at and revoked_at.
type Table struct {
	// Name is the table's name.
	Name string
	// Owner is the column naming whose token a row is.
	Owner string
	// Noun names a token of the kind in errors: "token", "app token".
	Noun string
}

// NameTaken reports whether owner has a token named name that is active at
// now. Names are unique only among active tokens, so that the name of a
// revoked or expired token can be used again.
func (t Table) NameTaken(ctx context.Context, q sqlx.QueryerContext, owner int64, name string, now time.Time) (bool, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT COUNT(*) FROM `+t.Name+`
		WHERE `+t.Owner+` = ? AND name = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
		owner, name, now); err != nil {
		return false, fmt.Errorf("check token names: %w", database.Translate(err))
	}
	return n > 0, nil
}

// NotFound is the error for token id, missing or not the caller's.
func (t Table) NotFound(id int64) error {
	return fmt.Errorf("%s %d: %w", t.Noun, id, errs.ErrNotFound)
}

// Revoke revokes token id at now, in tx. lock first reads the token into
// dst and locks its row: it selects token id only while it is not revoked
// (and only if it is the caller's, where that matters), so that a token
// revoked already, or another's, gives errs.ErrNotFound.
func (t Table) Revoke(ctx context.Context, tx *database.Tx, id int64, now time.Time, dst any, lock string, args ...any) error {
	err := tx.GetContext(ctx, dst, lock, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return t.NotFound(id)
	}
	if err != nil {
		return fmt.Errorf("read %s %d: %w", t.Noun, id, database.Translate(err))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+t.Name+` SET revoked_at = ? WHERE id = ?`, now, id); err != nil {
		return fmt.Errorf("revoke %s %d: %w", t.Noun, id, database.Translate(err))
	}
	return nil
}
