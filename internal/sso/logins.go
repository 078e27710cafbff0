package sso

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/oauth2"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/secrets"
)

// LoginLifetime is how long a browser has to come back from the provider.
const LoginLifetime = 10 * time.Minute

// Logins keeps the sign-ins under way in MySQL (oidc_logins), shared by
// every console instance.
type Logins struct {
	db *sqlx.DB
	// Now is the clock; tests move it.
	Now func() time.Time
}

// NewLogins returns the store on db, a pool on a migrated database.
func NewLogins(db *sqlx.DB) *Logins { return &Logins{db: db, Now: time.Now} }

func (l *Logins) now() time.Time { return l.Now().UTC().Truncate(time.Microsecond) }

// Login is one sign-in under way.
type Login struct {
	// State goes to the provider and comes back on the callback.
	State string
	// Browser goes to the browser in a cookie; the callback must carry it.
	Browser string
	// Nonce goes into the ID token.
	Nonce string
	// Verifier is the PKCE secret; its S256 challenge goes to the provider.
	Verifier string
	// Next is the console path to land on.
	Next string
}

// Begin starts a sign-in: fresh state, browser binding, nonce and PKCE
// verifier, stored until LoginLifetime passes or the callback takes them.
// State and Browser are stored as digests only.
func (l *Logins) Begin(ctx context.Context, next string) (Login, error) {
	var in Login
	var err error
	for _, p := range []*string{&in.State, &in.Browser, &in.Nonce} {
		if *p, err = secrets.New(); err != nil {
			return Login{}, err
		}
	}
	in.Verifier, in.Next = oauth2.GenerateVerifier(), next
	now := l.now()
	if _, err := l.db.ExecContext(ctx, `INSERT INTO oidc_logins (state, browser, nonce, verifier, next_path, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, secrets.Digest(in.State), secrets.Digest(in.Browser), in.Nonce, in.Verifier,
		clip(next, 512), now, now.Add(LoginLifetime)); err != nil {
		return Login{}, fmt.Errorf("store sign-in under way: %w", database.Translate(err))
	}
	return in, nil
}

// Reasons a callback's state is refused.
var (
	ErrUnknownState = errors.New("unknown, used or expired state")
	ErrOtherBrowser = errors.New("the state was issued to another browser")
)

// Take consumes the sign-in of state: whatever the outcome, the state is
// good only once. It is refused when unknown, taken before, expired, or
// when browser is not the cookie Begin gave with it.
func (l *Logins) Take(ctx context.Context, state, browser string) (Login, error) {
	if state == "" || len(state) > 128 {
		return Login{}, ErrUnknownState
	}
	id := secrets.Digest(state)
	var row struct {
		Browser  string    `db:"browser"`
		Nonce    string    `db:"nonce"`
		Verifier string    `db:"verifier"`
		Next     string    `db:"next_path"`
		Expires  time.Time `db:"expires_at"`
	}
	err := database.InTx(ctx, l.db, func(tx *database.Tx) error {
		err := tx.GetContext(ctx, &row, `SELECT browser, nonce, verifier, next_path, expires_at FROM oidc_logins
			WHERE state = ? FOR UPDATE`, id)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrUnknownState
		}
		if err != nil {
			return fmt.Errorf("read sign-in under way: %w", database.Translate(err))
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM oidc_logins WHERE state = ?`, id); err != nil {
			return fmt.Errorf("take sign-in under way: %w", database.Translate(err))
		}
		return nil
	})
	if err != nil {
		return Login{}, err
	}
	if !l.now().Before(row.Expires) {
		return Login{}, ErrUnknownState
	}
	if len(browser) > 128 || subtle.ConstantTimeCompare([]byte(secrets.Digest(browser)), []byte(row.Browser)) != 1 {
		return Login{}, ErrOtherBrowser
	}
	return Login{State: state, Browser: browser, Nonce: row.Nonce, Verifier: row.Verifier, Next: row.Next}, nil
}

// Purge deletes sign-ins never finished, and returns how many.
func (l *Logins) Purge(ctx context.Context) (int64, error) {
	n, err := database.ExecCount(ctx, l.db, `DELETE FROM oidc_logins WHERE expires_at <= ?`, l.now())
	if err != nil {
		return 0, fmt.Errorf("purge sign-ins under way: %w", err)
	}
	return n, nil
}
