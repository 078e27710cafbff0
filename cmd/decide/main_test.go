package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/decision"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/settings"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/internal/testenv"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"-unmatched", "deny", "-redis-addr", "r:2", "-timeout", "20ms"}, envOf(map[string]string{
		"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice", "SLUICE_REDIS_ADDR": "r:1", "SLUICE_KEY_PREFIX": "x:",
		"SLUICE_UNMATCHED": "allow", "SLUICE_HEADERS": "both", "SLUICE_FAILURE_POLICY": "closed",
		"SLUICE_GRPC_ADDR": "127.0.0.1:1", "SLUICE_HTTP_ADDR": "127.0.0.1:2", "SLUICE_INSTANCES": "3",
		"SLUICE_COUNT_USAGE": "false", "SLUICE_TIMEOUT": "30ms",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.unmatched != decision.UnmatchedDeny || cfg.headers != decision.HeadersBoth || cfg.policy != client.FailClosed ||
		cfg.stores.Redis.Addr != "r:2" || cfg.stores.KeyPrefix != "x:" || cfg.grpcAddr != "127.0.0.1:1" || cfg.httpAddr != "127.0.0.1:2" ||
		cfg.instances != 3 || cfg.countUsage || cfg.timeout != 20*time.Millisecond {
		t.Fatalf("flags must override the environment: %+v", cfg)
	}
	cfg, err = parseConfig(nil, envOf(map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice", "SLUICE_REDIS_ADDR": "r:1"}), io.Discard)
	if err != nil || cfg.grpcAddr != ":8081" || cfg.httpAddr != ":8082" || cfg.unmatched != decision.UnmatchedAllow ||
		cfg.policy != client.FailLocal || !cfg.countUsage || cfg.gcPercent != defaultGCPercent {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	// GOGC in the environment is the runtime's to apply: no default then.
	cfg, err = parseConfig(nil, envOf(map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice", "SLUICE_REDIS_ADDR": "r:1",
		"GOGC": "100"}), io.Discard)
	if err != nil || cfg.gcPercent != 0 {
		t.Fatalf("with GOGC set: gc percent %d, %v", cfg.gcPercent, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no mysql", map[string]string{"SLUICE_MYSQL_DSN": ""}, nil, "SLUICE_MYSQL_DSN"},
		{"no redis", map[string]string{"SLUICE_REDIS_ADDR": ""}, nil, "SLUICE_REDIS_ADDR"},
		{"bad unmatched", map[string]string{"SLUICE_UNMATCHED": "maybe"}, nil, "allow or deny"},
		{"bad headers", nil, []string{"-headers", "all"}, "draft, x, both or none"},
		{"bad policy", nil, []string{"-failure-policy", "retry"}, "local, open or closed"},
		{"bad timeout", map[string]string{"SLUICE_TIMEOUT": "soon"}, nil, "SLUICE_TIMEOUT"},
		{"zero timeout", nil, []string{"-timeout", "0s"}, "timeout must be positive"},
		{"bad instances", map[string]string{"SLUICE_INSTANCES": "many"}, nil, "SLUICE_INSTANCES"},
		{"no instances", nil, []string{"-instances", "0"}, "at least 1"},
		{"bad usage", map[string]string{"SLUICE_COUNT_USAGE": "sometimes"}, nil, "SLUICE_COUNT_USAGE"},
		{"fast refresh", nil, []string{"-refresh-interval", "1ms"}, "refresh interval"},
		{"no grpc", nil, []string{"-grpc-addr", ""}, "gRPC"},
		{"stray argument", nil, []string{"extra"}, "unexpected argument"},
		{"bad level", nil, []string{"-log-level", "loud"}, "log level"},
		{"tls cert without key", map[string]string{"SLUICE_TLS_CERT_FILE": "server.pem"}, nil, "both -tls-cert and -tls-key"},
		{"client ca without tls", nil, []string{"-tls-client-ca", "ca.pem"}, "-tls-client-ca needs"},
		{"negative max conns", nil, []string{"-max-conns", "-1"}, "max-conns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice", "SLUICE_REDIS_ADDR": "r:1"}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := parseConfig(tc.args, envOf(env), io.Discard)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error mentioning %q", err, tc.want)
			}
			if settings.ExitCode("sluice-decide", err, io.Discard) != 2 {
				t.Fatalf("exit code %d, want 2", settings.ExitCode("sluice-decide", err, io.Discard))
			}
		})
	}
}

