package manage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/signin"
)

// Longest user name and password a sign-in reads; longer input is refused
// without hashing anything.
const (
	MaxUsername = 64
	MaxPassword = 1024
)

// Sign-in refusals. Both match errs.ErrUnauthenticated.
var (
	// ErrMissingCredentials: the user name or the password is empty or
	// oversized.
	ErrMissingCredentials = fmt.Errorf("empty or oversized user name or password: %w", errs.ErrUnauthenticated)
	// ErrWrongCredentials: no such user, a wrong password, or a disabled
	// account; which one is never told.
	ErrWrongCredentials = fmt.Errorf("wrong user name or password: %w", errs.ErrUnauthenticated)
)

// ThrottledError refuses a sign-in attempt over the throttle's limit
// without checking the password.
type ThrottledError struct {
	// Wait is how long until the next attempt may succeed.
	Wait time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many sign-in attempts; retry in %v", e.Wait)
}

// SignIn is a sign-in attempt.
type SignIn struct {
	Username  string
	Password  string
	UserAgent string
	// Previous is the session id the browser still sent, ended on
	// success so that a planted id is worthless.
	Previous string
	// Device is the device token the browser kept from an earlier
	// successful sign-in ("" for none); it lets a correct password pass
	// a lock on the user name that someone else's guesses caused.
	Device string
}

// SignedIn is the outcome of a successful sign-in.
type SignedIn struct {
	// Session is the new session id.
	Session string
	User    *accounts.User
	// Device is the device token for the browser to keep and send on its
	// next sign-in.
	Device string
}

// SignIn checks a user name and password and starts a session. Only
// failed attempts count against the throttle (internal/signin): per client
// address, and per user name or, for a device that signed in as the user
// before, per device. Every attempt is audited. With password sign-in
// turned off (Config.LocalSignInOff) every attempt is refused, audited,
// without checking anything.
func (s *Service) SignIn(ctx context.Context, c Caller, req SignIn) (SignedIn, error) {
	who := audit.Actor{User: clip(req.Username, MaxUsername), Via: "console", Addr: c.Addr}
	if who.User == "" {
		who.User = "anonymous"
	}
	failed := func(detail string, err error) (SignedIn, error) {
		s.event(ctx, who, audit.Entry{Action: "login.failure", ObjectType: "user", ObjectName: who.User, Detail: detail})
		return SignedIn{}, err
	}
	if s.localOff {
		return SignedIn{}, s.refuseLocal(ctx, who)
	}
	if req.Username == "" || req.Password == "" || len(req.Username) > MaxUsername || len(req.Password) > MaxPassword {
		// Refused before any password is checked: nothing to count.
		return failed("empty or oversized user name or password", ErrMissingCredentials)
	}
	attempt := signin.Attempt{User: req.Username, Addr: c.Addr, Device: req.Device}
	d, err := s.throttle.Begin(ctx, attempt)
	if err != nil {
		return SignedIn{}, err
	}
	if !d.Allowed {
		return failed("too many failed attempts (per "+d.Reason+"); refused without checking the password",
			&ThrottledError{Wait: d.RetryAfter})
	}
	user, err := s.accounts.Authenticate(ctx, req.Username, req.Password)
	if err != nil {
		if errs.HTTPStatus(err) >= 500 {
			return SignedIn{}, err
		}
		return failed("wrong user name or password, or account disabled", ErrWrongCredentials)
	}
	device, err := s.throttle.Succeeded(ctx, attempt)
	if err != nil {
		return SignedIn{}, err
	}
	if req.Previous != "" {
		if err := s.accounts.EndSession(ctx, req.Previous); err != nil && !errors.Is(err, errs.ErrNotFound) {
			s.log.WarnContext(ctx, "cannot end the previous session at sign-in", "err", err)
		}
	}
	session, err := s.accounts.NewSession(ctx, user.ID, c.Addr, clip(req.UserAgent, 255))
	if err != nil {
		return SignedIn{}, err
	}
	who.User = user.Username
	s.event(ctx, who, audit.Entry{Action: "login.success", ObjectType: "user", ObjectName: user.Username})
	return SignedIn{Session: session, User: user, Device: device}, nil
}

// ChangePassword is a signed-in user's change of their own password.
type ChangePassword struct {
	Current string
	New     string
	// Repeat is the new password typed a second time.
	Repeat string
	// Session is the session the change is made from: it stays, every
	// other session of the user ends.
	Session string
	// Device is the browser's device token, as at sign-in.
	Device string
}

