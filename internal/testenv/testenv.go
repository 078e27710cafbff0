// Package testenv gives tests real servers: a fresh MySQL database and a
// private Redis key space per caller on the shared servers that `make test`
// starts, and private redis-server and mariadbd processes for tests that
// stop, pause or flush them.
//
// The shared servers are named by SLUICE_TEST_MYSQL_DSN (a root DSN without a
// database) and SLUICE_TEST_REDIS_ADDR. When one is missing the test is
// skipped with a message, unless SLUICE_TEST_REQUIRE=1 (set by `make test`
// and CI), where it fails: CI must never pass by skipping.
//
// The Redis half (shared and private servers, Sentinel, Cluster, ports and
// processes) is owned by the contract's module, internal/redisscript/testenv,
// so that the client's and the contract's tests need nothing of this module;
// this package re-exports it and adds MySQL and MariaDB.
package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	redistest "github.com/sluicehq/sluice/internal/redisscript/testenv"
	"github.com/sluicehq/sluice/migrations"
)

// The Redis half, re-exported.
type (
	// Process is a server process a test started and owns.
	Process = redistest.Process
	// RedisServer is a private redis-server on a loopback port.
	RedisServer = redistest.RedisServer
	// Cluster is a private Redis Cluster.
	Cluster = redistest.Cluster
	// Sentinel is a private primary, replica and three sentinels.
	Sentinel = redistest.Sentinel
)

const (
	// ClosedAddr is a loopback address nothing listens on.
	ClosedAddr = redistest.ClosedAddr
	// SentinelMaster is the master name the sentinels of StartSentinel monitor.
	SentinelMaster = redistest.SentinelMaster
)

var (
	// Required reports whether missing servers must fail tests rather than skip them.
	Required = redistest.Required
	// Unavailable skips t, or fails it under `make test`, because what is missing.
	Unavailable = redistest.Unavailable
	// LookPath finds a server binary, also in the sbin directories.
	LookPath = redistest.LookPath
	// FreePort returns a loopback TCP port no other test is handed.
	FreePort = redistest.FreePort
	// RedisAddr returns the address of the shared test Redis server.
	RedisAddr = redistest.RedisAddr
	// Redis returns a client of the shared test Redis server and a key prefix of its own.
	Redis = redistest.Redis
	// StartRedis starts a private redis-server, stopped when the test ends.
	StartRedis = redistest.StartRedis
	// StartCluster starts a private Redis Cluster of masters.
	StartCluster = redistest.StartCluster
	// StartSentinel starts a private primary, a replica and three sentinels.
	StartSentinel = redistest.StartSentinel
)

// MySQLDSN creates a fresh database, applies every migration and returns its
// DSN. The database is dropped when t ends.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	root := os.Getenv("SLUICE_TEST_MYSQL_DSN")
	if root == "" {
		Unavailable(t, "MySQL (SLUICE_TEST_MYSQL_DSN)")
	}
	return freshDatabase(t, root)
}

func freshDatabase(t testing.TB, root string) string {
	t.Helper()
	ctx := context.Background()
	admin, err := database.Open(ctx, root, database.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("connect to test mysql: %v", err)
	}
	defer admin.Close()
	name := redistest.UniqueName("sluice_t")
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		db, err := database.Open(context.Background(), root, database.Options{MaxOpenConns: 1})
		if err != nil {
			return // the server is gone; its temp datadir goes with it
		}
		defer db.Close()
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name)
	})
	cfg, err := mysql.ParseDSN(root)
	if err != nil {
		t.Fatalf("parse SLUICE_TEST_MYSQL_DSN: %v", err)
	}
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	if err := migrations.Up(dsn); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return dsn
}

// MySQL returns a pool on a fresh, migrated database, closed when t ends.
func MySQL(t testing.TB) *sqlx.DB {
	t.Helper()
	dsn := MySQLDSN(t)
	db, err := database.Open(context.Background(), dsn, database.Options{})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
