package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"-reconcile-interval", "45s", "-redis-addr", "r:2"}, envOf(map[string]string{
		"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice", "SLUICE_REDIS_ADDR": "r:1", "SLUICE_KEY_PREFIX": "x:",
		"SLUICE_RECONCILE_INTERVAL": "10", "SLUICE_POLL_INTERVAL": "250ms", "SLUICE_HTTP_ADDR": "127.0.0.1:9999",
		"SLUICE_LOG_LEVEL": "debug",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.reconcileInterval != 45*time.Second || cfg.pollInterval != 250*time.Millisecond || cfg.stores.Redis.Addr != "r:2" ||
		cfg.stores.KeyPrefix != "x:" || cfg.httpAddr != "127.0.0.1:9999" || cfg.logLevel.String() != "DEBUG" || !cfg.migrate {
		t.Fatalf("flags must override the environment: %+v", cfg)
	}
	cfg, err = parseConfig(nil, envOf(map[string]string{
		"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice", "SLUICE_REDIS_SENTINEL_MASTER": "m", "SLUICE_REDIS_SENTINEL_ADDRS": "s1:1,s2:2",
		"SLUICE_RECONCILE_INTERVAL": "10",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.stores.Redis.Mode() != "sentinel" || cfg.reconcileInterval != 10*time.Second || cfg.httpAddr != ":9090" {
		t.Fatalf("sentinel config: %+v", cfg)
	}
}

func TestParseConfigErrors(t *testing.T) {
	base := map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice", "SLUICE_REDIS_ADDR": "r:1"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no mysql", map[string]string{"SLUICE_REDIS_ADDR": "r:1"}, nil, "SLUICE_MYSQL_DSN"},
		{"no redis", map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice"}, nil, "SLUICE_REDIS_ADDR"},
		{"two redis modes", map[string]string{"SLUICE_REDIS_CLUSTER": "c:1"}, nil, "more than one way"},
		{"bad interval", map[string]string{"SLUICE_RECONCILE_INTERVAL": "often"}, nil, "SLUICE_RECONCILE_INTERVAL"},
		{"short interval", nil, []string{"-reconcile-interval", "10ms"}, "at least 1s"},
		{"bad batch", map[string]string{"SLUICE_BATCH_SIZE": "lots"}, nil, "SLUICE_BATCH_SIZE"},
		{"batch too big", nil, []string{"-batch-size", "100000"}, "batch size"},
		{"unknown flag", nil, []string{"-frobnicate"}, "frobnicate"},
		{"stray argument", nil, []string{"extra"}, "unexpected argument"},
		{"bad level", nil, []string{"-log-level", "loud"}, "log level"},
		{"bad poll", nil, []string{"-poll-interval", "-1s"}, "poll interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			if tc.name == "no mysql" {
				delete(env, "SLUICE_MYSQL_DSN")
			}
			if tc.name == "no redis" {
				delete(env, "SLUICE_REDIS_ADDR")
			}
			_, err := parseConfig(tc.args, envOf(env), io.Discard)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error mentioning %q", err, tc.want)
			}
			if exitCode(err) != 2 {
				t.Fatalf("exit code %d, want 2", exitCode(err))
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
	if strings.Contains(out.String(), "hunter") || !strings.Contains(out.String(), "SLUICE_MYSQL_DSN") {
		t.Fatalf("help output leaks a secret or misses the variables:\n%s", out.String())
	}
}