// ChangePassword checks the form (the new password follows the rules of
// every password, is typed twice alike and differs from the current one)
// before anything is counted; then the current password is checked under
// the sign-in throttle, so that a left-open session cannot be used to
// guess the password faster than the sign-in page allows. A wrong current
// password is a *errs.Validation on "current_password" and is audited
// ("user.password.failure"); success ends the user's other sessions and
// is audited ("user.password").
func (s *Service) ChangePassword(ctx context.Context, c Caller, req ChangePassword) error {
	if c.User == nil || c.Token != nil {
		// Only a console session proves who types: a token may not
		// change the password that made it.
		return errs.ErrUnauthenticated
	}
	var v errs.Validation
	if !c.User.HasPassword() {
		return errs.Invalid("current_password", "this account signs in through single sign-on and has no password")
	}
	if req.Current == "" {
		v.Add("current_password", "is required")
	}
	if p := accounts.PasswordProblem(req.New); p != "" {
		v.Add("new_password", p)
	} else if req.New == req.Current {
		v.Add("new_password", "must differ from your current password")
	}
	if req.Repeat != req.New && v.For("new_password") == "" {
		v.Add("repeat_password", "does not match the new password")
	}
	if err := v.Err(); err != nil {
		return err
	}
	failed := func(detail string, err error) error {
		s.event(ctx, c.Actor(), audit.Entry{Action: "user.password.failure", ObjectType: "user", ObjectName: c.Name(), Detail: detail})
		return err
	}
	attempt := signin.Attempt{User: c.Name(), Addr: c.Addr, Device: req.Device}
	d, err := s.throttle.Begin(ctx, attempt)
	if err != nil {
		return err
	}
	if !d.Allowed {
		return failed("too many failed attempts (per "+d.Reason+"); refused without checking the password",
			&ThrottledError{Wait: d.RetryAfter})
	}
	err = s.accounts.ChangePassword(ctx, c.Actor(), c.User.ID, req.Current, req.New, req.Session)
	if errors.Is(err, errs.ErrUnauthenticated) {
		return failed("wrong current password", errs.Invalid("current_password", "is not your current password"))
	}
	if err != nil {
		return err
	}
	if _, err := s.throttle.Succeeded(ctx, attempt); err != nil {
		s.log.WarnContext(ctx, "cannot hand back the counted attempt of a password change", "err", err)
	}
	return nil
}

// ClearSignInLock ends a sign-in lock at once: on a user name (and that
// user's known devices) when User is set, on a client address when Addr is.
type ClearSignInLock struct {
	User string
	Addr string
}

// ClearSignInLock needs the admin role; it is audited ("user.unlock",
// "address.unlock").
func (s *Service) ClearSignInLock(ctx context.Context, c Caller, req ClearSignInLock) error {
	if err := s.requireAdmin(ctx, c, req.User); err != nil {
		return err
	}
	switch {
	case req.User != "" && req.Addr != "":
		return errs.Invalid("user", "clear a user or an address, not both")
	case req.User != "":
		if _, err := s.accounts.UserByName(ctx, req.User); err != nil {
			return err
		}
		return s.throttle.Clear(ctx, c.Actor(), req.User)
	case req.Addr != "":
		if net.ParseIP(req.Addr) == nil {
			return errs.Invalid("address", "is not an IP address")
		}
		return s.throttle.ClearAddress(ctx, c.Actor(), req.Addr)
	default:
		return errs.Invalid("user", "name a user or an address")
	}
}

// SignInLock reports how long a user name stays locked for sign-ins from
// unknown devices (0: not locked); admins only.
func (s *Service) SignInLock(ctx context.Context, c Caller, user string) (time.Duration, error) {
	if err := s.requireAdmin(ctx, c, user); err != nil {
		return 0, err
	}
	return s.throttle.Locked(ctx, user)
}

// SignOut ends the caller's session on the server.
func (s *Service) SignOut(ctx context.Context, c Caller, session string) error {
	if err := s.accounts.EndSession(ctx, session); err != nil && !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	s.event(ctx, c.Actor(), audit.Entry{Action: "logout", ObjectType: "user", ObjectName: c.Name()})
	return nil
}

// Session returns the user of a live console session. An unknown or ended
// session matches errs.ErrUnauthenticated.
func (s *Service) Session(ctx context.Context, session string) (*accounts.User, error) {
	_, user, err := s.accounts.Session(ctx, session)
	return user, err
}

// useInterval is how often a busy token's use is audited: enough to see
// when and from where a token is used without a row per request.
const useInterval = time.Minute

// TokenCaller authenticates an API token and returns its caller. Every
// failure (unknown, revoked, expired) is the same errs.ErrUnauthenticated,
// so a caller learns nothing about which tokens exist. The first use of a
// token in each minute (per process) is audited as "token.use".
func (s *Service) TokenCaller(ctx context.Context, token, addr, request string) (Caller, error) {
	tok, user, err := s.accounts.AuthenticateToken(ctx, token)
	if err != nil {
		if errors.Is(err, errs.ErrUnauthenticated) || errors.Is(err, errs.ErrNotFound) {
			s.log.InfoContext(ctx, "api token refused", "addr", addr, "request", request)
			return Caller{}, errs.ErrUnauthenticated
		}
		return Caller{}, fmt.Errorf("authenticate token: %w", err)
	}
	c := Caller{User: user, Token: tok, Addr: addr, Request: request}
	if s.tokenUse.due(tok.ID, time.Now()) {
		s.event(ctx, c.Actor(), audit.Entry{Action: "token.use", ObjectType: "token", ObjectName: tok.Name, Detail: request})
	}
	return c, nil
}

// useLog remembers when each token's use was last audited.
type useLog struct {
	mu   sync.Mutex
	last map[int64]time.Time
}

func newUseLog() *useLog { return &useLog{last: map[int64]time.Time{}} }

// due reports whether the use of token id at now is to be audited, and if
// so remembers it.
func (l *useLog) due(id int64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, seen := l.last[id]; seen && now.Sub(last) < useInterval {
		return false
	}
	if len(l.last) > 10000 {
		// Forget old entries rather than grow without bound.
		for k, t := range l.last {
			if now.Sub(t) >= useInterval {
				delete(l.last, k)
			}
		}
	}
	l.last[id] = now
	return true
}
