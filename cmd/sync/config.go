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

	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/syncer"
)

// config is everything the worker is started with.
type config struct {
	mysqlDSN          string
	redis             redisconn.Options
	keyPrefix         string
	pollInterval      time.Duration
	reconcileInterval time.Duration
	batchSize         int
	httpAddr          string
	logLevel          slog.Level
	startupTimeout    time.Duration
	migrate           bool
}

// usageError is a configuration mistake: exit code 2, and the message
// names the flag or variable to fix.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// parseConfig reads the environment through getenv, then args, which
// override it.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	cfg := config{
		keyPrefix:         getenv("SLUICE_KEY_PREFIX"),
		pollInterval:      syncer.DefaultPollInterval,
		reconcileInterval: syncer.DefaultReconcileInterval,
		batchSize:         syncer.DefaultBatchSize,
		httpAddr:          ":9090",
		startupTimeout:    15 * time.Second,
		migrate:           true,
	}
	var err error
	if cfg.redis, err = redisconn.FromEnv(getenv); err != nil {
		return cfg, usageError{err}
	}
	if v, ok := lookup(getenv, "SLUICE_HTTP_ADDR"); ok {
		cfg.httpAddr = v
		if v == "off" {
			cfg.httpAddr = ""
		}
	}
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{
		{"SLUICE_POLL_INTERVAL", &cfg.pollInterval},
		{"SLUICE_RECONCILE_INTERVAL", &cfg.reconcileInterval},
		{"SLUICE_STARTUP_TIMEOUT", &cfg.startupTimeout},
	} {
		if v, ok := lookup(getenv, d.env); ok {
			if *d.dst, err = parseDuration(v); err != nil {
				return cfg, usagef("%s=%q: %w", d.env, v, err)
			}
		}
	}
	if v, ok := lookup(getenv, "SLUICE_BATCH_SIZE"); ok {
		if cfg.batchSize, err = strconv.Atoi(v); err != nil {
			return cfg, usagef("SLUICE_BATCH_SIZE=%q: not a whole number", v)
		}
	}
	level := getenv("SLUICE_LOG_LEVEL")
	if level == "" {
		level = "info"
	}

	fs := flag.NewFlagSet("sluice-sync", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(output, "Usage: sluice-sync [flags]\n       sluice-sync healthcheck -url URL\n\n"+
			"Keeps the bucket hashes in Redis equal to the definitions in MySQL.\n"+
			"Every flag can also be set by the environment variable named in its help;\n"+
			"SLUICE_REDIS_PASSWORD and SLUICE_REDIS_SENTINEL_PASSWORD are read from the environment only.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// No default from the environment: -h would print the password.
	fs.StringVar(&cfg.mysqlDSN, "mysql-dsn", "", "MySQL `DSN`, as user:password@tcp(host:port)/sluice (env SLUICE_MYSQL_DSN, preferred: flags show in ps)")
	cfg.redis.RegisterFlags(fs)
	fs.StringVar(&cfg.keyPrefix, "key-prefix", cfg.keyPrefix, "Redis key `prefix` of bucket hashes; empty means \"sluice:\" (env SLUICE_KEY_PREFIX)")
	fs.Func("poll-interval", "pause between polls of an empty outbox (env SLUICE_POLL_INTERVAL; default 100ms)", durationFlag(&cfg.pollInterval))
	fs.Func("reconcile-interval", "period of the full reconcile (env SLUICE_RECONCILE_INTERVAL; default 30s)", durationFlag(&cfg.reconcileInterval))
	fs.Func("startup-timeout", "how long to wait for MySQL and Redis at start-up before giving up (env SLUICE_STARTUP_TIMEOUT; default 15s)", durationFlag(&cfg.startupTimeout))
	fs.IntVar(&cfg.batchSize, "batch-size", cfg.batchSize, "most change events applied per poll (env SLUICE_BATCH_SIZE)")
	fs.StringVar(&cfg.httpAddr, "http-addr", cfg.httpAddr, "`address` of /healthz, /readyz and /metrics; empty (or \"off\" in the environment) disables (env SLUICE_HTTP_ADDR)")
	fs.StringVar(&level, "log-level", level, "debug, info, warn or error (env SLUICE_LOG_LEVEL)")
	fs.BoolVar(&cfg.migrate, "migrate", cfg.migrate, "apply database migrations at start-up")
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

	switch {
	case strings.TrimSpace(cfg.mysqlDSN) == "":
		return cfg, usagef("mysql is not configured: set SLUICE_MYSQL_DSN or -mysql-dsn")
	case cfg.pollInterval <= 0:
		return cfg, usagef("poll interval must be positive")
	case cfg.reconcileInterval < time.Second:
		return cfg, usagef("reconcile interval must be at least 1s, got %s", cfg.reconcileInterval)
	case cfg.startupTimeout <= 0:
		return cfg, usagef("start-up timeout must be positive")
	case cfg.batchSize < 1 || cfg.batchSize > 10000:
		return cfg, usagef("batch size must be between 1 and 10000, got %d", cfg.batchSize)
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

// parseDuration accepts Go durations ("30s", "1m30s") and bare whole
// seconds ("30"), the form people tend to put in environment files.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New(`want a duration like "30s", "2m" or a number of seconds`)
	}
	return d, nil
}

func durationFlag(dst *time.Duration) func(string) error {
	return func(s string) error {
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		*dst = d
		return nil
	}
}
