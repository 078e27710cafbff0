package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/router"
	"github.com/sluicehq/sluice/internal/settings"
	"github.com/sluicehq/sluice/internal/signin"
	"github.com/sluicehq/sluice/internal/sso"
	"github.com/sluicehq/sluice/internal/startup"
)

// devCommand runs the whole product in one process from a checkout: -dev
// needs the embedded stores, which only builds with the dev tag carry.
const devCommand = "go run -tags dev ./cmd/admin -dev"

// serveConfig is everything `serve` is started with.
type serveConfig struct {
	listen         string
	metricsAddr    string
	mysqlDSN       string
	redis          redisconn.Options
	keyPrefix      string
	secureCookies  bool
	trustedProxies []string
	migrate        bool
	dev            bool
	logLevel       slog.Level
	startupTimeout time.Duration
	auditRetention time.Duration
	sso            sso.Config
	appRoles       []string
	localSignIn    bool
}

// devListen is where -dev listens unless told otherwise: loopback only.
const devListen = "127.0.0.1:8080"

// hstsValue is the Strict-Transport-Security of a secure deployment: one
// year, this host only (other hosts of the domain may not serve HTTPS).
const hstsValue = "max-age=31536000"

// withHSTS adds Strict-Transport-Security to every response when the
// deployment is marked secure (-secure-cookies: served over TLS, directly
// or through a proxy), so browsers never fall back to plain HTTP.
func withHSTS(next http.Handler, secure bool) http.Handler {
	if !secure {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", hstsValue)
		next.ServeHTTP(w, r)
	})
}

// bindServe binds serve's settings to a fresh set.
func bindServe(cfg *serveConfig, e env) *settings.Set {
	s := settings.New("sluice-admin", "sluice-admin [serve] [flags] | sluice-admin SUBCOMMAND [flags]", e.getenv, e.stderr)
	s.Footer(subcommandsText)
	s.MySQLDSN(&cfg.mysqlDSN)
	cfg.redis.Bind(s)
	s.String(&cfg.keyPrefix, "key-prefix", "SLUICE_KEY_PREFIX", `Redis key prefix of bucket hashes, as the sync worker's; empty means "sluice:"`)
	s.String(&cfg.listen, "listen", "SLUICE_LISTEN", "address the console and the API listen on; empty means :8080, or "+devListen+" with -dev")
	s.Bool(&cfg.secureCookies, "secure-cookies", "SLUICE_SECURE_COOKIES", "the deployment is served over HTTPS (behind a TLS-terminating proxy): cookies are Secure and responses carry Strict-Transport-Security")
	s.List(&cfg.trustedProxies, "trusted-proxies", "SLUICE_TRUSTED_PROXIES", "comma-separated addresses or CIDRs of proxies whose X-Forwarded-For is believed")
	s.LogLevel(&cfg.logLevel)
	s.String(&cfg.metricsAddr, "metrics-addr", "SLUICE_METRICS_ADDR", "address of a separate listener serving Prometheus /metrics; empty disables")
	s.StartupTimeout(&cfg.startupTimeout)
	s.Bool(&cfg.migrate, "migrate", "SLUICE_MIGRATE", "apply database migrations at start-up")
	s.Duration(&cfg.auditRetention, "audit-retention", "SLUICE_AUDIT_RETENTION", "how long audit entries are kept (9600h is 400 days); 0 keeps them for ever")
	s.String(&cfg.sso.Issuer, "oidc-issuer", "SLUICE_OIDC_ISSUER", "OpenID Connect issuer URL for single sign-on (discovery reads ISSUER/.well-known/openid-configuration); empty disables it")
	s.String(&cfg.sso.ClientID, "oidc-client-id", "SLUICE_OIDC_CLIENT_ID", "client id of the console at the identity provider; ID tokens must be issued for it")
	s.Secret(&cfg.sso.ClientSecret, "", "SLUICE_OIDC_CLIENT_SECRET", "client secret of the console at the identity provider")
	s.String(&cfg.sso.RedirectURL, "oidc-redirect-url", "SLUICE_OIDC_REDIRECT_URL", "the console's callback as browsers reach it, registered at the provider: https://HOST/login/sso/callback")
	s.List(&cfg.sso.Scopes, "oidc-scopes", "SLUICE_OIDC_SCOPES", "comma-separated scopes asked beside openid (add groups for providers that need it, such as Dex)")
	s.String(&cfg.sso.GroupsClaim, "oidc-groups-claim", "SLUICE_OIDC_GROUPS_CLAIM", "ID token claim holding the user's groups")
	s.String(&cfg.sso.UsernameClaim, "oidc-username-claim", "SLUICE_OIDC_USERNAME_CLAIM", "ID token claim the console user name is made of at the first sign-in (email if missing)")
	s.List(&cfg.sso.Roles.AdminGroups, "oidc-admin-groups", "SLUICE_OIDC_ADMIN_GROUPS", "comma-separated groups whose members are admins")
	s.List(&cfg.appRoles, "oidc-app-roles", "SLUICE_OIDC_APP_ROLES", "comma-separated group=app:role pairs (role owner or viewer) giving members of group that role on app")
	s.Bool(&cfg.localSignIn, "local-signin", "SLUICE_LOCAL_SIGNIN", "allow sign-in with a password; false leaves only single sign-on (needs -oidc-issuer)")
	s.Bool(&cfg.dev, "dev", "", "everything in this process, in memory, with a seeded admin and a demo app (builds with -tags dev)")
	return s
}

