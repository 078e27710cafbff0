package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/startup"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/migrations"
)

// childEnv makes the test binary act as the sluice-sync program, so tests
// can run, kill and restart real worker processes.
const childEnv = "SLUICE_SYNC_TEST_AS_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		startup.Main("sluice-sync", worker.Run) // as main does
	}
	os.Exit(m.Run())
}

var actor = audit.Actor{User: "tester", Via: "test"}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func TestServe(t *testing.T) {
	t.Parallel()
	dsn := testenv.MySQLDSN(t)
	// Start from an empty database: the worker applies the migrations.
	if err := migrations.Down(dsn); err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testenv.Redis(t)
	port := testenv.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	env := envOf(map[string]string{
		"SLUICE_MYSQL_DSN": dsn, "SLUICE_REDIS_ADDR": testenv.RedisAddr(t), "SLUICE_KEY_PREFIX": prefix,
		"SLUICE_HTTP_ADDR": "127.0.0.1:" + strconv.Itoa(port), "SLUICE_LOG_LEVEL": "warn",
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, nil, env) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after cancel: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return after cancel")
		}
	}()

	// Ready, and the start-up reconcile done: one still running could put
	// the bucket below into Redis before its event does.
	if !eventually(15*time.Second, func() bool {
		code, body := get(t, base+"/readyz")
		return code == 200 && strings.Contains(body, `"last_reconcile"`)
	}) {
		code, body := get(t, base+"/readyz")
		t.Fatalf("never ready: %d %s", code, body)
	}
	if code, body := get(t, base+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if err := worker.Run(context.Background(), []string{"healthcheck", "-url", base + "/healthz"}, env); err != nil {
		t.Fatalf("healthcheck subcommand: %v", err)
	}
	if err := worker.Run(context.Background(), []string{"healthcheck", "-url", base + "/nothing"}, env); err == nil {
		t.Fatal("healthcheck of a 404 passed")
	}

	db, err := database.Open(ctx, dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := apps.NewStore(db).Create(ctx, actor, &apps.App{Name: "svc"}); err != nil {
		t.Fatalf("the worker did not migrate the database: %v", err)
	}
	rate, _ := buckets.ParseRate("10/s")
	b := &buckets.Bucket{Name: "served", OwnerApp: "svc", MaxPermits: 10, Rate: rate}
	if err := buckets.NewStore(db).Create(ctx, actor, b); err != nil {
		t.Fatal(err)
	}
	ks := redisscript.Keyspace{Prefix: prefix}
	if !eventually(15*time.Second, func() bool {
		st, err := redisscript.Read(ctx, rdb, ks, "served")
		return err == nil && st.Exists && st.Config.ID == b.ID
	}) {
		t.Fatal("bucket never reached redis")
	}
	// The worker counts an event just after writing it to Redis: wait for
	// the counters too.
	wants := []string{
		`sluice_sync_events_applied_total{op="upsert",outcome="created"} 1`,
		"sluice_sync_propagation_lag_seconds_count 1",
		`sluice_sync_reconcile_repairs_total{kind="missing"}`,
		`sluice_sync_errors_total{stage="poll"} 0`,
		"go_goroutines",
	}
	var code int
	var body, missing string
	eventually(10*time.Second, func() bool {
		code, body = get(t, base+"/metrics")
		missing = ""
		for _, want := range wants {
			if code != 200 || !strings.Contains(body, want) {
				missing = want
				return false
			}
		}
		return true
	})
	if missing != "" {
		t.Fatalf("/metrics (%d) lacks %q:\n%s", code, missing, body)
	}
	if code, body := get(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"mysql":"ok"`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}
}

func TestUnreachableStoresAtStart(t *testing.T) {
	t.Parallel()
	closed := testenv.ClosedAddr
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"mysql", map[string]string{"SLUICE_MYSQL_DSN": "root@tcp(" + closed + ")/x", "SLUICE_REDIS_ADDR": testenv.RedisAddr(t)}, "mysql is unreachable"},
		{"redis", map[string]string{"SLUICE_MYSQL_DSN": testenv.MySQLDSN(t), "SLUICE_REDIS_ADDR": closed}, "redis is unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["SLUICE_STARTUP_TIMEOUT"] = "700ms"
			tc.env["SLUICE_HTTP_ADDR"] = ""
			tc.env["SLUICE_LOG_LEVEL"] = "error"
			start := time.Now()
			err := worker.Run(context.Background(), nil, envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if exitCode(err) != 1 {
				t.Fatalf("exit code %d, want 1", exitCode(err))
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("gave up only after %v", d)
			}
		})
	}
}

func TestBadConfigExitCode(t *testing.T) {
	t.Parallel()
	err := worker.Run(context.Background(), nil, envOf(nil))
	var ue usageError
	if !errors.As(err, &ue) || exitCode(err) != 2 {
		t.Fatalf("err = %v (exit %d), want a usage error and exit 2", err, exitCode(err))
	}
	if err := worker.Run(context.Background(), []string{"-h"}, envOf(nil)); exitCode(err) != 0 {
		t.Fatalf("-h: %v", err)
	}
	if err := worker.Run(context.Background(), []string{"healthcheck", "-url", "::bad"}, envOf(nil)); exitCode(err) == 0 {
		t.Fatal("healthcheck of a bad url passed")
	}
}