func TestHelpHidesSecrets(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"-h"}, envOf(map[string]string{
		"SLUICE_MYSQL_DSN": "u:hunter2@tcp(db:3306)/sluice", "SLUICE_REDIS_ADDR": "r:1", "SLUICE_REDIS_PASSWORD": "hunter3",
	}), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if strings.Contains(out.String(), "hunter") || !strings.Contains(out.String(), "SLUICE_UNMATCHED") {
		t.Fatalf("help output leaks a secret or misses the variables:\n%s", out.String())
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The binary end to end: start, ready, decide, stop on cancel (what
// SIGTERM does through signal.NotifyContext) with calls finished.
func TestServe(t *testing.T) {
	t.Parallel()
	dsn := testenv.MySQLDSN(t)
	db, err := database.Open(context.Background(), dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	actor := audit.Actor{User: "tester", Via: "test"}
	if err := apps.NewStore(db).Create(ctx, actor, &apps.App{Name: "edge"}); err != nil {
		t.Fatal(err)
	}
	rate, _ := buckets.ParseRate("1/day")
	if err := buckets.NewStore(db).Create(ctx, actor, &buckets.Bucket{Name: "checkout", OwnerApp: "edge", MaxPermits: 2, Rate: rate}); err != nil {
		t.Fatal(err)
	}
	token, _, err := apptokens.NewStore(db).Create(ctx, actor, "edge", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testenv.Redis(t)
	if _, err := syncer.New(syncer.Config{Buckets: buckets.NewStore(db), Redis: rdb,
		Keyspace: redisscript.Keyspace{Prefix: prefix}}).SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}

	httpPort, metricsPort := testenv.FreePort(t), testenv.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	env := envOf(map[string]string{
		"SLUICE_MYSQL_DSN": dsn, "SLUICE_REDIS_ADDR": testenv.RedisAddr(t), "SLUICE_KEY_PREFIX": prefix,
		"SLUICE_HTTP_ADDR": "127.0.0.1:" + strconv.Itoa(httpPort), "SLUICE_GRPC_ADDR": "127.0.0.1:0",
		"SLUICE_METRICS_ADDR": "127.0.0.1:" + strconv.Itoa(metricsPort),
		"SLUICE_LOG_LEVEL":    "warn",
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.Run(runCtx, nil, env) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after cancel: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("run did not return after cancel")
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, base+"/readyz")
		if code == 200 && strings.Contains(body, `"ready":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, want := range []int{200, 200, 403} {
		req, _ := http.NewRequest("GET", base+"/v1/acquire?bucket=checkout", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("call %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if err := worker.Healthcheck(ctx, []string{"-url", base + "/healthz"}, io.Discard); err != nil {
		t.Fatalf("healthcheck: %v", err)
	}
	if code, body := get(t, "http://127.0.0.1:"+strconv.Itoa(metricsPort)+"/metrics"); code != 200 ||
		!strings.Contains(body, "sluice_decide_requests_total") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics: %d", code)
	}
	if code, _ := get(t, base+"/metrics"); code != http.StatusNotFound {
		t.Fatalf("metrics on the decision port: %d, want 404", code)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
	done <- nil // for the deferred check
	if code, _ := get(t, base+"/healthz"); code != 0 {
		t.Fatalf("still serving after stop: %d", code)
	}
}
