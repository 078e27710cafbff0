package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/decision"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestGatewaySameDecisions sends the same descriptors to envoyproxy/ratelimit
// running a configuration and to the decision service running its import,
// and wants the same answers up to and past each limit. It needs the
// envoy ratelimit binary: set SLUICE_ENVOY_RATELIMIT to its path (built
// from that project's src/service_cmd; `make test` builds it); without it
// the test is skipped, or fails under `make test`.
func TestGatewaySameDecisions(t *testing.T) {
	bin := os.Getenv("SLUICE_ENVOY_RATELIMIT")
	if bin == "" {
		testenv.Unavailable(t, "the envoy ratelimit binary (SLUICE_ENVOY_RATELIMIT)")
	}
	redisAddr := os.Getenv("SLUICE_TEST_REDIS_ADDR")
	if redisAddr == "" {
		testenv.Unavailable(t, "redis-server (SLUICE_TEST_REDIS_ADDR)")
	}
	// Envoy ratelimit counts in fixed windows aligned to the clock: keep
	// the comparison away from the end of an hour.
	if now := time.Now(); now.Minute() == 59 {
		time.Sleep(time.Until(now.Truncate(time.Hour).Add(time.Hour + time.Second)))
	}
	// A domain of its own: envoy ratelimit's keys carry no prefix.
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	domain := "edge" + hex.EncodeToString(rnd[:])
	config := fmt.Sprintf(`domain: %s
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: path
    value: /login
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    value: mallory
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: internal
    rate_limit: {unlimited: true}
  - key: tenant
    value: acme
    descriptors:
      - key: route
        rate_limit: {unit: day, requests_per_unit: 3}
`, domain)
	descriptors := []struct {
		entries [][2]string
		limit   int
	}{
		{[][2]string{{"remote_address", "192.0.2.1"}}, 4},
		{[][2]string{{"remote_address", "192.0.2.2"}}, 4},
		{[][2]string{{"path", "/login"}}, 2},
		{[][2]string{{"path", "/other"}}, 0},    // no limit: always allowed by both
		{[][2]string{{"user", "mallory"}}, 0},   // shadow mode: counted, never refused
		{[][2]string{{"internal", "batch"}}, 0}, // unlimited
		{[][2]string{{"tenant", "acme"}, {"route", "orders"}}, 3},
		{[][2]string{{"tenant", "acme"}, {"route", "search"}}, 3},
	}

	envoy := startEnvoyRatelimit(t, bin, redisAddr, config)
	sluice := startSluice(t, config)

	for _, d := range descriptors {
		rounds := d.limit + 2
		if d.limit == 0 {
			rounds = 5
		}
		var got [2][]string
		for i := 0; i < rounds; i++ {
			for s, call := range []func([][2]string) string{envoy, sluice} {
				got[s] = append(got[s], call(d.entries))
			}
		}
		if strings.Join(got[0], " ") != strings.Join(got[1], " ") {
			t.Errorf("descriptor %v: envoy ratelimit %v, sluice %v", d.entries, got[0], got[1])
		}
		if d.limit > 0 && (got[1][d.limit-1] != "OK" || got[1][d.limit] != "OVER_LIMIT") {
			t.Errorf("descriptor %v: answers %v do not turn at the limit %d", d.entries, got[1], d.limit)
		}
	}
}

func request(domain string, entries [][2]string) *rlsv3.RateLimitRequest {
	d := &ratelimitv3.RateLimitDescriptor{}
	for _, e := range entries {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
	}
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}, HitsAddend: 1}
}

func caller(t *testing.T, addr, domain, token string) func([][2]string) string {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := rlsv3.NewRateLimitServiceClient(conn)
	return func(entries [][2]string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		resp, err := c.ShouldRateLimit(ctx, request(domain, entries))
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		return resp.OverallCode.String()
	}
}

func domainOf(config string) string {
	first, _, _ := strings.Cut(config, "\n")
	return strings.TrimPrefix(first, "domain: ")
}

// startEnvoyRatelimit runs envoy ratelimit on config against redisAddr.
func startEnvoyRatelimit(t *testing.T, bin, redisAddr, config string) func([][2]string) string {
	t.Helper()
	dir := t.TempDir()
	confDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var ports [3]string
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
		"RUNTIME_ROOT="+filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"PORT="+ports[0], "GRPC_PORT="+ports[1], "DEBUG_PORT="+ports[2])
	log, err := os.Create(filepath.Join(dir, "envoy-ratelimit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); log.Close() })
	addr := "127.0.0.1:" + ports[1]
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("envoy ratelimit did not listen on %s:\n%s", addr, out)
		}
	}
	return caller(t, addr, domainOf(config), "")
}

// startSluice imports config into a real console through sluice-limits,
// syncs it to Redis and starts a decision service, as the gateway's app.
func startSluice(t *testing.T, config string) func([][2]string) string {
	t.Helper()
	c := newConsole(t)
	file := write(t, "envoy.yaml", config)
	code, out, errOut := c.tool("import-envoy", "-f", file, "-app", "edge")
	if code != 0 || strings.Contains(errOut, "unmapped:") || strings.Contains(errOut, "approximated:") {
		t.Fatalf("import-envoy: exit %d\n%s", code, errOut)
	}
	c.mustTool(0, "apply", "-f", write(t, "limits.yaml", out))
	token := c.appToken("edge")

	ctx := context.Background()
	w := syncer.New(syncer.Config{Buckets: buckets.NewStore(c.db), Redis: c.rdb, Keyspace: redisscript.Keyspace{Prefix: c.prefix}})
	if _, err := w.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	srv, err := decision.Start(sctx, decision.ServerConfig{DB: c.db, Redis: c.rdb, KeyPrefix: c.prefix,
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		// A loaded machine may stall a call past the default timeout; a
		// fallback answer would change the decisions compared.
		Client: []client.Option{client.WithTimeout(10 * time.Second)},
		Logger: slog.New(slog.DiscardHandler), RefreshInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return caller(t, srv.GRPCAddr(), domainOf(config), token)
}

// appToken makes an app token of app through the API.
func (c *console) appToken(app string) string {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.url+"/api/v1/apps/"+app+"/tokens", strings.NewReader(`{"name": "gateway"}`))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		Secret string `json:"secret"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(data, &out) != nil || out.Secret == "" {
		c.t.Fatalf("create app token: %d %s", resp.StatusCode, data)
	}
	return out.Secret
}
