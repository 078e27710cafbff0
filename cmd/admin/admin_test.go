package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/testenv"
)

// call runs the program with args and stdin and returns its output.
func call(t *testing.T, ctx context.Context, getenv func(string) string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := dispatch(ctx, env{args: args, getenv: getenv, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut})
	return out.String(), errOut.String(), err
}

func noEnv(string) string { return "" }

func TestCreateUserAndSetPassword(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	ctx := context.Background()
	out, _, err := call(t, ctx, noEnv, "a long password\n", "create-user", "-mysql-dsn", dsn, "-username", "root-admin", "-password-stdin", "-admin")
	if err != nil || !strings.Contains(out, `created admin "root-admin"`) {
		t.Fatalf("create-user: %q %v", out, err)
	}
	db, err := database.Open(ctx, dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	acc := accounts.NewStore(db)
	if _, err := acc.Authenticate(ctx, "root-admin", "a long password"); err != nil {
		t.Fatalf("the new admin cannot sign in: %v", err)
	}
	enf, err := rbac.New(ctx, db)
	if err != nil || !enf.IsAdmin("root-admin") {
		t.Fatalf("root-admin is not an admin (%v)", err)
	}

	// The password comes from standard input only, never from the arguments.
	_, _, err = call(t, ctx, noEnv, "", "create-user", "-mysql-dsn", dsn, "-username", "x")
	var ue usageError
	if !errors.As(err, &ue) || exitCode(err) != 2 {
		t.Fatalf("create-user without -password-stdin: %v", err)
	}
	_, _, err = call(t, ctx, noEnv, "short\n", "create-user", "-mysql-dsn", dsn, "-username", "bob", "-password-stdin")
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "password") {
		t.Fatalf("short password: %v", err)
	}
	_, _, err = call(t, ctx, noEnv, "a long password\n", "create-user", "-mysql-dsn", dsn, "-username", "root-admin", "-password-stdin")
	if err == nil {
		t.Fatal("a second user with the same name was created")
	}

	out, _, err = call(t, ctx, func(k string) string {
		if k == "SLUICE_MYSQL_DSN" {
			return dsn
		}
		return ""
	}, "another long password\r\n", "set-password", "-username", "root-admin", "-password-stdin")
	if err != nil || !strings.Contains(out, "password of") {
		t.Fatalf("set-password: %q %v", out, err)
	}
	if _, err := acc.Authenticate(ctx, "root-admin", "another long password"); err != nil {
		t.Fatalf("new password refused: %v", err)
	}
	if _, _, err := call(t, ctx, noEnv, "another long password\n", "set-password", "-mysql-dsn", dsn, "-username", "ghost", "-password-stdin"); err == nil {
		t.Fatal("set-password of a missing user succeeded")
	}

	out, _, err = call(t, ctx, noEnv, "", "migrate", "-mysql-dsn", dsn, "version")
	if err != nil || strings.TrimSpace(out) == "" || strings.TrimSpace(out) == "0" {
		t.Fatalf("migrate version: %q %v", out, err)
	}
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"frobnicate"},
		{"migrate", "-mysql-dsn", "root@tcp(127.0.0.1:1)/x", "sideways"},
		{"serve"},                                // no MySQL configured
		{"serve", "-mysql-dsn", "root@tcp(x)/y"}, // no Redis configured
		{"serve", "-no-such-flag"},
	} {
		_, _, err := call(t, ctx, noEnv, "", args...)
		if exitCode(err) != 2 {
			t.Errorf("%v: exit code %d (%v), want 2", args, exitCode(err), err)
		}
	}
	out, _, err := call(t, ctx, noEnv, "", "help")
	if err != nil || !strings.Contains(out, "create-user") {
		t.Fatalf("help: %q %v", out, err)
	}
}

// syncBuffer is a bytes.Buffer safe to write from the server goroutine
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServe(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	redisAddr := testenv.RedisAddr(t)
	_, prefix := testenv.Redis(t)
	port := testenv.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- dispatch(ctx, env{getenv: noEnv, stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr,
			args: []string{"serve", "-mysql-dsn", dsn, "-redis-addr", redisAddr, "-key-prefix", prefix,
				"-listen", "127.0.0.1:" + strconv.Itoa(port), "-log-level", "warn"}})
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitHealthy(t, base, done, stderr)
	if !regexp.MustCompile(`Sluice console on http://127\.0\.0\.1:\d+`).MatchString(stderr.String()) {
		t.Errorf("serve does not print its address: %q", stderr.String())
	}
	for path, want := range map[string]int{"/login": 200, "/buckets": 200, "/api/v1/openapi.json": 200, "/api/v1/me": 401} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after a requested stop", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}
