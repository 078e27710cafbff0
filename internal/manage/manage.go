// Package manage is Sluice's application layer: every use case of the
// console and the JSON API (register an app, grant a role, create, edit or
// delete a bucket, read its live state, manage users and tokens, sign in)
// is one method of Service, written once.
//
// A use case takes the Caller (the signed-in user or the API token, and the
// client address), checks the caller's roles through rbac, validates its
// request, skips a change that changes nothing, writes the stores (whose
// transactions carry the outbox event and the audit row) and returns the
// result or an error of the errs vocabulary. Every refusal is audited as
// "access.denied". Transports only translate: they parse a request into
// one of this package's request types, call the method, and render what
// comes back.
//
// Adding a use case: one request type (when it changes something) and one
// method, following the ones beside it.
package manage

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/signin"
	"github.com/sluicehq/sluice/internal/sso"
	"github.com/sluicehq/sluice/internal/usage"
)

// Config holds what the Service is built on. DB and Enforcer are required.
type Config struct {
	DB       *sqlx.DB
	Enforcer *rbac.Enforcer
	// Redis serves live bucket state and usage counts; without it those
	// report ErrUnavailable.
	Redis redis.UniversalClient
	// Keyspace names the sync worker's bucket keys.
	Keyspace redisscript.Keyspace
	// Throttle limits failed sign-ins; nil means signin.New(DB) with
	// signin.DefaultPolicy.
	Throttle *signin.Throttle
	// Accounts is the account store; nil means one on DB.
	Accounts *accounts.Store
	// Logger receives what a caller is not told; nil means slog.Default().
	Logger *slog.Logger
	// RefusalCounter, if set, counts every refused request without a
	// signed-in caller; the audit log keeps only a sample of those.
	RefusalCounter audit.Counter
	// SSO, when set, signs people in through an OpenID Connect provider.
	SSO *sso.Provider
	// LocalSignInOff refuses sign-in with a password (SSO must be set).
	LocalSignInOff bool
}

// Service runs the use cases. It is safe for concurrent use; Close it to
// write the last summary of sampled refusals.
type Service struct {
	db       *sqlx.DB
	enf      *rbac.Enforcer
	rdb      redis.UniversalClient
	ks       redisscript.Keyspace
	apps     *apps.Store
	buckets  *buckets.Store
	audit    *audit.Store
	accounts *accounts.Store
	usage    *usage.Reader
	recents  *usage.Recents
	throttle *signin.Throttle
	// refusals samples the audit rows of refused anonymous requests.
	refusals     *audit.Refusals
	stopRefusals context.CancelFunc
	log          *slog.Logger
	tokenUse     *useLog
	sso          *sso.Provider
	logins       *sso.Logins
	localOff     bool
}

// New returns a Service on cfg.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil || cfg.Enforcer == nil {
		return nil, errors.New("manage: DB and Enforcer are required")
	}
	if cfg.LocalSignInOff && cfg.SSO == nil {
		return nil, errors.New("manage: sign-in with a password can be turned off only with single sign-on configured")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Service{
		db: cfg.DB, enf: cfg.Enforcer, rdb: cfg.Redis, ks: cfg.Keyspace,
		apps: apps.NewStore(cfg.DB), buckets: buckets.NewStore(cfg.DB), audit: audit.NewStore(cfg.DB),
		accounts: cfg.Accounts, log: log, tokenUse: newUseLog(), recents: usage.NewRecents(cfg.DB),
		sso: cfg.SSO, logins: sso.NewLogins(cfg.DB), localOff: cfg.LocalSignInOff,
	}
	if s.accounts == nil {
		s.accounts = accounts.NewStore(cfg.DB)
	}
	if cfg.Redis != nil {
		s.usage = usage.NewReader(cfg.Redis, cfg.Keyspace)
	}
	s.throttle = cfg.Throttle
	if s.throttle == nil {
		s.throttle = signin.New(cfg.DB)
	}
	s.refusals = audit.NewRefusals(cfg.DB)
	s.refusals.Counter = cfg.RefusalCounter
	ctx, cancel := context.WithCancel(context.Background())
	s.stopRefusals = cancel
	go s.refusals.Run(ctx)
	return s, nil
}

// Close stops the summaries of sampled refusals, writing the last one. It
// closes no store.
func (s *Service) Close() {
	s.stopRefusals()
	_ = s.refusals.Flush(context.Background())
}

