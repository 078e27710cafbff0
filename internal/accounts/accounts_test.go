package accounts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	ctx   = context.Background()
	admin = audit.Actor{User: "root", Via: "cli"}
)

// fast are cheap hash parameters: tests check behaviour, not cost.
var fast = accounts.HashParams{Time: 1, Memory: 1024, Threads: 1}

// clock is a settable time source for Store.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newStore(t *testing.T) (*sqlx.DB, *accounts.Store, *clock) {
	t.Helper()
	db := testenv.MySQL(t)
	s := accounts.NewStore(db)
	s.Hash = fast
	c := &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	s.Now = c.Now
	return db, s, c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func lastAudit(t *testing.T, db *sqlx.DB) audit.Entry {
	t.Helper()
	page, err := audit.NewStore(db).List(ctx, audit.Filter{Limit: 1})
	if err != nil || len(page.Entries) != 1 {
		t.Fatalf("last audit entry: %+v, %v", page, err)
	}
	return page.Entries[0]
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

const pw = "correct horse battery"

func TestCreateUser(t *testing.T) {
	db, s, _ := newStore(t)
	u, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	if u.ID == 0 || u.Username != "alice" || u.Disabled || u.CreatedAt.IsZero() {
		t.Fatalf("created %+v", u)
	}
	var hash string
	must(t, db.GetContext(ctx, &hash, `SELECT password_hash FROM users WHERE id = ?`, u.ID))
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=1024,t=1,p=1$") || strings.Contains(hash, pw) {
		t.Fatalf("stored hash %q", hash)
	}
	if e := lastAudit(t, db); e.Action != "user.create" || e.ObjectName != "alice" || e.Actor != "root (cli)" ||
		strings.Contains(e.After, "argon2") || !strings.Contains(e.After, `"username":"alice"`) {
		t.Fatalf("audit %+v", e)
	}

	if _, err := s.CreateUser(ctx, admin, "alice", pw); !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate = %v", err)
	}
	tests := []struct {
		user, pass string
		fields     []string
	}{
		{"", pw, []string{"username"}},
		{"Alice", pw, []string{"username"}},
		{"-bob", pw, []string{"username"}},
		{"bob smith", pw, []string{"username"}},
		{"b*", pw, []string{"username"}},
		{strings.Repeat("b", 64), pw, []string{"username"}},
		{"bob", "short", []string{"password"}},
		{"bob", "123456789", []string{"password"}},
		{"bob", strings.Repeat("x", 201), []string{"password"}},
		{"bob", strings.Repeat("é", 101), []string{"password"}}, // 101 characters, 202 bytes
		{"BOB", "", []string{"username", "password"}},
	}
	for _, tt := range tests {
		_, err := s.CreateUser(ctx, admin, tt.user, tt.pass)
		v := errs.Fields(err)
		if v == nil || len(v.Fields) != len(tt.fields) {
			t.Errorf("CreateUser(%q, %q) = %v, want invalid %v", tt.user, tt.pass, err, tt.fields)
			continue
		}
		for _, f := range tt.fields {
			if v.For(f) == "" {
				t.Errorf("CreateUser(%q, %q): no reason for %s in %v", tt.user, tt.pass, f, err)
			}
		}
	}
	// The limits themselves are fine: 10 characters (here 20 bytes), 200 bytes.
	_, err = s.CreateUser(ctx, admin, "b.o_b-2", strings.Repeat("é", 10))
	must(t, err)
	_, err = s.CreateUser(ctx, admin, strings.Repeat("c", 63), strings.Repeat("x", 200))
	must(t, err)

	got, err := s.User(ctx, u.ID)
	must(t, err)
	if got.Username != "alice" || got.ID != u.ID {
		t.Fatalf("User(%d) = %+v", u.ID, got)
	}
	if got, err := s.UserByName(ctx, "alice"); err != nil || got.ID != u.ID {
		t.Fatalf("UserByName = %+v, %v", got, err)
	}
	for _, name := range []string{"ghost", "", "a'b", strings.Repeat("x", 300)} {
		if _, err := s.UserByName(ctx, name); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("UserByName(%q) = %v, want not found", name, err)
		}
	}
	if _, err := s.User(ctx, 99999); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("User(99999) = %v", err)
	}
	list, err := s.ListUsers(ctx)
	must(t, err)
	if len(list) != 3 || list[0].Username != "alice" || list[1].Username != "b.o_b-2" {
		t.Fatalf("ListUsers = %+v", list)
	}
}

