// Package startup is what the binaries share: waiting for their stores at
// start-up, the run and healthcheck commands, and the probe and metrics
// endpoints.
package startup

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/settings"
)

// Wait calls open until it succeeds, ctx ends or timeout passes, so that a
// store still starting next to the binary does not fail it, while a wrong
// address still ends with a clear error (the last one open returned). Each
// attempt is bounded by 5 s; waits between attempts grow from 200 ms to 2 s.
func Wait[T any](ctx context.Context, timeout time.Duration, log *slog.Logger, what string,
	open func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 200 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, min(5*time.Second, timeout))
		v, err := open(actx)
		acancel()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return v, err
		}
		log.Warn("waiting for "+what, "err", err, "retry_in", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// StoreSettings are where a worker finds its stores: the settings
// sluice-sync and sluice-decide share.
type StoreSettings struct {
	MySQLDSN string
	Redis    redisconn.Options
	// KeyPrefix of the Redis keys, the same for every binary.
	KeyPrefix string
}

// Bind binds the settings to s.
func (c *StoreSettings) Bind(s *settings.Set) {
	s.MySQLDSN(&c.MySQLDSN)
	c.Redis.Bind(s)
	s.String(&c.KeyPrefix, "key-prefix", "SLUICE_KEY_PREFIX", `Redis key prefix of bucket hashes; empty means "sluice:"`)
}

// Check refuses, after s is parsed, settings that no store could answer.
func (c StoreSettings) Check() error {
	if err := CheckDSN(c.MySQLDSN); err != nil {
		return err
	}
	if err := c.Redis.Validate(); err != nil {
		return settings.UsageError{Err: err}
	}
	return nil
}

// Stores is what a binary runs on.
type Stores struct {
	DB    *sqlx.DB
	Redis redis.UniversalClient
}

// Close closes both stores.
func (s Stores) Close() {
	s.Redis.Close()
	s.DB.Close()
}

// Open waits for MySQL at dsn (a pool of pool), applies the migrations
// with migrate unless it is nil (migrations.Up: passed in, so that a
// binary that never migrates does not link the migration library), then
// waits for Redis, each for up to timeout.
func Open(ctx context.Context, timeout time.Duration, log *slog.Logger, dsn string, pool database.Options,
	migrate func(dsn string) error, openRedis func(context.Context) (redis.UniversalClient, error)) (Stores, error) {
	db, err := Wait(ctx, timeout, log, "mysql", func(ctx context.Context) (*sqlx.DB, error) {
		return database.Open(ctx, dsn, pool)
	})
	if err != nil {
		return Stores{}, fmt.Errorf("mysql is unreachable: %w", err)
	}
	if migrate != nil {
		if err := migrate(dsn); err != nil {
			db.Close()
			return Stores{}, fmt.Errorf("migrate database: %w", err)
		}
	}
	rdb, err := Wait(ctx, timeout, log, "redis", openRedis)
	if err != nil {
		db.Close()
		return Stores{}, fmt.Errorf("redis is unreachable: %w", err)
	}
	return Stores{DB: db, Redis: rdb}, nil
}

// Main runs a binary's run function with a context that ends on SIGINT or
// SIGTERM, and exits with the code settings.ExitCode gives its error.
func Main(program string, run func(ctx context.Context, args []string, getenv func(string) string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv)
	stop()
	os.Exit(settings.ExitCode(program, err, os.Stderr))
}

// CheckDSN refuses a missing or malformed MySQL DSN at once: retrying it
// for the start-up timeout, as if MySQL were down, could never help.
func CheckDSN(dsn string) error {
	if strings.TrimSpace(dsn) == "" {
		return settings.Usagef("mysql is not configured: set SLUICE_MYSQL_DSN or -mysql-dsn")
	}
	if _, err := database.Config(dsn); err != nil {
		return settings.Usagef("SLUICE_MYSQL_DSN or -mysql-dsn: %v", err)
	}
	return nil
}
