package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/secrets"
)

// Session is a signed-in browser. ID is the SHA-256 (hex) of the token the
// browser holds, never the token itself.
type Session struct {
	ID         string    `db:"id" json:"-"`
	UserID     int64     `db:"user_id" json:"user_id"`
	CreatedAt  time.Time `db:"created_at" json:"created_at"`
	LastSeenAt time.Time `db:"last_seen_at" json:"last_seen_at"`
	ExpiresAt  time.Time `db:"expires_at" json:"expires_at"`
	RemoteAddr string    `db:"remote_addr" json:"remote_addr"`
	UserAgent  string    `db:"user_agent" json:"user_agent"`
}

// maxSecret bounds what is hashed of a presented token; real ones are
// far shorter, and the bound keeps hashing of hostile input cheap.
const maxSecret = 128

// clip makes client-supplied text fit a bounded utf8mb4 column: invalid
// UTF-8 is replaced (the server would reject it) and the text is cut to at
// most n bytes on a rune boundary.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// NewSession starts a session for the user with userID and returns the
// token to hand to the browser (in a cookie). It is never stored.
func (s *Store) NewSession(ctx context.Context, userID int64, addr, userAgent string) (string, error) {
	token, err := secrets.New()
	if err != nil {
		return "", err
	}
	now := s.now()
	_, err = s.db.ExecContext(ctx, `INSERT INTO sessions (id, user_id, created_at, last_seen_at, expires_at, remote_addr, user_agent)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		secrets.Digest(token), userID, now, now, now.Add(s.MaxAge), clip(addr, 64), clip(userAgent, 255))
	if database.IsReferenced(err) || database.IsMissingParent(err) {
		return "", fmt.Errorf("user %d: %w", userID, errs.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("start session: %w", database.Translate(err))
	}
	return token, nil
}

// Session returns the live session of token and its user. A missing,
// expired or idle session, or a disabled user, gives errs.ErrUnauthenticated;
// a session found dead is deleted. Use refreshes the last-seen time, at
// most once a minute.
func (s *Store) Session(ctx context.Context, token string) (*Session, *User, error) {
	if token == "" || len(token) > maxSecret {
		return nil, nil, errNoSession
	}
	id := secrets.Digest(token)
	var row struct {
		Session
		U userRow `db:"u"`
	}
	if err := s.credential(ctx, &row, errNoSession, "session", `SELECT s.id, s.user_id, s.created_at, s.last_seen_at, s.expires_at,
			s.remote_addr, s.user_agent, `+joinedUserColumns+`
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = ?`, id); err != nil {
		return nil, nil, err
	}
	sess, u := &row.Session, row.U.user()
	now := s.now()
	if !now.Before(sess.ExpiresAt) || now.Sub(sess.LastSeenAt) >= s.IdleTimeout || u.Disabled {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
			return nil, nil, fmt.Errorf("end dead session: %w", database.Translate(err))
		}
		return nil, nil, errNoSession
	}
	if now.Sub(sess.LastSeenAt) >= touchEvery {
		if _, err := s.db.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id = ?`, now, id); err != nil {
			return nil, nil, fmt.Errorf("touch session: %w", database.Translate(err))
		}
		sess.LastSeenAt = now
	}
	return sess, u, nil
}

var errNoSession = fmt.Errorf("no live session: %w", errs.ErrUnauthenticated)

// credential reads into row what query selects of a presented secret (a
// session or an API token) joined with its user. No row gives unknown,
// an error of errs.ErrUnauthenticated; what names the credential in
// other errors.
func (s *Store) credential(ctx context.Context, row any, unknown error, what, query string, args ...any) error {
	err := s.db.GetContext(ctx, row, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return unknown
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", what, database.Translate(err))
	}
	return nil
}

// EndSession ends the session of token. Ending a session that does not
// exist (any more) is not an error: signing out twice is harmless.
func (s *Store) EndSession(ctx context.Context, token string) error {
	if token == "" || len(token) > maxSecret {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, secrets.Digest(token)); err != nil {
		return fmt.Errorf("end session: %w", database.Translate(err))
	}
	return nil
}

// EndUserSessions ends every session of the user with userID.
func (s *Store) EndUserSessions(ctx context.Context, userID int64) error {
	return endSessions(ctx, s.db, userID)
}

func endSessions(ctx context.Context, ex sqlx.ExecerContext, userID int64) error {
	if _, err := ex.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
		return fmt.Errorf("end sessions of user %d: %w", userID, database.Translate(err))
	}
	return nil
}

// PurgeSessions deletes sessions that expired or went idle, which Session
// would refuse anyway, and returns how many. Run it now and then so that
// abandoned sessions do not pile up.
func (s *Store) PurgeSessions(ctx context.Context) (int64, error) {
	now := s.now()
	n, err := database.ExecCount(ctx, s.db, `DELETE FROM sessions WHERE expires_at <= ? OR last_seen_at <= ?`,
		now, now.Add(-s.IdleTimeout))
	if err != nil {
		return 0, fmt.Errorf("purge sessions: %w", err)
	}
	return n, nil
}