func TestAuthenticate(t *testing.T) {
	db, s, _ := newStore(t)
	u, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	got, err := s.Authenticate(ctx, "alice", pw)
	must(t, err)
	if got.ID != u.ID {
		t.Fatalf("Authenticate = %+v", got)
	}
	// People type their name with capitals or spaces around it.
	if _, err := s.Authenticate(ctx, "  Alice ", pw); err != nil {
		t.Fatalf("Authenticate with a capitalised name = %v", err)
	}
	for _, tt := range []struct{ user, pass string }{
		{"alice", pw + "x"},
		{"alice", ""},
		{"alice", strings.ToUpper(pw)},
		{"ghost", pw},
		{"", pw},
		{"al ice", pw},
		{"alice", strings.Repeat("x", 10000)},
		{strings.Repeat("a", 10000), pw},
	} {
		if _, err := s.Authenticate(ctx, tt.user, tt.pass); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Errorf("Authenticate(%.20q, %.20q) = %v, want unauthenticated", tt.user, tt.pass, err)
		}
	}
	must(t, s.SetDisabled(ctx, admin, "alice", true))
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("disabled user signed in: %v", err)
	}
	if e := lastAudit(t, db); e.Action != "user.disable" || e.ObjectName != "alice" {
		t.Fatalf("audit %+v", e)
	}
	must(t, s.SetDisabled(ctx, admin, "alice", false))
	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Fatalf("re-enabled user: %v", err)
	}
	if err := s.SetDisabled(ctx, admin, "ghost", true); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("SetDisabled(ghost) = %v", err)
	}
	// A corrupted hash matches no password, without an error.
	_, err = db.ExecContext(ctx, `UPDATE users SET password_hash = '$argon2id$v=19$m=99999999,t=1,p=1$AAAA$AAAA' WHERE id = ?`, u.ID)
	must(t, err)
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("corrupted hash = %v", err)
	}
}

// TestDefaultHash checks the production parameters once: a slow, salted
// Argon2id hash, and time spent on unknown user names too.
func TestDefaultHash(t *testing.T) {
	db := testenv.MySQL(t)
	s := accounts.NewStore(db)
	u, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	var hash string
	must(t, db.GetContext(ctx, &hash, `SELECT password_hash FROM users WHERE id = ?`, u.ID))
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=65536,t=1,p=2$") {
		t.Fatalf("stored hash %q", hash)
	}
	// Timing is logged, not asserted: the machine is shared. Both paths
	// run one hash with the same parameters.
	var known, unknown time.Duration
	for range 3 {
		start := time.Now()
		_, err = s.Authenticate(ctx, "alice", pw)
		must(t, err)
		known += time.Since(start)
		start = time.Now()
		if _, err := s.Authenticate(ctx, "ghost", pw); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Fatal(err)
		}
		unknown += time.Since(start)
	}
	t.Logf("sign-in of a known user %v, of an unknown one %v (mean of 3)", known/3, unknown/3)
}

// TestRehash: a hash made with other parameters is replaced at sign-in.
func TestRehash(t *testing.T) {
	db, s, _ := newStore(t)
	_, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	s2 := accounts.NewStore(db)
	s2.Hash = accounts.HashParams{Time: 2, Memory: 2048, Threads: 1}
	_, err = s2.Authenticate(ctx, "alice", pw)
	must(t, err)
	var hash string
	must(t, db.GetContext(ctx, &hash, `SELECT password_hash FROM users WHERE username = 'alice'`))
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=2048,t=2,p=1$") {
		t.Fatalf("hash not upgraded: %q", hash)
	}
	for _, st := range []*accounts.Store{s, s2} {
		if _, err := st.Authenticate(ctx, "alice", pw); err != nil {
			t.Fatalf("after rehash: %v", err)
		}
	}
}

func TestSetPassword(t *testing.T) {
	db, s, _ := newStore(t)
	u, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	token, err := s.NewSession(ctx, u.ID, "192.0.2.7", "test")
	must(t, err)
	must(t, s.SetPassword(ctx, admin, "alice", "a brand new secret"))
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("old password still works: %v", err)
	}
	if _, err := s.Authenticate(ctx, "alice", "a brand new secret"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if _, _, err := s.Session(ctx, token); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("session survived a password change: %v", err)
	}
	if e := lastAudit(t, db); e.Action != "user.password" || e.ObjectName != "alice" ||
		strings.Contains(e.Before+e.After+e.Detail, "secret") {
		t.Fatalf("audit %+v", e)
	}
	if err := s.SetPassword(ctx, admin, "alice", "short"); errs.Fields(err).For("password") == "" {
		t.Fatalf("short password = %v", err)
	}
	if err := s.SetPassword(ctx, admin, "ghost", "long enough secret"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown user = %v", err)
	}
}

