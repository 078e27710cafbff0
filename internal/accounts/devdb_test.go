package accounts_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/migrations"
)

// TestEmbeddedEngine runs users, sessions and tokens on the in-process
// engine of -dev mode, through its single connection.
func TestEmbeddedEngine(t *testing.T) {
	dsn, stop, err := devdb.Start(ctx)
	must(t, err)
	t.Cleanup(stop)
	must(t, migrations.Up(dsn))
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	must(t, err)
	defer db.Close()
	s := accounts.NewStore(db)
	s.Hash = fast

	u, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	if _, err := s.CreateUser(ctx, admin, "alice", pw); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate user = %v", err)
	}
	_, err = s.Authenticate(ctx, "alice", pw)
	must(t, err)
	token, err := s.NewSession(ctx, u.ID, "127.0.0.1", "test")
	must(t, err)
	if _, got, err := s.Session(ctx, token); err != nil || got.Username != "alice" {
		t.Fatalf("Session = %+v, %v", got, err)
	}
	plain, tok, err := s.CreateToken(ctx, admin, u.ID, "ci", nil)
	must(t, err)
	if got, user, err := s.AuthenticateToken(ctx, plain); err != nil || got.ID != tok.ID || user.ID != u.ID {
		t.Fatalf("AuthenticateToken = %+v, %+v, %v", got, user, err)
	}
	must(t, s.RevokeToken(ctx, admin, u.ID, tok.ID))
	must(t, s.SetPassword(ctx, admin, "alice", "another long secret"))
	if _, _, err := s.Session(ctx, token); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("session after password change = %v", err)
	}
	must(t, s.SetDisabled(ctx, admin, "alice", true))
	if _, err := s.Authenticate(ctx, "alice", "another long secret"); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("disabled = %v", err)
	}
}