// AnonymousRefusals is how many requests without a signed-in caller were
// refused since the Service started, sampled into the audit log or not.
func (s *Service) AnonymousRefusals() int64 { return s.refusals.Total() }

// Caller is who asks for a use case.
type Caller struct {
	// User is the signed-in user; nil for an anonymous request.
	User *accounts.User
	// Token is the API token the request carried; nil for a console session.
	Token *accounts.Token
	// Addr is the client address, as the transport tells it (trusted
	// proxies applied).
	Addr string
	// Request names what was asked ("PATCH /api/v1/buckets/x"), for the
	// audit rows of refusals.
	Request string
	// operator marks Operator.
	operator bool
}

// Operator is the caller of the admin binary's commands (create-user):
// whoever holds the database's credentials, who may do what an admin may.
// The audit log records them as "system (cli)".
var Operator = Caller{operator: true}

// Name is the user name roles are granted to, or "" when anonymous.
func (c Caller) Name() string {
	if c.User == nil {
		return ""
	}
	return c.User.Username
}

// Actor is who the audit log records for the caller.
func (c Caller) Actor() audit.Actor {
	if c.operator {
		return audit.Actor{User: "system", Via: "cli"}
	}
	a := audit.Actor{User: c.Name(), Via: "console", Addr: c.Addr}
	if a.User == "" {
		a.User = "anonymous"
	}
	if c.Token != nil {
		a.Via = "api token " + c.Token.Name
	}
	return a
}

// IsAdmin reports whether the caller holds the global admin role.
func (s *Service) IsAdmin(c Caller) bool {
	return c.operator || c.User != nil && s.enf.IsAdmin(c.Name())
}

// Roles returns the caller's role on each app they are a member of.
func (s *Service) Roles(c Caller) map[string]rbac.Role { return s.enf.Apps(c.Name()) }

// Visible returns the apps whose data the caller may see: nil for an
// admin (everything), otherwise their apps, never nil.
func (s *Service) Visible(c Caller) []string {
	if s.IsAdmin(c) {
		return nil
	}
	v := s.enf.Visible(c.Name())
	if v == nil {
		return []string{} // nil would mean "all" to the stores
	}
	return v
}

// can reports whether the caller may do act on app.
func (s *Service) can(c Caller, app string, act rbac.Action) bool {
	return s.IsAdmin(c) || (c.User != nil && s.enf.Can(c.Name(), app, act))
}

// Refusal describes a refused access for the audit log.
type Refusal struct {
	App        string
	ObjectType string
	ObjectName string
	// Why is a short reason ("needs the owner role").
	Why string
}

// Refuse writes an "access.denied" row for r and returns answer. A failure
// to write it is logged; the request is refused either way. Transports
// call it for the refusals they decide themselves (no session, a
// cross-origin form).
func (s *Service) Refuse(ctx context.Context, c Caller, r Refusal, answer error) error {
	valid := func(v string) string { return strings.ToValidUTF8(v, "\uFFFD") }
	e := audit.Entry{
		Action: "access.denied", ObjectType: r.ObjectType, ObjectName: clip(valid(r.ObjectName), 100),
		App: clip(valid(r.App), 63), Detail: valid(c.Request),
	}
	if r.Why != "" {
		if e.Detail != "" {
			e.Detail += ": "
		}
		e.Detail += r.Why
	}
	if e.ObjectType == "" {
		e.ObjectType = "route"
	}
	var err error
	if c.User == nil && c.Token == nil {
		// Anyone can send these by the thousand: count all, log a sample.
		a := c.Actor()
		a.User = "anonymous"
		err = s.refusals.Record(ctx, a, e)
	} else {
		err = audit.Write(ctx, s.db, c.Actor(), e)
	}
	if err != nil {
		s.log.WarnContext(ctx, "cannot audit a denied access", "err", err, "user", c.Name())
	}
	return answer
}

// event records something that changes no data (sign-in, sign-out, token
// use). A failure to record it is logged: the event happened.
func (s *Service) event(ctx context.Context, who audit.Actor, e audit.Entry) {
	if err := audit.Write(ctx, s.db, who, e); err != nil {
		s.log.WarnContext(ctx, "cannot write audit entry", "action", e.Action, "err", err)
	}
}

// clip keeps v within n bytes, on a rune boundary.
func clip(v string, n int) string {
	if len(v) <= n {
		return v
	}
	for n > 0 && v[n]&0xC0 == 0x80 {
		n--
	}
	return v[:n]
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