func TestSessions(t *testing.T) {
	db, s, c := newStore(t)
	u, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	token, err := s.NewSession(ctx, u.ID, "192.0.2.7:5555", strings.Repeat("agent\xff ", 100))
	must(t, err)
	if len(token) != 43 || strings.ContainsAny(token, "+/=") {
		t.Fatalf("token %q is not 32 bytes of base64url", token)
	}
	var stored accounts.Session
	must(t, db.GetContext(ctx, &stored, `SELECT * FROM sessions`))
	if stored.ID != sha(token) || stored.UserID != u.ID || len(stored.UserAgent) > 255 || len(stored.UserAgent) < 250 ||
		!utf8.ValidString(stored.UserAgent) ||
		!stored.ExpiresAt.Equal(c.Now().Add(12*time.Hour)) {
		t.Fatalf("stored session %+v", stored)
	}
	other, err := s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	if other == token {
		t.Fatal("two sessions got the same token")
	}

	sess, got, err := s.Session(ctx, token)
	must(t, err)
	if got.ID != u.ID || sess.UserID != u.ID || sess.RemoteAddr != "192.0.2.7:5555" {
		t.Fatalf("Session = %+v, %+v", sess, got)
	}
	lastSeen := func() time.Time {
		var ts time.Time
		must(t, db.GetContext(ctx, &ts, `SELECT last_seen_at FROM sessions WHERE id = ?`, sha(token)))
		return ts
	}
	// Use within a minute does not write; after a minute it does.
	created := lastSeen()
	c.Add(30 * time.Second)
	_, _, err = s.Session(ctx, token)
	must(t, err)
	if !lastSeen().Equal(created) {
		t.Fatal("last_seen_at written within a minute")
	}
	c.Add(29 * time.Minute)
	_, _, err = s.Session(ctx, token)
	must(t, err)
	if !lastSeen().Equal(c.Now()) {
		t.Fatalf("last_seen_at %v, want %v", lastSeen(), c.Now())
	}
	// Idle for 30 minutes: over, and the row is gone.
	c.Add(30 * time.Minute)
	if _, _, err := s.Session(ctx, token); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("idle session = %v", err)
	}
	var n int
	must(t, db.GetContext(ctx, &n, `SELECT COUNT(*) FROM sessions WHERE id = ?`, sha(token)))
	if n != 0 {
		t.Fatal("idle session not deleted")
	}

	// Kept busy, a session still ends 12 hours after sign-in.
	c.Add(24 * time.Hour)
	busy, err := s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	for range 35 {
		c.Add(20 * time.Minute)
		if _, _, err := s.Session(ctx, busy); err != nil {
			t.Fatalf("busy session ended early at %v: %v", c.Now(), err)
		}
	}
	c.Add(20 * time.Minute) // 12 h
	if _, _, err := s.Session(ctx, busy); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("session older than 12 h = %v", err)
	}

	// Configurable lifetimes.
	s.IdleTimeout = time.Minute
	short, err := s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	c.Add(time.Minute)
	if _, _, err := s.Session(ctx, short); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("session past a 1 minute idle timeout = %v", err)
	}
	s.IdleTimeout = accounts.DefaultIdleTimeout

	// Sign-out, disabling and unknown tokens.
	a, err := s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	must(t, s.EndSession(ctx, a))
	must(t, s.EndSession(ctx, a))
	for _, tok := range []string{a, "", "nope", strings.Repeat("x", 1000), token + "x"} {
		if _, _, err := s.Session(ctx, tok); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Errorf("Session(%.20q) = %v", tok, err)
		}
	}
	b1, err := s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	b2, err := s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	bob, err := s.CreateUser(ctx, admin, "bob", pw)
	must(t, err)
	bobs, err := s.NewSession(ctx, bob.ID, "", "")
	must(t, err)
	must(t, s.EndUserSessions(ctx, u.ID))
	for _, tok := range []string{b1, b2} {
		if _, _, err := s.Session(ctx, tok); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Errorf("session after EndUserSessions = %v", err)
		}
	}
	if _, _, err := s.Session(ctx, bobs); err != nil {
		t.Fatalf("another user's session ended: %v", err)
	}
	must(t, s.SetDisabled(ctx, admin, "bob", true))
	if _, _, err := s.Session(ctx, bobs); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("disabled user's session = %v", err)
	}
	if _, err := s.NewSession(ctx, 99999, "", ""); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("session of a missing user = %v", err)
	}
}