// defaultServe is serve's configuration before settings are read.
func defaultServe() serveConfig {
	return serveConfig{migrate: true, startupTimeout: 15 * time.Second, auditRetention: audit.DefaultRetention, localSignIn: true,
		sso: sso.Config{Scopes: []string{"profile", "email"}, GroupsClaim: sso.DefaultGroupsClaim, UsernameClaim: sso.DefaultUsernameClaim}}
}

func parseServe(e env) (serveConfig, error) {
	cfg := defaultServe()
	s := bindServe(&cfg, e)
	if err := s.Parse(e.args); err != nil {
		return cfg, err
	}
	if err := s.NoArgs(); err != nil {
		return cfg, err
	}
	if cfg.listen == "" {
		// -dev seeds an admin whose password is printed: only this
		// machine may reach it unless an address is given.
		cfg.listen = ":8080"
		if cfg.dev {
			cfg.listen = devListen
		}
	}
	if cfg.startupTimeout <= 0 {
		return cfg, usagef("start-up timeout must be positive")
	}
	if err := parseSSO(&cfg); err != nil {
		return cfg, err
	}
	if cfg.dev {
		return cfg, nil // the in-memory stores need no addresses
	}
	if err := startup.CheckDSN(cfg.mysqlDSN); err != nil {
		return cfg, err
	}
	if err := cfg.redis.Validate(); err != nil {
		return cfg, usageError{Err: fmt.Errorf("%w (the console needs Redis for live state and the sign-in throttle)", err)}
	}
	return cfg, nil
}

// parseSSO checks the single sign-on settings as a whole.
func parseSSO(cfg *serveConfig) error {
	roles, err := sso.ParseAppRoles(cfg.appRoles)
	if err != nil {
		return usagef("SLUICE_OIDC_APP_ROLES (-oidc-app-roles): %v", err)
	}
	cfg.sso.Roles.Apps = roles
	if err := cfg.sso.Validate(); err != nil {
		return usagef("single sign-on (SLUICE_OIDC_*): %v", err)
	}
	if !cfg.localSignIn && !cfg.sso.Enabled() {
		return usagef("SLUICE_LOCAL_SIGNIN=false needs single sign-on (SLUICE_OIDC_ISSUER), or nobody could sign in")
	}
	return nil
}

// serve connects to MySQL and Redis, applies migrations and serves the
// console (and the JSON API under /api/v1) until ctx ends.
func serve(ctx context.Context, e env) error {
	cfg, err := parseServe(e)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	if cfg.dev {
		return serveDev(ctx, cfg, e, log)
	}
	// A statement runs no longer than the request that sent it may: a query
	// the request gave up on stops in MySQL too.
	st, err := startup.Open(ctx, cfg.startupTimeout, log, cfg.mysqlDSN,
		database.Options{StatementTimeout: router.DefaultRequestTimeout}, migrateIf(cfg.migrate), cfg.redis.Open)
	if err != nil {
		return err
	}
	defer st.Close()
	return serveWith(ctx, cfg, stores{db: st.DB, rdb: st.Redis, ks: redisscript.Keyspace{Prefix: cfg.keyPrefix}}, e.stderr, log)
}

// stores are what the console runs on, real or in-memory (-dev).
type stores struct {
	db  *sqlx.DB
	rdb redis.UniversalClient
	ks  redisscript.Keyspace
}

