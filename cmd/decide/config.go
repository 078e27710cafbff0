package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/decision"
	"github.com/sluicehq/sluice/internal/redisconn"
)

// config is everything the service is started with.
type config struct {
	mysqlDSN        string
	redis           redisconn.Options
	keyPrefix       string
	grpcAddr        string
	httpAddr        string
	unmatched       decision.Unmatched
	headers         decision.Headers
	policy          client.FailurePolicy
	timeout         time.Duration
	instances       int
	countUsage      bool
	refreshInterval time.Duration
	startupTimeout  time.Duration
	shutdownTimeout time.Duration
	logLevel        slog.Level
}

// usageError is a configuration mistake: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

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

// parseConfig reads the environment through getenv, then args, which
// override it.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	cfg := config{
		keyPrefix:       getenv("SLUICE_KEY_PREFIX"),
		grpcAddr:        ":8081",
		httpAddr:        ":8082",
		timeout:         client.DefaultTimeout,
		instances:       1,
		countUsage:      true,
		refreshInterval: decision.DefaultRefreshInterval,
		startupTimeout:  15 * time.Second,
		shutdownTimeout: 10 * time.Second,
	}
	var err error
	if cfg.redis, err = redisconn.FromEnv(getenv); err != nil {
		return cfg, usageError{err}
	}
	strs := map[string]*string{"SLUICE_GRPC_ADDR": &cfg.grpcAddr, "SLUICE_HTTP_ADDR": &cfg.httpAddr}
	for env, dst := range strs {
		if v, ok := lookup(getenv, env); ok {
			*dst = v
		}
	}
	unmatched, headers, policy := getenv("SLUICE_UNMATCHED"), getenv("SLUICE_HEADERS"), getenv("SLUICE_FAILURE_POLICY")
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{
		{"SLUICE_TIMEOUT", &cfg.timeout},
		{"SLUICE_REFRESH_INTERVAL", &cfg.refreshInterval},
		{"SLUICE_STARTUP_TIMEOUT", &cfg.startupTimeout},
		{"SLUICE_SHUTDOWN_TIMEOUT", &cfg.shutdownTimeout},
	} {
		if v, ok := lookup(getenv, d.env); ok {
			if *d.dst, err = time.ParseDuration(v); err != nil {
				return cfg, usagef("%s=%q: want a duration like \"50ms\" or \"10s\"", d.env, v)
			}
		}
	}
	if v, ok := lookup(getenv, "SLUICE_INSTANCES"); ok {
		if cfg.instances, err = strconv.Atoi(v); err != nil {
			return cfg, usagef("SLUICE_INSTANCES=%q: not a whole number", v)
		}
	}
	if v, ok := lookup(getenv, "SLUICE_COUNT_USAGE"); ok {
		if cfg.countUsage, err = strconv.ParseBool(v); err != nil {
			return cfg, usagef("SLUICE_COUNT_USAGE=%q: want true or false", v)
		}
	}
	level := getenv("SLUICE_LOG_LEVEL")
	if level == "" {
		level = "info"
	}

	fs := flag.NewFlagSet("sluice-decide", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(output, "Usage: sluice-decide [flags]\n       sluice-decide healthcheck -url URL\n\n"+
			"Answers rate limit decisions for gateways (Envoy's rate limit service API over gRPC)\n"+
			"and for any language (HTTP /v1/acquire). Callers authenticate with app tokens.\n"+
			"Every flag can also be set by the environment variable named in its help;\n"+
			"SLUICE_REDIS_PASSWORD and SLUICE_REDIS_SENTINEL_PASSWORD are read from the environment only.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.mysqlDSN, "mysql-dsn", "", "MySQL `DSN`, as user:password@tcp(host:port)/sluice (env SLUICE_MYSQL_DSN, preferred: flags show in ps)")
	cfg.redis.RegisterFlags(fs)
	fs.StringVar(&cfg.keyPrefix, "key-prefix", cfg.keyPrefix, "Redis key `prefix` of bucket hashes; empty means \"sluice:\" (env SLUICE_KEY_PREFIX)")
	fs.StringVar(&cfg.grpcAddr, "grpc-addr", cfg.grpcAddr, "`address` of Envoy's rate limit service API (env SLUICE_GRPC_ADDR)")
	fs.StringVar(&cfg.httpAddr, "http-addr", cfg.httpAddr, "`address` of /v1/acquire, /healthz, /readyz and /metrics (env SLUICE_HTTP_ADDR)")
	fs.StringVar(&unmatched, "unmatched", unmatched, "answer for a descriptor no mapping matches: allow or deny (env SLUICE_UNMATCHED; default allow)")
	fs.StringVar(&headers, "headers", headers, "rate limit headers sent back: draft (RateLimit-*), x (X-RateLimit-*), both or none (env SLUICE_HEADERS; default draft)")
	fs.StringVar(&policy, "failure-policy", policy, "answer while Redis is unreachable: local, open or closed (env SLUICE_FAILURE_POLICY; default local)")
	fs.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "how long a decision waits for Redis before the failure policy answers (env SLUICE_TIMEOUT)")
	fs.IntVar(&cfg.instances, "instances", cfg.instances, "copies of this service running, for the local failure policy's share of each bucket (env SLUICE_INSTANCES)")
	fs.BoolVar(&cfg.countUsage, "count-usage", cfg.countUsage, "write usage counts for the console's charts (env SLUICE_COUNT_USAGE)")
	fs.DurationVar(&cfg.refreshInterval, "refresh-interval", cfg.refreshInterval, "how often tokens and mappings are checked for changes (env SLUICE_REFRESH_INTERVAL)")
	fs.DurationVar(&cfg.startupTimeout, "startup-timeout", cfg.startupTimeout, "how long to wait for MySQL and Redis at start-up (env SLUICE_STARTUP_TIMEOUT)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", cfg.shutdownTimeout, "how long calls in flight may take after SIGTERM (env SLUICE_SHUTDOWN_TIMEOUT)")
	fs.StringVar(&level, "log-level", level, "debug, info, warn or error (env SLUICE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, usageError{err}
	}
	if cfg.mysqlDSN == "" {
		cfg.mysqlDSN = getenv("SLUICE_MYSQL_DSN")
	}
	if fs.NArg() > 0 {
		return cfg, usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := cfg.logLevel.UnmarshalText([]byte(level)); err != nil {
		return cfg, usagef("log level %q: want debug, info, warn or error", level)
	}
	if cfg.unmatched, err = decision.ParseUnmatched(unmatched); err != nil {
		return cfg, usageError{err}
	}
	if cfg.headers, err = decision.ParseHeaders(headers); err != nil {
		return cfg, usageError{err}
	}
	if cfg.policy, err = parsePolicy(policy); err != nil {
		return cfg, usageError{err}
	}
	switch {
	case strings.TrimSpace(cfg.mysqlDSN) == "":
		return cfg, usagef("mysql is not configured: set SLUICE_MYSQL_DSN or -mysql-dsn")
	case cfg.grpcAddr == "" || cfg.httpAddr == "":
		return cfg, usagef("both the gRPC and the HTTP address are required")
	case cfg.timeout <= 0:
		return cfg, usagef("timeout must be positive")
	case cfg.instances < 1:
		return cfg, usagef("instances must be at least 1, got %d", cfg.instances)
	case cfg.refreshInterval < 10*time.Millisecond:
		return cfg, usagef("refresh interval must be at least 10ms, got %s", cfg.refreshInterval)
	case cfg.startupTimeout <= 0 || cfg.shutdownTimeout <= 0:
		return cfg, usagef("start-up and shutdown timeouts must be positive")
	}
	if err := cfg.redis.Validate(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

func lookup(getenv func(string) string, key string) (string, bool) {
	v := strings.TrimSpace(getenv(key))
	return v, v != ""
}