func TestPurgeSessions(t *testing.T) {
	db, s, c := newStore(t)
	u, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	_, err = s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	c.Add(20 * time.Minute)
	live, err := s.NewSession(ctx, u.ID, "", "")
	must(t, err)
	c.Add(15 * time.Minute)
	n, err := s.PurgeSessions(ctx)
	must(t, err)
	if n != 1 {
		t.Fatalf("purged %d sessions, want 1", n)
	}
	if _, _, err := s.Session(ctx, live); err != nil {
		t.Fatalf("live session purged: %v", err)
	}
	var left int
	must(t, db.GetContext(ctx, &left, `SELECT COUNT(*) FROM sessions`))
	if left != 1 {
		t.Fatalf("%d sessions left", left)
	}
}

func TestTokens(t *testing.T) {
	db, s, c := newStore(t)
	alice, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	bob, err := s.CreateUser(ctx, admin, "bob", pw)
	must(t, err)
	me := audit.Actor{User: "alice"}

	plain, tok, err := s.CreateToken(ctx, me, alice.ID, " ci deploys ", nil)
	must(t, err)
	if !strings.HasPrefix(plain, "slc_") || len(plain) != 47 || tok.Prefix != plain[:12] || tok.Name != "ci deploys" ||
		tok.UserID != alice.ID || tok.ExpiresAt != nil || tok.LastUsedAt != nil {
		t.Fatalf("CreateToken = %q, %+v", plain, tok)
	}
	var hash string
	must(t, db.GetContext(ctx, &hash, `SELECT token_hash FROM api_tokens WHERE id = ?`, tok.ID))
	if hash != sha(plain) {
		t.Fatal("stored token hash is not the SHA-256 of the token")
	}
	if e := lastAudit(t, db); e.Action != "token.create" || e.ObjectName != "ci deploys" ||
		strings.Contains(e.Before+e.After+e.Detail, plain[4:]) || !strings.Contains(e.Detail, "alice") {
		t.Fatalf("audit %+v", e)
	}

	got, user, err := s.AuthenticateToken(ctx, plain)
	must(t, err)
	if got.ID != tok.ID || user.ID != alice.ID || got.LastUsedAt == nil || !got.LastUsedAt.Equal(c.Now()) {
		t.Fatalf("AuthenticateToken = %+v, %+v", got, user)
	}
	lastUsed := func() time.Time {
		var ts time.Time
		must(t, db.GetContext(ctx, &ts, `SELECT last_used_at FROM api_tokens WHERE id = ?`, tok.ID))
		return ts
	}
	first := lastUsed()
	c.Add(59 * time.Second)
	_, _, err = s.AuthenticateToken(ctx, plain)
	must(t, err)
	if !lastUsed().Equal(first) {
		t.Fatal("last_used_at written within a minute")
	}
	c.Add(time.Second)
	_, _, err = s.AuthenticateToken(ctx, plain)
	must(t, err)
	if !lastUsed().Equal(c.Now()) {
		t.Fatal("last_used_at not written after a minute")
	}

	// Names: required, printable, unique among the user's active tokens.
	for _, name := range []string{"", "   ", "tab\there", strings.Repeat("n", 101), "bad\xffutf8"} {
		if _, _, err := s.CreateToken(ctx, me, alice.ID, name, nil); errs.Fields(err).For("name") == "" {
			t.Errorf("CreateToken(name %q) = %v", name, err)
		}
	}
	if _, _, err := s.CreateToken(ctx, me, alice.ID, "ci deploys", nil); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate name = %v", err)
	}
	if _, _, err := s.CreateToken(ctx, me, bob.ID, "ci deploys", nil); err != nil {
		t.Fatalf("another user's same name = %v", err)
	}
	past := c.Now().Add(-time.Second)
	if _, _, err := s.CreateToken(ctx, me, alice.ID, "old", &past); errs.Fields(err).For("expires_at") == "" {
		t.Fatalf("expiry in the past = %v", err)
	}
	if _, _, err := s.CreateToken(ctx, me, 99999, "x", nil); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("token of a missing user = %v", err)
	}

	// Expiry.
	in := c.Now().Add(time.Hour)
	expPlain, exp, err := s.CreateToken(ctx, me, alice.ID, "short lived", &in)
	must(t, err)
	if exp.ExpiresAt == nil || !exp.ExpiresAt.Equal(in) {
		t.Fatalf("expires %v", exp.ExpiresAt)
	}
	_, _, err = s.AuthenticateToken(ctx, expPlain)
	must(t, err)
	c.Add(time.Hour)
	if _, _, err := s.AuthenticateToken(ctx, expPlain); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("expired token = %v", err)
	}
	// An expired token's name is free again.
	_, _, err = s.CreateToken(ctx, me, alice.ID, "short lived", nil)
	must(t, err)

	list, err := s.Tokens(ctx, alice.ID)
	must(t, err)
	if len(list) != 3 || list[0].Name != "short lived" || list[2].ID != tok.ID || list[1].Active(c.Now()) || !list[2].Active(c.Now()) {
		t.Fatalf("Tokens = %+v", list)
	}
	if none, err := s.Tokens(ctx, 99999); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("Tokens(missing) = %#v, %v", none, err)
	}

	// Revocation: only by its user, once, effective at once.
	if err := s.RevokeToken(ctx, me, bob.ID, tok.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("revoke through another user = %v", err)
	}
	must(t, s.RevokeToken(ctx, me, alice.ID, tok.ID))
	if _, _, err := s.AuthenticateToken(ctx, plain); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("revoked token = %v", err)
	}
	if e := lastAudit(t, db); e.Action != "token.revoke" || e.ObjectName != "ci deploys" || !strings.Contains(e.After, "revoked_at") {
		t.Fatalf("audit %+v", e)
	}
	if err := s.RevokeToken(ctx, me, alice.ID, tok.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("second revoke = %v", err)
	}

	// A disabled user's tokens stop working.
	bobPlain, _, err := s.CreateToken(ctx, me, bob.ID, "bot", nil)
	must(t, err)
	must(t, s.SetDisabled(ctx, admin, "bob", true))
	if _, _, err := s.AuthenticateToken(ctx, bobPlain); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("disabled user's token = %v", err)
	}

	for _, bad := range []string{"", "slc_", "slc_nope", plain[4:], "SLC_" + plain[4:], plain + " ", strings.Repeat("slc_", 1000)} {
		if _, _, err := s.AuthenticateToken(ctx, bad); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Errorf("AuthenticateToken(%.20q) = %v", bad, err)
		}
	}
}

