package manage_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/signin"
)

func itoa(n int) string { return strconv.Itoa(n) }

func TestSignIn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.user("olga", false)
	from := manage.Caller{Addr: "198.51.100.7"}
	in, err := f.svc.SignIn(ctx, from, manage.SignIn{Username: "olga", Password: "correct horse battery"})
	if err != nil || in.User.Username != "olga" || in.Device == "" {
		t.Fatalf("sign in: %+v %v", in, err)
	}
	if u, err := f.svc.Session(ctx, in.Session); err != nil || u.Username != "olga" {
		t.Fatalf("session: %v", err)
	}
	// Signing in again ends the session the browser still sent.
	if _, err := f.svc.SignIn(ctx, from, manage.SignIn{Username: "olga", Password: "correct horse battery", Previous: in.Session}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Session(ctx, in.Session); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("previous session still live: %v", err)
	}
	if _, err := f.svc.SignIn(ctx, from, manage.SignIn{Username: "olga", Password: "wrong"}); !errors.Is(err, manage.ErrWrongCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := f.svc.SignIn(ctx, from, manage.SignIn{Username: "olga"}); !errors.Is(err, manage.ErrMissingCredentials) {
		t.Fatalf("no password: %v", err)
	}
	// Four more failures spend the user name's five.
	for range 4 {
		_, _ = f.svc.SignIn(ctx, from, manage.SignIn{Username: "olga", Password: "wrong"})
	}
	var th *manage.ThrottledError
	_, err = f.svc.SignIn(ctx, from, manage.SignIn{Username: "olga", Password: "correct horse battery"})
	if !errors.As(err, &th) || th.Wait <= 0 || th.Wait > signin.DefaultPolicy.User.Window {
		t.Fatalf("attempt after five failures: %v, want throttled", err)
	}
	if n := len(f.entries("login.failure")); n != 7 {
		t.Fatalf("%d failures audited, want 7", n)
	}
}

// Five colleagues behind one address sign in again and again: successes
// never count, so none of them is ever locked out.
func TestColleaguesBehindOneAddressAreNotLockedOut(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	office := manage.Caller{Addr: "203.0.113.10"}
	names := []string{"ana", "ben", "cleo", "dan", "eve"}
	for _, n := range names {
		f.user(n, false)
	}
	// More sign-ins than the address allows failures.
	rounds := signin.DefaultPolicy.Addr.Failures/len(names) + 2
	for r := range rounds {
		for _, n := range names {
			if _, err := f.svc.SignIn(ctx, office, manage.SignIn{Username: n, Password: "correct horse battery"}); err != nil {
				t.Fatalf("round %d, %s: %v", r, n, err)
			}
		}
	}
	// A mistyped password now and then does not lock anybody out either.
	if _, err := f.svc.SignIn(ctx, office, manage.SignIn{Username: "ana", Password: "typo"}); !errors.Is(err, manage.ErrWrongCredentials) {
		t.Fatalf("typo: %v", err)
	}
	if _, err := f.svc.SignIn(ctx, office, manage.SignIn{Username: "ana", Password: "correct horse battery"}); err != nil {
		t.Fatalf("after a typo: %v", err)
	}
}

