// Package apptokens holds the credentials of calling apps: secrets that
// let a gateway or a service in any language take tokens through the
// decision service as one app, and do nothing else. Only a SHA-256 digest
// of a secret is stored (secrets are 256 random bits, so a slow hash would
// add nothing but cost on every lookup). Every change bumps the decision
// revision, so decision services notice a new or revoked token at once.
package apptokens

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/bearer"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/secrets"
)

// Prefix starts every app token, so that a leaked one is easy to
// recognise, and to tell from a personal API token.
const Prefix = "sla_"

// ScopeAcquire is the only scope: take tokens, as the token's app.
const ScopeAcquire = "acquire"

// maxSecret bounds what Digest is asked to hash from a request.
const maxSecret = 200

// Token is an app's credential. Its secret is shown once, at creation.
type Token struct {
	ID        int64      `db:"id" json:"id"`
	App       string     `db:"app" json:"app"`
	Name      string     `db:"name" json:"name"`
	Scope     string     `db:"scope" json:"scope"`
	Prefix    string     `db:"prefix" json:"prefix"`
	CreatedBy string     `db:"created_by" json:"created_by"`
	CreatedAt time.Time  `db:"created_at" json:"created_at"`
	ExpiresAt *time.Time `db:"expires_at" json:"expires_at,omitempty"`
	RevokedAt *time.Time `db:"revoked_at" json:"revoked_at,omitempty"`
}

// Active reports whether t can be used at now: neither revoked nor expired.
func (t *Token) Active(now time.Time) bool {
	return secrets.Active(t.RevokedAt, t.ExpiresAt, now)
}

// Credential is what a decision service keeps of an active token.
type Credential struct {
	TokenID   int64
	App       string
	Scope     string
	ExpiresAt *time.Time
}

// Digest is the stored form of a secret: hex SHA-256. It returns "" for
// text that cannot be a secret, so that callers can refuse it unhashed.
func Digest(secret string) string {
	var buf [DigestLen]byte
	return string(AppendDigest(buf[:0], secret))
}

// DigestLen is the length of a digest.
const DigestLen = secrets.DigestLen

// AppendDigest appends Digest(secret) to dst, and nothing for text that
// cannot be a secret (see secrets.AppendDigest).
func AppendDigest(dst []byte, secret string) []byte {
	if !strings.HasPrefix(secret, Prefix) || len(secret) > maxSecret {
		return dst
	}
	return secrets.AppendDigest(dst, secret)
}

// Store keeps app tokens in MySQL. It is safe for concurrent use.
type Store struct {
	db  *sqlx.DB
	now func() time.Time
}

// NewStore returns a Store on db, a pool opened with database.Open.
func NewStore(db *sqlx.DB) *Store {
	return &Store{db: db, now: database.Now}
}

// appTokens is the table of app tokens.
var appTokens = bearer.Table{Name: "app_tokens", Owner: "app_id", Noun: "app token"}

const selectTokens = `SELECT t.id, a.name AS app, t.name, t.scope, t.prefix, t.created_by, t.created_at,
	t.expires_at, t.revoked_at FROM app_tokens t JOIN apps a ON a.id = t.app_id`

// Create makes a token for app and returns its secret, which is not
// stored. expires, if set, must be in the future. An unknown app or a bad
// name gives a *errs.Validation; another active token of the app with the
// same name errs.ErrConflict. The creation is audited, without the secret.
func (s *Store) Create(ctx context.Context, actor audit.Actor, app, name string, expires *time.Time) (string, *Token, error) {
	now := s.now()
	nt, err := secrets.NewToken(Prefix, name, expires, now)
	if err != nil {
		return "", nil, err
	}
	name, secret := nt.Name, nt.Plaintext
	t := &Token{App: app, Name: name, Scope: ScopeAcquire, Prefix: nt.Display, CreatedBy: actor.User, CreatedAt: now, ExpiresAt: nt.ExpiresAt}
	err = database.InTx(ctx, s.db, func(tx *database.Tx) error {
		var appID int64
		err := tx.GetContext(ctx, &appID, `SELECT id FROM apps WHERE name = ?`, app)
		if errors.Is(err, sql.ErrNoRows) {
			return errs.Invalid("app", fmt.Sprintf("unknown app %q", app))
		}
		if err != nil {
			return fmt.Errorf("read app %q: %w", app, database.Translate(err))
		}
		taken, err := appTokens.NameTaken(ctx, tx, appID, name, now)
		if err != nil {
			return err
		}
		if taken {
			return errs.Conflictf("app %q already has an active token named %q; choose another name or revoke it first", app, name)
		}
		if t.ID, err = database.Insert(ctx, tx, `INSERT INTO app_tokens (app_id, name, scope, prefix, token_hash, created_by,
			created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			appID, name, t.Scope, t.Prefix, Digest(secret), t.CreatedBy, t.CreatedAt, t.ExpiresAt); err != nil {
			return fmt.Errorf("insert app token: %w", err)
		}
		if err := descriptors.BumpRevision(ctx, tx); err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "apptoken.create", ObjectType: "apptoken", ObjectName: name, App: app,
			After: audit.Snapshot(t),
		})
	})
	if err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

// List returns every token of app, revoked and expired ones included,
// newest first.
func (s *Store) List(ctx context.Context, app string) ([]*Token, error) {
	out := []*Token{}
	if err := s.db.SelectContext(ctx, &out, selectTokens+` WHERE a.name = ? ORDER BY t.id DESC`, app); err != nil {
		return nil, fmt.Errorf("list app tokens: %w", database.Translate(err))
	}
	return out, nil
}

// Revoke revokes token id of app at once (decision services drop it at
// their next refresh). A token that does not exist, is another app's or is
// already revoked gives errs.ErrNotFound. The revocation is audited.
func (s *Store) Revoke(ctx context.Context, actor audit.Actor, app string, id int64) error {
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		var t Token
		now := s.now()
		if err := appTokens.Revoke(ctx, tx, id, now, &t,
			selectTokens+` WHERE t.id = ? AND a.name = ? AND t.revoked_at IS NULL FOR UPDATE`, id, app); err != nil {
			return err
		}
		if err := descriptors.BumpRevision(ctx, tx); err != nil {
			return err
		}
		before := t
		t.RevokedAt = &now
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "apptoken.revoke", ObjectType: "apptoken", ObjectName: t.Name, App: app,
			Before: audit.Snapshot(before), After: audit.Snapshot(t),
		})
	})
}

// Active returns the credentials of every token not revoked, by digest,
// for the decision services. Expiry is checked by the caller at use, so a
// token expiring between two refreshes stops working on time.
func (s *Store) Active(ctx context.Context) (map[string]Credential, error) {
	var rows []struct {
		ID        int64      `db:"id"`
		App       string     `db:"app"`
		Scope     string     `db:"scope"`
		Hash      string     `db:"token_hash"`
		ExpiresAt *time.Time `db:"expires_at"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT t.id, a.name AS app, t.scope, t.token_hash, t.expires_at
		FROM app_tokens t JOIN apps a ON a.id = t.app_id WHERE t.revoked_at IS NULL`); err != nil {
		return nil, fmt.Errorf("read app tokens: %w", database.Translate(err))
	}
	out := make(map[string]Credential, len(rows))
	for _, r := range rows {
		out[r.Hash] = Credential{TokenID: r.ID, App: r.App, Scope: r.Scope, ExpiresAt: r.ExpiresAt}
	}
	return out, nil
}
