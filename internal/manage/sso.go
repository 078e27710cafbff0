package manage

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/sso"
)

// Refusals of sign-in through the identity provider. All match
// errs.ErrUnauthenticated; the audit row says more than the browser is
// told.
var (
	// ErrSSOOff: no provider is configured.
	ErrSSOOff = fmt.Errorf("single sign-on is not configured: %w", errs.ErrUnauthenticated)
	// ErrSSORefused: the callback or the provider's answer was refused
	// (replayed or foreign state, a refused ID token, an error from the
	// provider, a disabled account).
	ErrSSORefused = fmt.Errorf("single sign-on refused: %w", errs.ErrUnauthenticated)
	// ErrLocalSignInOff: password sign-in is turned off.
	ErrLocalSignInOff = fmt.Errorf("sign-in with a password is turned off: %w", errs.ErrUnauthenticated)
)

// SSOEnabled reports whether people may sign in through the provider.
func (s *Service) SSOEnabled() bool { return s.sso != nil }

// LocalSignIn reports whether people may sign in with a password.
func (s *Service) LocalSignIn() bool { return !s.localOff }

// SSOStart is where to send the browser, and the cookie that binds the
// sign-in to it.
type SSOStart struct {
	URL     string
	Browser string
}

// BeginSSO starts a sign-in through the provider: it stores a fresh state,
// nonce and PKCE verifier, and returns the provider's authorization URL and
// the browser cookie. next is the console path to land on afterwards.
func (s *Service) BeginSSO(ctx context.Context, c Caller, next string) (SSOStart, error) {
	if s.sso == nil {
		return SSOStart{}, ErrSSOOff
	}
	in, err := s.logins.Begin(ctx, next)
	if err != nil {
		return SSOStart{}, err
	}
	u, err := s.sso.AuthURL(ctx, in.State, in.Nonce, in.Verifier)
	if err != nil {
		return SSOStart{}, fmt.Errorf("%w: %w", errs.ErrUnavailable, err)
	}
	return SSOStart{URL: u, Browser: in.Browser}, nil
}

// SSOCallback is what the provider sent the browser back with.
type SSOCallback struct {
	State string
	Code  string
	// Error and Description are the provider's error, when it sent one.
	Error       string
	Description string
	// Browser is the cookie BeginSSO gave.
	Browser   string
	Previous  string
	UserAgent string
}

// FinishSSO completes a sign-in through the provider: it takes the state
// (once, in the browser it was issued to), redeems the code with the PKCE
// verifier, verifies the ID token (issuer, audience, expiry, signature,
// nonce), finds or creates the account linked to the identity, applies
// the roles its groups give (see rbac.ApplyIdentityRoles) and starts a
// session. Every refusal is audited as "login.failure", each success as
// "login.success" with the groups read.
func (s *Service) FinishSSO(ctx context.Context, c Caller, req SSOCallback) (SignedIn, string, error) {
	who := audit.Actor{User: "anonymous", Via: "single sign-on", Addr: c.Addr}
	failed := func(detail string, err error) (SignedIn, string, error) {
		s.event(ctx, who, audit.Entry{Action: "login.failure", ObjectType: "user", ObjectName: who.User,
			Detail: clip(strings.ToValidUTF8("single sign-on: "+detail, "\uFFFD"), 1000)})
		return SignedIn{}, "", err
	}
	if s.sso == nil {
		return failed("not configured", ErrSSOOff)
	}
	in, err := s.logins.Take(ctx, req.State, req.Browser)
	switch {
	case errors.Is(err, sso.ErrUnknownState):
		return failed("unknown, used or expired state (a replayed or stale callback)", ErrSSORefused)
	case errors.Is(err, sso.ErrOtherBrowser):
		return failed("the state was issued to another browser", ErrSSORefused)
	case err != nil:
		return SignedIn{}, "", err
	}
	if req.Error != "" {
		return failed("the provider answered "+clip(req.Error, 100)+": "+clip(req.Description, 300), ErrSSORefused)
	}
	if req.Code == "" {
		return failed("no code", ErrSSORefused)
	}
	id, err := s.sso.Exchange(ctx, req.Code, in.Verifier, in.Nonce)
	var refusal *sso.Refusal
	switch {
	case errors.As(err, &refusal):
		return failed(refusal.Reason, ErrSSORefused)
	case err != nil:
		return failed("the provider could not be reached", fmt.Errorf("%w: %w", errs.ErrUnavailable, err))
	}
	who.User = clip(id.Username, MaxUsername)
	if who.User == "" {
		who.User = "anonymous"
	}
	user, created, err := s.accounts.SignInIdentity(ctx, who, id.Issuer, id.Subject, id.Username)
	switch {
	case errors.Is(err, accounts.ErrDisabled):
		return failed("account disabled (subject "+clip(id.Subject, 100)+")", ErrSSORefused)
	case errors.Is(err, errs.ErrConflict), errors.Is(err, errs.ErrInvalid):
		return failed(err.Error()+" (subject "+clip(id.Subject, 100)+")", ErrSSORefused)
	case err != nil:
		return SignedIn{}, "", err
	}
	who.User = user.Username
	granted := s.sso.Roles().Grant(id.Groups)
	want := rbac.IdentityRoles{Admin: granted.Admin, Apps: map[string]rbac.Role{}}
	for app, r := range granted.Apps {
		want.Apps[app] = rbac.Role(r)
	}
	notes, err := s.enf.ApplyIdentityRoles(ctx, who, user.Username, want)
	if err != nil {
		return SignedIn{}, "", err
	}
	if req.Previous != "" {
		if err := s.accounts.EndSession(ctx, req.Previous); err != nil {
			s.log.WarnContext(ctx, "cannot end the previous session at sign-in", "err", err)
		}
	}
	session, err := s.accounts.NewSession(ctx, user.ID, c.Addr, clip(req.UserAgent, 255))
	if err != nil {
		return SignedIn{}, "", err
	}
	detail := "single sign-on; groups: " + strings.Join(id.Groups, ", ")
	if created {
		detail += "; account created"
	}
	if len(notes) > 0 {
		detail += "; " + strings.Join(notes, "; ")
	}
	s.event(ctx, who, audit.Entry{Action: "login.success", ObjectType: "user", ObjectName: user.Username,
		Detail: clip(strings.ToValidUTF8(detail, "\uFFFD"), 1000)})
	return SignedIn{Session: session, User: user}, in.Next, nil
}

// refuseLocal audits a password sign-in made while they are turned off.
func (s *Service) refuseLocal(ctx context.Context, who audit.Actor) error {
	s.event(ctx, who, audit.Entry{Action: "login.failure", ObjectType: "user", ObjectName: who.User,
		Detail: "sign-in with a password is turned off; refused without checking it"})
	return ErrLocalSignInOff
}
