package main

import (
	"io"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/settings"
	"github.com/sluicehq/sluice/internal/startup"
	"github.com/sluicehq/sluice/internal/syncer"
)

// config is everything the worker is started with.
type config struct {
	stores            startup.StoreSettings
	pollInterval      time.Duration
	reconcileInterval time.Duration
	batchSize         int
	httpAddr          string
	logLevel          slog.Level
	startupTimeout    time.Duration
	migrate           bool
	decimalState      bool
}

// usageError is a configuration mistake: exit code 2.
type usageError = settings.UsageError

var usagef = settings.Usagef

// helpText follows the settings in -h.
const helpText = `Subcommands:
  sluice-sync [flags]                  run the worker (the default)
  sluice-sync healthcheck [-url URL]   check a running worker's /healthz

Keeps the bucket hashes in Redis equal to the definitions in MySQL.
`

// bind binds the worker's settings to a fresh set.
func bind(cfg *config, getenv func(string) string, output io.Writer) *settings.Set {
	s := settings.New("sluice-sync", "sluice-sync [flags] | sluice-sync healthcheck [-url URL]", getenv, output)
	s.Footer(helpText)
	cfg.stores.Bind(s)
	s.Duration(&cfg.pollInterval, "poll-interval", "SLUICE_POLL_INTERVAL", "pause between polls of an empty outbox")
	s.Duration(&cfg.reconcileInterval, "reconcile-interval", "SLUICE_RECONCILE_INTERVAL", "period of the full reconcile")
	s.Int(&cfg.batchSize, "batch-size", "SLUICE_BATCH_SIZE", "most change events applied per poll")
	s.String(&cfg.httpAddr, "http-addr", "SLUICE_HTTP_ADDR", `address of /healthz, /readyz and /metrics; empty or "off" disables`)
	s.LogLevel(&cfg.logLevel)
	s.StartupTimeout(&cfg.startupTimeout)
	s.Bool(&cfg.migrate, "migrate", "SLUICE_MIGRATE", "apply database migrations at start-up")
	s.Bool(&cfg.decimalState, "decimal-state", "SLUICE_DECIMAL_STATE",
		"keep bucket states in the decimal form that clients before the binary state read (rolling upgrades)")
	return s
}

// parseConfig reads the environment through getenv, then args, which
// override it.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	cfg := config{
		pollInterval:      syncer.DefaultPollInterval,
		reconcileInterval: syncer.DefaultReconcileInterval,
		batchSize:         syncer.DefaultBatchSize,
		httpAddr:          ":9090",
		startupTimeout:    15 * time.Second,
		migrate:           true,
	}
	s := bind(&cfg, getenv, output)
	if err := s.Parse(args); err != nil {
		return cfg, err
	}
	if err := s.NoArgs(); err != nil {
		return cfg, err
	}
	if cfg.httpAddr == "off" {
		cfg.httpAddr = ""
	}
	switch {
	case cfg.pollInterval <= 0:
		return cfg, usagef("poll interval must be positive")
	case cfg.reconcileInterval < time.Second:
		return cfg, usagef("reconcile interval must be at least 1s, got %s", cfg.reconcileInterval)
	case cfg.startupTimeout <= 0:
		return cfg, usagef("start-up timeout must be positive")
	case cfg.batchSize < 1 || cfg.batchSize > 10000:
		return cfg, usagef("batch size must be between 1 and 10000, got %d", cfg.batchSize)
	}
	return cfg, cfg.stores.Check()
}
