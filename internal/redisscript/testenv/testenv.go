// Package testenv gives the contract's and the client's tests real Redis
// servers: a private key space per caller on the shared server that
// `make test` starts, and private redis-server, Sentinel and Cluster
// processes for tests that stop, pause or flush them. It lives in the
// contract's module, which requires go-redis alone, so that a service
// requiring the client does not inherit the server's test dependencies;
// the root module's internal/testenv adds MySQL and MariaDB on top of it.
//
// The shared server is named by SLUICE_TEST_REDIS_ADDR. When it is missing
// the test is skipped with a message, unless SLUICE_TEST_REQUIRE=1 (set by
// `make test` and CI), where it fails: CI must never pass by skipping.
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

	"github.com/redis/go-redis/v9"
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

// UniqueName returns a name no other test of any concurrent package uses.
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%d_%d_%s", prefix, os.Getpid(), seq.Add(1), hex.EncodeToString(b[:]))
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
	prefix := UniqueName("t") + ":"
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
// mariadbd and redis-sentinel but a user's PATH often does not reach.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, ok := lookPath(name)
	if !ok {
		Unavailable(t, name)
	}
	return p
}

func lookPath(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin"} {
		p := dir + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, true
		}
	}
	return "", false
}

// WaitFor polls ok every 20 ms until it returns true or d passes.
func WaitFor(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ok()
}