// TestResetAndDisableRevokeTokens: an admin's password reset or disable
// ends the user's API tokens for good (enabling again brings none back),
// and an admin can list and revoke another user's tokens.
func TestResetAndDisableRevokeTokens(t *testing.T) {
	db, s, _ := newStore(t)
	alice, err := s.CreateUser(ctx, admin, "alice", pw)
	must(t, err)
	bob, err := s.CreateUser(ctx, admin, "bob", pw)
	must(t, err)
	mk := func(u *accounts.User, name string) string {
		t.Helper()
		plain, _, err := s.CreateToken(ctx, audit.Actor{User: u.Username}, u.ID, name, nil)
		must(t, err)
		return plain
	}
	works := func(plain string) bool {
		_, _, err := s.AuthenticateToken(ctx, plain)
		return err == nil
	}

	// Password reset.
	a1, a2 := mk(alice, "ci"), mk(alice, "laptop")
	b1 := mk(bob, "bot")
	must(t, s.SetPassword(ctx, admin, "alice", "a brand new secret"))
	if works(a1) || works(a2) {
		t.Fatal("API tokens survived a password reset")
	}
	if !works(b1) {
		t.Fatal("another user's token was revoked")
	}
	if e := lastAudit(t, db); e.Action != "user.password" || !strings.Contains(e.Detail, "2 API tokens revoked") {
		t.Fatalf("reset audit = %+v", e)
	}

	// Disable, then enable: the tokens stay revoked.
	b2 := mk(bob, "cron")
	must(t, s.SetDisabled(ctx, admin, "bob", true))
	if e := lastAudit(t, db); e.Action != "user.disable" || !strings.Contains(e.Detail, "2 API tokens revoked") {
		t.Fatalf("disable audit = %+v", e)
	}
	must(t, s.SetDisabled(ctx, admin, "bob", false))
	if works(b1) || works(b2) {
		t.Fatal("API tokens work again after disable and enable")
	}

	// An admin's view of another user's tokens, and revoking one.
	a3 := mk(alice, "new")
	u, list, err := s.TokensOf(ctx, "alice")
	must(t, err)
	if u.ID != alice.ID || len(list) != 3 || list[0].Name != "new" || list[0].RevokedAt != nil || list[1].RevokedAt == nil {
		t.Fatalf("TokensOf(alice) = %+v, %+v", u, list)
	}
	must(t, s.RevokeToken(ctx, admin, u.ID, list[0].ID))
	if works(a3) {
		t.Fatal("token revoked by an admin still works")
	}
	if e := lastAudit(t, db); e.Action != "token.revoke" || e.Actor != "root (cli)" || e.Detail != "of user alice" {
		t.Fatalf("admin revoke audit = %+v", e)
	}
	if _, _, err := s.TokensOf(ctx, "ghost"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("TokensOf(ghost) = %v", err)
	}
}

