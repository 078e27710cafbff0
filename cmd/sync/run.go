package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/startup"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/internal/usage"
	"github.com/sluicehq/sluice/migrations"
)

// worker is the whole program; main adds signals and the exit code.
var worker = startup.Worker[config]{
	Program: "sluice-sync", HealthURL: "http://127.0.0.1:9090/healthz",
	Parse: parseConfig, Serve: serve,
	LogLevel: func(c config) slog.Level { return c.logLevel },
}

// serve connects to the stores, then runs the worker and the HTTP server
// until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	var migrate func(string) error
	if cfg.migrate {
		migrate = migrations.Up
	}
	st, err := startup.Open(ctx, cfg.startupTimeout, log, cfg.stores.MySQLDSN, database.Options{MaxOpenConns: 10}, migrate, cfg.stores.Redis.Open)
	if err != nil {
		return err
	}
	defer st.Close()
	db, rdb := st.DB, st.Redis
	ks := redisscript.Keyspace{Prefix: cfg.stores.KeyPrefix}

	reg := startup.NewRegistry()
	w := syncer.New(syncer.Config{
		Buckets:           buckets.NewStore(db),
		Redis:             rdb,
		Keyspace:          ks,
		PollInterval:      cfg.pollInterval,
		ReconcileInterval: cfg.reconcileInterval,
		BatchSize:         cfg.batchSize,
		Logger:            log,
		Metrics:           reg,
		DecimalState:      cfg.decimalState,
	})

	var srv *http.Server
	srvErr := make(chan error, 1)
	if cfg.httpAddr != "" {
		limits := startup.ProbeLimits()
		ln, err := limits.Listen(cfg.httpAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.httpAddr, err)
		}
		srv = limits.HTTPServer(handler(st, w, reg), log)
		log.Info("http listening", "addr", ln.Addr().String())
		go func() { srvErr <- srv.Serve(ln) }()
	}
	log.Info("sync worker starting", "redis", cfg.stores.Redis.String(), "mode", cfg.stores.Redis.Mode())

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The usage roll-up the console's bucket list and overview read, so
	// that pages never read usage from the Redis that serves acquires.
	roller := usage.NewRoller(usage.RollerConfig{DB: db, Redis: rdb, Keyspace: ks, Logger: log, Metrics: reg})
	rollDone := make(chan struct{})
	go func() { defer close(rollDone); _ = roller.Run(runCtx) }()
	defer func() { cancel(); <-rollDone }()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	var runErr error
	select {
	case runErr = <-done:
	case err := <-srvErr:
		cancel()
		<-done
		runErr = fmt.Errorf("http server: %w", err)
	}
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
	}
	return runErr
}

// handler serves the probes and metrics.
func handler(st startup.Stores, w *syncer.Worker, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	startup.Probes(mux, reg, func(ctx context.Context) (any, bool) {
		r := readiness(ctx, st, w)
		return r, r.Ready
	})
	return mux
}

// readyState is the body of /readyz.
type readyState struct {
	Ready         bool   `json:"ready"`
	MySQL         string `json:"mysql"`
	Redis         string `json:"redis"`
	LastPoll      string `json:"last_poll,omitempty"`
	LastReconcile string `json:"last_reconcile,omitempty"`
}

// readiness checks both stores and that the event loop polled recently: a
// worker stuck for a long time is not doing its job even if both stores
// answer.
func readiness(ctx context.Context, stores startup.Stores, w *syncer.Worker) readyState {
	st := readyState{Ready: true, MySQL: "ok", Redis: "ok"}
	if err := stores.DB.PingContext(ctx); err != nil {
		st.Ready, st.MySQL = false, "unreachable"
	}
	if err := stores.Redis.Ping(ctx).Err(); err != nil {
		st.Ready, st.Redis = false, "unreachable"
	}
	last := w.LastPoll()
	if last.IsZero() || time.Since(last) > 5*time.Second+10*w.PollInterval() {
		st.Ready = false
	}
	if !last.IsZero() {
		st.LastPoll = last.UTC().Format(time.RFC3339Nano)
	}
	if lr := w.LastReconcile(); !lr.IsZero() {
		st.LastReconcile = lr.UTC().Format(time.RFC3339Nano)
	}
	return st
}
