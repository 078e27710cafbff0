// Package testenv gives tests real servers: a fresh MySQL database and a
// private Redis key space per caller on the shared servers that `make test`
// starts, and private redis-server and mariadbd processes for tests that
// stop, pause or flush them.
//
// The shared servers are named by SLUICE_TEST_MYSQL_DSN (a root DSN without a
// database) and SLUICE_TEST_REDIS_ADDR. When one is missing the test is
// skipped with a message, unless SLUICE_TEST_REQUIRE=1 (set by `make test`
// and CI), where it fails: CI must never pass by skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/migrations"
)

// Required reports whether missing servers must fail tests rather than skip them.
func Required() bool { return os.Getenv("SLUICE_TEST_REQUIRE") == "1" }

// Unavailable skips t, or fails it under `make test`, because what is missing.
func Unavailable(t testing.TB, what string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is not available, but SLUICE_TEST_REQUIRE=1 requires it", what)
	}
	t.Skipf("skipped: %s is not available; `make test` starts every server the tests need", what)
}

var seq atomic.Int64

// uniqueName returns a name no other test of any concurrent package uses.
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%d_%d_%s", prefix, os.Getpid(), seq.Add(1), hex.EncodeToString(b[:]))
}

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
	name := uniqueName("sluice_t")
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

// RedisAddr returns the address of the shared test Redis server.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("SLUICE_TEST_REDIS_ADDR")
	if addr == "" {
		Unavailable(t, "Redis (SLUICE_TEST_REDIS_ADDR)")
	}
	return addr
}

// Redis returns a client of the shared test Redis server and a key prefix
// ("t123_4_ab12cd34:") that no other test uses, so packages can run in
// parallel on one server. Keys under the prefix are deleted when t ends.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr(t)})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		rdb.Close()
		t.Fatalf("ping test redis: %v", err)
	}
	prefix := uniqueName("t") + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return rdb, prefix
}

// LookPath finds a server binary, also in /usr/sbin where Debian puts
// mariadbd but a user's PATH often does not reach.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin"} {
		p := dir + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	Unavailable(t, name)
	return ""
}

// waitFor polls ok every 20 ms until it returns true or d passes.
func waitFor(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ok()
}