// serveWith serves the console on st until ctx ends, then shuts down
// gracefully.
func serveWith(ctx context.Context, cfg serveConfig, st stores, stderr io.Writer, log *slog.Logger) error {
	enf, err := rbac.New(ctx, st.db)
	if err != nil {
		return fmt.Errorf("load permissions: %w", err)
	}
	enf.Log = log
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = enf.Run(runCtx) }()
	// One throttle both counts sign-ins and purges its spent counters.
	throttle := signin.New(st.db)
	go purgeSessions(runCtx, accounts.NewStore(st.db), throttle, sso.NewLogins(st.db), log)
	go audit.NewStore(st.db).RunRetention(runCtx, cfg.auditRetention, log)

	// Metrics are served on a listener of their own, if at all, so that the
	// console's address never exposes them and its access rules stay whole.
	var reg *prometheus.Registry
	if cfg.metricsAddr != "" {
		reg = startup.NewRegistry()
	}
	mcfg := manage.Config{DB: st.db, Enforcer: enf, Redis: st.rdb, Keyspace: st.ks, Throttle: throttle, Logger: log,
		LocalSignInOff: !cfg.localSignIn}
	if cfg.sso.Enabled() {
		if mcfg.SSO, err = sso.NewProvider(cfg.sso); err != nil {
			return usageError{Err: err}
		}
	}
	if reg != nil {
		refusals := prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "console", Name: "anonymous_refusals_total",
			Help: "Requests refused because the caller was not signed in (the audit log keeps a sample).",
		})
		reg.MustRegister(refusals)
		mcfg.RefusalCounter = refusals
	}
	svc, err := manage.New(mcfg)
	if err != nil {
		return fmt.Errorf("build use cases: %w", err)
	}
	defer svc.Close()
	// One router serves the pages and the JSON API under /api/v1.
	rcfg := router.Config{TrustedProxies: cfg.trustedProxies, Logger: log}
	ccfg := console.Config{Service: svc, SecureCookies: cfg.secureCookies, Logger: log}
	if reg != nil { // a nil *Registry would not be a nil Registerer
		rcfg.Metrics, ccfg.Metrics = reg, reg
	}
	rt, err := router.New(rcfg)
	if err != nil {
		return fmt.Errorf("build router: %w", usageError{Err: err})
	}
	if err := console.Mount(rt, ccfg); err != nil {
		return fmt.Errorf("build console: %w", err)
	}
	api.Mount(rt, api.Config{Service: svc, Logger: log})

	limits := startup.ConsoleLimits()
	ln, err := limits.Listen(cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	srv := limits.HTTPServer(withHSTS(rt, cfg.secureCookies), log)
	srvErr := make(chan error, 2)
	var msrv *http.Server
	if reg != nil {
		mln, err := startup.ProbeLimits().Listen(cfg.metricsAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listen on %s for metrics: %w", cfg.metricsAddr, err)
		}
		msrv = metricsServer(reg, log)
		log.Info("metrics listening", "addr", mln.Addr().String())
		fmt.Fprintf(stderr, "Prometheus metrics on http://%s/metrics\n", displayAddr(mln.Addr()))
		go func() { srvErr <- msrv.Serve(mln) }()
	}
	log.Info("console listening", "addr", ln.Addr().String())
	fmt.Fprintf(stderr, "Sluice console on http://%s\n", displayAddr(ln.Addr()))
	go func() { srvErr <- srv.Serve(ln) }()
	var failed error
	select {
	case <-ctx.Done():
	case err := <-srvErr:
		failed = fmt.Errorf("http server: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	if msrv != nil {
		if err := msrv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) && failed == nil {
			failed = fmt.Errorf("shut down metrics server: %w", err)
		}
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) && failed == nil {
		failed = fmt.Errorf("shut down http server: %w", err)
	}
	return failed
}

// metricsServer serves reg at /metrics, and nothing else.
func metricsServer(reg *prometheus.Registry, log *slog.Logger) *http.Server {
	return startup.MetricsServer(reg, log)
}

// displayAddr turns ":8080" into "localhost:8080" for people to click.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// purgeSessions deletes expired and idle sessions, spent sign-in failure
// counters and forgotten sign-in devices every hour, so the tables hold
// only live rows. Every console instance may do it; it is idempotent.
func purgeSessions(ctx context.Context, store *accounts.Store, throttle *signin.Throttle, logins *sso.Logins, log *slog.Logger) {
	periodic.Every(ctx, time.Hour, func(ctx context.Context) {
		if n, err := store.PurgeSessions(ctx); err != nil {
			log.Warn("purge sessions", "err", err)
		} else if n > 0 {
			log.Info("purged sessions", "count", n)
		}
		if n, err := logins.Purge(ctx); err != nil {
			log.Warn("purge sign-ins through the provider", "err", err)
		} else if n > 0 {
			log.Info("purged unfinished sign-ins through the provider", "count", n)
		}
		if n, err := throttle.Purge(ctx); err != nil {
			log.Warn("purge sign-in throttle", "err", err)
		} else if n > 0 {
			log.Info("purged sign-in throttle rows", "count", n)
		}
	})
}