// TestNames: a member picker gets names of enabled users, by prefix,
// literally (LIKE wildcards match themselves), and nothing else.
func TestNames(t *testing.T) {
	_, s, _ := newStore(t)
	for _, n := range []string{"alice", "alina", "al_x", "bob", "alfred"} {
		_, err := s.CreateUser(ctx, admin, n, pw)
		must(t, err)
	}
	must(t, s.SetDisabled(ctx, admin, "alfred", true))
	for prefix, want := range map[string]string{
		"al":   "[al_x alice alina]",
		"AL":   "[al_x alice alina]",
		"al_":  "[al_x]",
		"ali":  "[alice alina]",
		"":     "[al_x alice alina bob]",
		"%":    "[]",
		"zz":   "[]",
		"a b":  "[]",
		"\xff": "[]",
	} {
		got, err := s.Names(ctx, prefix, 0)
		must(t, err)
		if fmt.Sprint(got) != want {
			t.Errorf("Names(%q) = %v, want %s", prefix, got, want)
		}
	}
	if got, _ := s.Names(ctx, "", 2); len(got) != 2 {
		t.Errorf("Names with limit 2 = %v", got)
	}
}

// TestChangePassword: the user's own change needs the current password,
// ends every session but the one it is made from, keeps API tokens, and
// is audited; a wrong current password or an unacceptable new one changes
// nothing.
func TestChangePassword(t *testing.T) {
	db, s, _ := newStore(t)
	const old, next = "the old long password", "the new long password"
	u, err := s.CreateUser(ctx, admin, "olga", old)
	must(t, err)
	keep, err := s.NewSession(ctx, u.ID, "127.0.0.1", "here")
	must(t, err)
	other, err := s.NewSession(ctx, u.ID, "127.0.0.1", "there")
	must(t, err)
	secret, _, err := s.CreateToken(ctx, admin, u.ID, "ci", nil)
	must(t, err)
	me := audit.Actor{User: "olga", Via: "console"}

	if err := s.ChangePassword(ctx, me, u.ID, "not it", next, keep); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("wrong current password: %v, want ErrUnauthenticated", err)
	}
	if err := s.ChangePassword(ctx, me, u.ID, old, "short", keep); errs.Fields(err).For("new_password") == "" {
		t.Fatalf("short new password: %v, want a new_password problem", err)
	}
	if _, err := s.Authenticate(ctx, "olga", old); err != nil {
		t.Fatalf("a refused change changed the password: %v", err)
	}
	if _, _, err := s.Session(ctx, other); err != nil {
		t.Fatalf("a refused change ended a session: %v", err)
	}

	must(t, s.ChangePassword(ctx, me, u.ID, old, next, keep))
	if _, err := s.Authenticate(ctx, "olga", next); err != nil {
		t.Fatalf("new password refused: %v", err)
	}
	if _, _, err := s.Session(ctx, keep); err != nil {
		t.Fatalf("the session of the change ended: %v", err)
	}
	if _, _, err := s.Session(ctx, other); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("another session survived: %v", err)
	}
	if _, _, err := s.AuthenticateToken(ctx, secret); err != nil {
		t.Fatalf("the API token stopped working: %v", err)
	}
	e := lastAudit(t, db)
	if e.Action != "user.password" || e.ObjectName != "olga" || !strings.Contains(e.Detail, "1 other sessions ended") {
		t.Fatalf("audit entry %+v", e)
	}
	// The old password no longer proves anything.
	if err := s.ChangePassword(ctx, me, u.ID, old, "a third long password", keep); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("change with the old password: %v", err)
	}
}
