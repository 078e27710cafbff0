//go:build dev

package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestDevStack is the newcomer's path: `admin -dev`, sign in through the
// console over HTTP, create a bucket, let the sync loop carry it to the
// embedded Redis, and take tokens through the client until it says no.
// It needs no servers: everything runs in this process.
func TestDevStack(t *testing.T) {
	port := testenv.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- dispatch(ctx, env{getenv: noEnv, stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr,
			args: []string{"-dev", "-listen", "127.0.0.1:" + strconv.Itoa(port), "-log-level", "warn"}})
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitHealthy(t, base, done, stderr)

	banner := stderr.String()
	password := regexp.MustCompile(`with password "([^"]+)"`).FindStringSubmatch(banner)
	redisAddr := regexp.MustCompile(`Redis for clients: (127\.0\.0\.1:\d+)`).FindStringSubmatch(banner)
	if password == nil || redisAddr == nil {
		t.Fatalf("the -dev banner must print the admin password and the Redis address:\n%s", banner)
	}
	// A line to paste into another terminal, with the same addresses.
	exp := regexp.MustCompile(`(?m)^export SLUICE_CONSOLE=(\S+) SLUICE_REDIS=(\S+) SLUICE_DECIDE=(http://\S+) SLUICE_TOKEN=(\S+)$`).FindStringSubmatch(banner)
	if exp == nil || exp[1] != base || exp[2] != redisAddr[1] {
		t.Fatalf("the -dev banner must print a pasteable export line with the console at %s and Redis at %v:\n%s", base, redisAddr, banner)
	}
	// A second instance on the same address says so and how to move it,
	// and prints no password that would not work.
	second := &syncBuffer{}
	err := dispatch(ctx, env{getenv: noEnv, stdin: strings.NewReader(""), stdout: io.Discard, stderr: second,
		args: []string{"-dev", "-listen", "127.0.0.1:" + strconv.Itoa(port), "-log-level", "warn"}})
	if err == nil || !strings.Contains(err.Error(), "-listen 127.0.0.1:") || strings.Contains(second.String(), "password") {
		t.Fatalf("a second -dev on a taken port: %v\n%s", err, second.String())
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	post := func(path string, form url.Values) *http.Response {
		t.Helper()
		resp, err := browser.PostForm(base+path, form)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("/login", url.Values{"username": {"admin"}, "password": {password[1]}}); resp.StatusCode != http.StatusOK ||
		resp.Request.URL.Path == "/login" {
		t.Fatalf("sign-in: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	resp := post("/buckets", url.Values{"name": {"newcomer"}, "owner_app": {"demo"}, "max_permits": {"3"},
		"rate": {"1 per minute"}, "allowed_apps": {"demo"}, "description": {"made in a test"}})
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/buckets/newcomer" {
		t.Fatalf("create bucket: %d at %s, want the new bucket's page", resp.StatusCode, resp.Request.URL)
	}

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr[1]})
	defer rdb.Close()
	l, err := client.New(rdb, "demo", client.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The sync loop polls the outbox every 100 ms; give a loaded machine
	// far longer.
	var res client.Result
	for deadline := time.Now().Add(20 * time.Second); ; {
		res, err = l.Acquire(ctx, "newcomer", 1)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket never reached the embedded redis: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	granted := 0
	for res.Allowed {
		granted++
		if res, err = l.Acquire(ctx, "newcomer", 1); err != nil {
			t.Fatal(err)
		}
	}
	if granted != 3 || res.RetryAfter <= 0 {
		t.Fatalf("granted %d before a denial (retry after %v), want the capacity of 3", granted, res.RetryAfter)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("-dev returned %v after a requested stop", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("-dev did not stop")
	}
}
