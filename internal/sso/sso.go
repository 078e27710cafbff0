// Package sso signs people in to the console through an OpenID Connect
// provider (Okta, Azure AD, Google, Keycloak, Dex, ...): the authorization
// code flow with PKCE, the provider found by discovery, the ID token
// verified for its issuer, audience, expiry, signature and nonce. It uses
// go-oidc and x/oauth2 for the protocol; it knows nothing of users or
// roles, which are the application layer's (manage).
//
// A sign-in under way is a row of oidc_logins (Logins): its state is good
// once, for ten minutes, and only in the browser holding the cookie made
// with it.
package sso

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Config is how the console reaches its provider.
type Config struct {
	// Issuer is the provider's issuer URL; discovery reads
	// Issuer/.well-known/openid-configuration. Empty disables sign-in
	// through a provider.
	Issuer string
	// ClientID and ClientSecret are the console's registration at the
	// provider. The ID token's audience must hold ClientID.
	ClientID     string
	ClientSecret string
	// RedirectURL is the console's callback as the browser reaches it:
	// https://HOST/login/sso/callback.
	RedirectURL string
	// Scopes are asked beside "openid" (profile, email, groups...).
	Scopes []string
	// GroupsClaim names the ID token claim holding the groups ("groups").
	GroupsClaim string
	// UsernameClaim names the claim the console user name comes from
	// ("preferred_username"); an e-mail address gives its local part.
	UsernameClaim string
	// Roles maps groups to roles.
	Roles Mapping
}

// Defaults of Config.
const (
	DefaultGroupsClaim   = "groups"
	DefaultUsernameClaim = "preferred_username"
)

// Enabled reports whether a provider is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Validate reports what is missing or malformed in an enabled Config.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("the issuer must be an http(s) URL")
	}
	if c.ClientID == "" {
		return errors.New("a client id is required with an issuer")
	}
	r, err := url.Parse(c.RedirectURL)
	if err != nil || (r.Scheme != "https" && r.Scheme != "http") || r.Host == "" || r.Path != CallbackPath {
		return fmt.Errorf("the redirect URL must be the console's http(s)://HOST%s", CallbackPath)
	}
	return nil
}

// CallbackPath is where the provider sends the browser back.
const CallbackPath = "/login/sso/callback"

// Identity is a person the provider vouched for in a verified ID token.
type Identity struct {
	Issuer  string
	Subject string
	// Username is the console user name the claims propose ("" when
	// none is usable).
	Username string
	Groups   []string
}

// Refusal is a sign-in the provider's answer does not allow. Reason is for
// the audit log, never shown to the browser in full.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return "single sign-on refused: " + r.Reason }

func refused(format string, args ...any) error { return &Refusal{Reason: fmt.Sprintf(format, args...)} }

// Provider speaks to one OpenID Connect provider. Discovery happens at the
// first use and is retried until it succeeds, so a console starts while
// its provider is down. Safe for concurrent use.
type Provider struct {
	cfg Config

	mu sync.Mutex
	op *oidc.Provider
}

// NewProvider returns a Provider for cfg, which must be valid and enabled.
func NewProvider(cfg Config) (*Provider, error) {
	if !cfg.Enabled() {
		return nil, errors.New("sso: no issuer")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sso: %w", err)
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = DefaultUsernameClaim
	}
	return &Provider{cfg: cfg}, nil
}

// Issuer is the configured issuer URL.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// Roles is the group mapping.
func (p *Provider) Roles() Mapping { return p.cfg.Roles }

// discover returns the provider's metadata, fetching it the first time.
func (p *Provider) discover(ctx context.Context) (*oidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.op != nil {
		return p.op, nil
	}
	// The provider object keeps the context for fetching keys later: it
	// must outlive this request.
	op, err := oidc.NewProvider(context.WithoutCancel(ctx), p.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover the identity provider %s: %w", p.cfg.Issuer, err)
	}
	p.op = op
	return op, nil
}

func (p *Provider) oauth2(op *oidc.Provider) *oauth2.Config {
	scopes := []string{oidc.ScopeOpenID}
	for _, s := range p.cfg.Scopes {
		if s != oidc.ScopeOpenID && !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret,
		Endpoint: op.Endpoint(), RedirectURL: p.cfg.RedirectURL, Scopes: scopes}
}

// AuthURL returns where to send the browser to sign in: the provider's
// authorization endpoint with the state, the nonce and the PKCE challenge
// of verifier.
func (p *Provider) AuthURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	op, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	return p.oauth2(op).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// Exchange redeems code with verifier at the token endpoint and verifies
// the ID token: signature, issuer, audience (the client id), expiry and
// nonce. A token that fails a check is a *Refusal.
func (p *Provider) Exchange(ctx context.Context, code, verifier, nonce string) (Identity, error) {
	op, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := p.oauth2(op).Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Identity{}, refused("the token endpoint refused the code: %s", re.ErrorCode)
		}
		return Identity{}, fmt.Errorf("redeem the code at the identity provider: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, refused("the token response holds no ID token")
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Identity{}, refused("ID token: %s", verifyReason(err))
	}
	if idt.Nonce != nonce {
		return Identity{}, refused("ID token: the nonce is not the one this sign-in sent")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, refused("ID token: unreadable claims")
	}
	return Identity{Issuer: idt.Issuer, Subject: idt.Subject, Username: username(claims, p.cfg.UsernameClaim),
		Groups: groups(claims[p.cfg.GroupsClaim])}, nil
}

// verifyReason says which check an ID token failed, in a few words.
func verifyReason(err error) string {
	var expired *oidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &expired):
		return "expired at " + expired.Expiry.UTC().Format("2006-01-02 15:04:05Z")
	case strings.Contains(msg, "audience"):
		return "issued for another client (audience)"
	case strings.Contains(msg, "issuer"), strings.Contains(msg, "different provider"):
		return "issued by another issuer"
	case strings.Contains(msg, "signature"):
		return "bad signature"
	}
	return clip(msg, 200)
}

// username makes a console user name of the claim (or of the email claim
// when it is missing): the local part of an e-mail address, lower case,
// with characters the name rule refuses replaced by dashes. "" when
// nothing usable is left.
func username(claims map[string]any, claim string) string {
	v, _ := claims[claim].(string)
	if v == "" {
		v, _ = claims["email"].(string)
	}
	if local, _, ok := strings.Cut(v, "@"); ok {
		v = local
	}
	v = strings.ToLower(strings.TrimSpace(v))
	var b strings.Builder
	for _, r := range v {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.TrimLeft(b.String(), "-._")
	if len(name) > names.MaxLen {
		name = name[:names.MaxLen]
	}
	if !names.Valid(name) {
		return ""
	}
	return name
}

// groups reads a groups claim: a list of strings, or one string.
func groups(v any) []string {
	var out []string
	switch g := v.(type) {
	case string:
		out = append(out, g)
	case []any:
		for _, x := range g {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
