package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/decision"
	"github.com/sluicehq/sluice/internal/settings"
	"github.com/sluicehq/sluice/internal/startup"
)

// config is everything the service is started with.
type config struct {
	stores          startup.StoreSettings
	grpcAddr        string
	httpAddr        string
	metricsAddr     string
	unmatched       decision.Unmatched
	criticalEntry   string
	headers         decision.Headers
	policy          client.FailurePolicy
	timeout         time.Duration
	instances       int
	countUsage      bool
	refreshInterval time.Duration
	startupTimeout  time.Duration
	shutdownTimeout time.Duration
	logLevel        slog.Level
	limits          startup.Limits
	tls             startup.TLSFiles
	// gcPercent is the garbage collector's setting when GOGC is not set
	// (the runtime applies GOGC itself); 0 leaves the runtime's.
	gcPercent int
}

// defaultGCPercent: the service's live heap is a few megabytes, and
// garbage is what a request leaves (about 5 kB with gRPC's own). At the
// runtime's default of 100 it collected every 4 MB of garbage, tens of
// times a second under load, a twelfth of its CPU; at 400 the heap stays
// tens of megabytes. GOGC set in the environment decides instead.
const defaultGCPercent = 400

// usageError is a configuration mistake: exit code 2.
type usageError = settings.UsageError

var usagef = settings.Usagef

func parsePolicy(s string) (client.FailurePolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "local", "":
		return client.FailLocal, nil
	case "open":
		return client.FailOpen, nil
	case "closed":
		return client.FailClosed, nil
	}
	return 0, fmt.Errorf("failure policy: want local, open or closed, not %q", s)
}

// helpText follows the settings in -h.
const helpText = `Subcommands:
  sluice-decide [flags]                  run the decision service (the default)
  sluice-decide healthcheck -url URL     check a running service's /healthz
                                         (-url https://127.0.0.1:8082/healthz -insecure under TLS)

Answers rate limit decisions for gateways (Envoy's rate limit service API over
gRPC) and for any language (HTTP /v1/acquire). Callers authenticate with app
tokens. With -tls-cert and -tls-key both ports speak TLS only; the files are
read again when they change, so renewed certificates need no restart. With
-tls-client-ca, gRPC callers must present a client certificate signed by one
of its CAs, and so must HTTP callers of /v1/ (/healthz and /readyz answer
without one).
`

// bind binds the service's settings to a fresh set.
func bind(cfg *config, str *strSettings, getenv func(string) string, output io.Writer) *settings.Set {
	s := settings.New("sluice-decide", "sluice-decide [flags] | sluice-decide healthcheck -url URL", getenv, output)
	s.Footer(helpText)
	cfg.stores.Bind(s)
	s.String(&cfg.grpcAddr, "grpc-addr", "SLUICE_GRPC_ADDR", "address of Envoy's rate limit service API")
	s.String(&cfg.httpAddr, "http-addr", "SLUICE_HTTP_ADDR", "address of /v1/acquire, /healthz and /readyz")
	s.String(&cfg.metricsAddr, "metrics-addr", "SLUICE_METRICS_ADDR", "address of a separate listener serving Prometheus /metrics; empty disables")
	s.String(&str.unmatched, "unmatched", "SLUICE_UNMATCHED", "answer for a descriptor no mapping matches: allow or deny")
	s.String(&cfg.criticalEntry, "critical-entry", "SLUICE_CRITICAL_ENTRY", "descriptor entry that marks a descriptor critical (value true or 1): it may take the bucket's reserve")
	s.String(&str.headers, "headers", "SLUICE_HEADERS", "rate limit headers sent back: draft (RateLimit-*), x (X-RateLimit-*), both or none")
	s.String(&str.policy, "failure-policy", "SLUICE_FAILURE_POLICY", "answer while Redis is unreachable: local, open or closed")
	s.Duration(&cfg.timeout, "timeout", "SLUICE_TIMEOUT", "how long a decision waits for Redis before the failure policy answers")
	s.Int(&cfg.instances, "instances", "SLUICE_INSTANCES", "copies of this service running, for the local failure policy's share of each bucket")
	s.Bool(&cfg.countUsage, "count-usage", "SLUICE_COUNT_USAGE", "write usage counts for the console's charts")
	s.Duration(&cfg.refreshInterval, "refresh-interval", "SLUICE_REFRESH_INTERVAL", "how often tokens and mappings are checked for changes")
	s.StartupTimeout(&cfg.startupTimeout)
	s.Duration(&cfg.shutdownTimeout, "shutdown-timeout", "SLUICE_SHUTDOWN_TIMEOUT", "how long calls in flight may take after SIGTERM")
	s.LogLevel(&cfg.logLevel)
	cfg.limits.BindMaxConns(s)
	cfg.tls.Bind(s)
	return s
}

// strSettings are the settings parsed after binding.
type strSettings struct{ unmatched, headers, policy string }

// parseConfig reads the environment through getenv, then args, which
// override it.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	cfg := config{
		grpcAddr:        ":8081",
		httpAddr:        ":8082",
		timeout:         client.DefaultTimeout,
		instances:       1,
		countUsage:      true,
		refreshInterval: decision.DefaultRefreshInterval,
		criticalEntry:   decision.DefaultCriticalEntry,
		startupTimeout:  15 * time.Second,
		shutdownTimeout: 10 * time.Second,
		limits:          startup.DecisionLimits(),
	}
	if getenv("GOGC") == "" {
		cfg.gcPercent = defaultGCPercent
	}
	str := strSettings{unmatched: "allow", headers: "draft", policy: "local"}
	s := bind(&cfg, &str, getenv, output)
	if err := s.Parse(args); err != nil {
		return cfg, err
	}
	if err := s.NoArgs(); err != nil {
		return cfg, err
	}
	var err error
	if cfg.unmatched, err = decision.ParseUnmatched(str.unmatched); err != nil {
		return cfg, usageError{Err: err}
	}
	if cfg.headers, err = decision.ParseHeaders(str.headers); err != nil {
		return cfg, usageError{Err: err}
	}
	if cfg.policy, err = parsePolicy(str.policy); err != nil {
		return cfg, usageError{Err: err}
	}
	switch {
	case cfg.grpcAddr == "" || cfg.httpAddr == "":
		return cfg, usagef("both the gRPC and the HTTP address are required")
	case strings.TrimSpace(cfg.criticalEntry) == "":
		return cfg, usagef("critical entry must not be empty")
	case cfg.timeout <= 0:
		return cfg, usagef("timeout must be positive")
	case cfg.instances < 1:
		return cfg, usagef("instances must be at least 1, got %d", cfg.instances)
	case cfg.refreshInterval < 10*time.Millisecond:
		return cfg, usagef("refresh interval must be at least 10ms, got %s", cfg.refreshInterval)
	case cfg.limits.MaxConns < 0:
		return cfg, usagef("max-conns must not be negative, got %d", cfg.limits.MaxConns)
	case cfg.startupTimeout <= 0 || cfg.shutdownTimeout <= 0:
		return cfg, usagef("start-up and shutdown timeouts must be positive")
	}
	if err := cfg.tls.Check(); err != nil {
		return cfg, err
	}
	return cfg, cfg.stores.Check()
}
