package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/decision"
	"github.com/sluicehq/sluice/internal/startup"
)

// worker is the whole program; main adds signals and the exit code.
var worker = startup.Worker[config]{
	Program: "sluice-decide", HealthURL: "http://127.0.0.1:8082/healthz",
	Parse: parseConfig, Serve: serve,
	LogLevel: func(c config) slog.Level { return c.logLevel },
}

// serve connects to the stores and answers until ctx ends, then shuts
// down gracefully.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.gcPercent > 0 {
		debug.SetGCPercent(cfg.gcPercent)
	}
	db, err := startup.Wait(ctx, cfg.startupTimeout, log, "mysql", func(ctx context.Context) (*sqlx.DB, error) {
		return database.Open(ctx, cfg.stores.MySQLDSN, database.Options{MaxOpenConns: 4})
	})
	if err != nil {
		return fmt.Errorf("mysql is unreachable: %w", err)
	}
	defer db.Close()
	rdb, err := cfg.stores.Redis.Open(ctx)
	if err != nil {
		// Not fatal: the failure policy answers until Redis is back.
		log.Warn("redis does not answer yet; the failure policy answers until it does", "err", err)
		if rdb, err = cfg.stores.Redis.Client(); err != nil {
			return usageError{Err: err}
		}
	}
	defer rdb.Close()

	reg := startup.NewRegistry()
	loadCtx, cancel := context.WithTimeout(ctx, cfg.startupTimeout)
	srv, err := decision.Start(loadCtx, decision.ServerConfig{
		DB: db, Redis: rdb, KeyPrefix: cfg.stores.KeyPrefix, GRPCAddr: cfg.grpcAddr, HTTPAddr: cfg.httpAddr,
		MetricsAddr: cfg.metricsAddr,
		Unmatched:   cfg.unmatched, Headers: cfg.headers, CriticalEntry: cfg.criticalEntry,
		Client: []client.Option{
			client.WithFailurePolicy(cfg.policy), client.WithTimeout(cfg.timeout), client.WithInstances(cfg.instances),
		},
		CountUsage: cfg.countUsage, RefreshInterval: cfg.refreshInterval, Registry: reg, Logger: log,
		Limits: cfg.limits, TLS: cfg.tls,
	})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	log.Info("sluice-decide started", "grpc", srv.GRPCAddr(), "http", srv.HTTPAddr(), "metrics", srv.MetricsAddr(), "tls", cfg.tls.Enabled(), "mtls", cfg.tls.ClientCAFile != "",
		"redis", cfg.stores.Redis.String(), "unmatched", cfg.unmatched.String(), "failure_policy", cfg.policy.String())
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-srv.Err():
		runErr = fmt.Errorf("listener failed: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownTimeout)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	log.Info("sluice-decide stopped")
	return runErr
}