// A guesser locks the user name, but the user's browser, which signed in
// before, passes the lock with the right password; an admin can clear it.
func TestKnownDevicePassesAUserLockAndAdminsClearIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.user("olga", false)
	admin := f.user("root", true)
	bob := f.user("bob", false)
	home := manage.Caller{Addr: "198.51.100.20"}
	in, err := f.svc.SignIn(ctx, home, manage.SignIn{Username: "olga", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range signin.DefaultPolicy.User.Failures {
		guesser := manage.Caller{Addr: "192.0.2." + itoa(100+i)}
		if _, err := f.svc.SignIn(ctx, guesser, manage.SignIn{Username: "olga", Password: "guess"}); !errors.Is(err, manage.ErrWrongCredentials) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	var th *manage.ThrottledError
	if _, err := f.svc.SignIn(ctx, home, manage.SignIn{Username: "olga", Password: "correct horse battery"}); !errors.As(err, &th) {
		t.Fatalf("unknown device during the lock: %v, want throttled", err)
	}
	if lock, err := f.svc.SignInLock(ctx, admin, "olga"); err != nil || lock <= 0 {
		t.Fatalf("lock %v %v, want a lock", lock, err)
	}
	again, err := f.svc.SignIn(ctx, home, manage.SignIn{Username: "olga", Password: "correct horse battery", Device: in.Device})
	if err != nil {
		t.Fatalf("known device during the lock: %v", err)
	}
	if again.Device != in.Device {
		t.Fatal("the known device got a new token")
	}
	// Another user's device token is no pass.
	bobIn, err := f.svc.SignIn(ctx, manage.Caller{Addr: "198.51.100.30"}, manage.SignIn{Username: "bob", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SignIn(ctx, home, manage.SignIn{Username: "olga", Password: "correct horse battery", Device: bobIn.Device}); !errors.As(err, &th) {
		t.Fatalf("someone else's device: %v, want throttled", err)
	}

	// Only admins clear locks.
	if err := f.svc.ClearSignInLock(ctx, bob, manage.ClearSignInLock{User: "olga"}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("non-admin clear: %v", err)
	}
	if err := f.svc.ClearSignInLock(ctx, admin, manage.ClearSignInLock{User: "nobody"}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("clear an unknown user: %v", err)
	}
	if err := f.svc.ClearSignInLock(ctx, admin, manage.ClearSignInLock{Addr: "not an ip"}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("clear a bad address: %v", err)
	}
	if err := f.svc.ClearSignInLock(ctx, admin, manage.ClearSignInLock{User: "olga"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SignIn(ctx, home, manage.SignIn{Username: "olga", Password: "correct horse battery"}); err != nil {
		t.Fatalf("unknown device after the admin cleared the lock: %v", err)
	}
	if n := len(f.entries("user.unlock")); n != 1 {
		t.Fatalf("%d user.unlock entries, want 1", n)
	}
}

func TestAdminClearsAnAddressLock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.user("olga", false)
	admin := f.user("root", true)
	nat := manage.Caller{Addr: "203.0.113.99"}
	for i := range signin.DefaultPolicy.Addr.Failures {
		if _, err := f.svc.SignIn(ctx, nat, manage.SignIn{Username: "user" + itoa(i), Password: "guess"}); !errors.Is(err, manage.ErrWrongCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	var th *manage.ThrottledError
	if _, err := f.svc.SignIn(ctx, nat, manage.SignIn{Username: "olga", Password: "correct horse battery"}); !errors.As(err, &th) {
		t.Fatalf("address over its failures: %v, want throttled", err)
	}
	if err := f.svc.ClearSignInLock(ctx, admin, manage.ClearSignInLock{Addr: "not an address"}); errs.Fields(err).For("address") == "" {
		t.Fatalf("clearing a malformed address: %v, want a field error on address", err)
	}
	if err := f.svc.ClearSignInLock(ctx, admin, manage.ClearSignInLock{Addr: nat.Addr}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SignIn(ctx, nat, manage.SignIn{Username: "olga", Password: "correct horse battery"}); err != nil {
		t.Fatalf("after clearing the address: %v", err)
	}
	if n := len(f.entries("address.unlock")); n != 1 {
		t.Fatalf("%d address.unlock entries, want 1", n)
	}
}

func TestAdminsListAndRevokeOtherUsersTokens(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	admin := f.user("root", true)
	bob := f.user("bob", false)
	secret, tok, err := f.svc.CreateToken(ctx, olga, manage.CreateToken{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UserTokens(ctx, bob, "olga"); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("non-admin list: %v", err)
	}
	if err := f.svc.RevokeUserToken(ctx, bob, manage.RevokeUserToken{User: "olga", ID: tok.ID}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("non-admin revoke: %v", err)
	}
	ts, err := f.svc.UserTokens(ctx, admin, "olga")
	if err != nil || len(ts) != 1 || ts[0].ID != tok.ID {
		t.Fatalf("tokens of olga: %v %v", ts, err)
	}
	// The token is olga's, not bob's.
	if err := f.svc.RevokeUserToken(ctx, admin, manage.RevokeUserToken{User: "bob", ID: tok.ID}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("revoke through the wrong user: %v", err)
	}
	if err := f.svc.RevokeUserToken(ctx, admin, manage.RevokeUserToken{User: "olga", ID: tok.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.TokenCaller(ctx, secret, "192.0.2.9", "GET /x"); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("revoked token still works: %v", err)
	}
	if n := len(f.entries("token.revoke")); n != 1 {
		t.Fatalf("%d token.revoke audit entries, want 1", n)
	}
	// A password reset revokes the rest.
	secret2, _, err := f.svc.CreateToken(ctx, olga, manage.CreateToken{Name: "ci2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SetPassword(ctx, admin, manage.SetPassword{User: "olga", Password: "another long password"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.TokenCaller(ctx, secret2, "192.0.2.9", "GET /x"); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("token after a password reset: %v", err)
	}
	if n := len(f.entries("access.denied")); n < 2 {
		t.Fatalf("%d refusals audited, want at least 2", n)
	}
}

func TestUserNamesNeedASignedInCaller(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.user("oscar", false)
	f.user("zed", false)
	if _, err := f.svc.UserNames(ctx, manage.Caller{}, "o"); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("anonymous: %v", err)
	}
	got, err := f.svc.UserNames(ctx, olga, "o")
	if err != nil || len(got) != 2 || got[0] != "olga" || got[1] != "oscar" {
		t.Fatalf("names %v %v", got, err)
	}
}
