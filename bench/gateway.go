package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/migrations"
)

// The gateway comparison: sluice-decide against envoyproxy/ratelimit,
// both as processes of their own on one redis-server, driven by the same
// gRPC load generator sending Envoy's ShouldRateLimit requests.

// rls is one rate limit service under test.
type rls struct {
	name  string
	conn  *grpc.ClientConn
	c     rlsv3.RateLimitServiceClient
	token string // sent as "authorization" metadata when set
	// bound is the most a correct service may admit in [start, end].
	bound func(start, end time.Time) int64
	stop  func()
}

// gatewayResult sums one service's cases at one concurrency.
type gatewayResult struct {
	tally
	admitted, bound, over int64
}

func runGateway(ctx context.Context, cfg config, redisAddr string) error {
	if cfg.envoyRatelimit == "" || cfg.mysqlDSN == "" {
		return errors.New("-gateway needs -envoy-ratelimit (the envoyproxy/ratelimit binary) and -mysql (an empty database)")
	}
	dir, err := os.MkdirTemp("", "sluice-bench-gateway-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	decide := cfg.decideBin
	if decide == "" {
		decide = filepath.Join(dir, "sluice-decide")
		build := exec.CommandContext(ctx, "go", "build", "-o", decide, "../cmd/decide")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build sluice-decide: %w", err)
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	suffix := hex.EncodeToString(rnd[:])
	prefix := "gw" + suffix + ":"
	defer cleanup(&redis.Options{Addr: redisAddr}, prefix)

	token, err := defineGateway(ctx, cfg, redisAddr, prefix, suffix)
	if err != nil {
		return err
	}
	name := "gw-" + suffix
	sl, err := startDecide(ctx, decide, dir, cfg, redisAddr, prefix, token)
	if err != nil {
		return err
	}
	defer sl.stop()
	// Sluice's bucket starts full: at most capacity + rate x elapsed.
	limit := int64(cfg.limit)
	sl.bound = func(start, end time.Time) int64 {
		return limit + int64(float64(limit)*end.Sub(start).Seconds())
	}
	en, err := startEnvoyRatelimit(ctx, cfg.envoyRatelimit, dir, redisAddr, name, cfg.limit)
	if err != nil {
		return err
	}
	defer en.stop()
	// Fixed windows of one second on the server's clock: at most the
	// limit in every second the case touched.
	en.bound = func(start, end time.Time) int64 {
		return limit * (end.Unix() - start.Unix() + 1)
	}
	services := []*rls{sl, en}
	req := &rlsv3.RateLimitRequest{Domain: name, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: name}},
	}}}
	for _, s := range services {
		if _, err := s.ask(ctx, req); err != nil {
			return fmt.Errorf("%s: first request: %w", s.name, err)
		}
	}

	out := os.Stdout
	fmt.Fprintf(out, "go %s, GOMAXPROCS %d, %d CPUs; redis at %s\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), redisAddr)
	fmt.Fprintf(out, "load average at start: %s\n", loadAverage())
	fmt.Fprintf(out, "limit: %d per second (sluice: capacity %d, rate %d/s; envoy ratelimit: %d per second, fixed window); "+
		"%d rounds of %v per case after %v warm-up, one connection per service\n\n",
		cfg.limit, cfg.limit, cfg.limit, cfg.limit, cfg.rounds, cfg.duration, cfg.warmup)

	results := map[string]map[int]*gatewayResult{}
	for round := 1; round <= cfg.rounds; round++ {
		log.Printf("round %d of %d", round, cfg.rounds)
		for _, g := range cfg.concurrency {
			for _, s := range services {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r := measureRLS(ctx, s, req, g, cfg.warmup, cfg.duration)
				if results[s.name] == nil {
					results[s.name] = map[int]*gatewayResult{}
				}
				if sum := results[s.name][g]; sum != nil {
					sum.add(r)
				} else {
					results[s.name][g] = r
				}
			}
		}
	}
	fmt.Fprintf(out, "%-16s %7s %9s %9s %9s %9s %9s %9s %6s\n", "service", "streams", "calls", "ops/s", "p50", "p99",
		"admitted", "over-adm.", "errors")
	for _, g := range cfg.concurrency {
		for _, s := range services {
			r := results[s.name][g]
			fmt.Fprintf(out, "%-16s %7d %9d %9.0f %9s %9s %9d %9d %6d\n", s.name, g, r.calls,
				float64(r.calls)/r.elapsed.Seconds(), fmtDur(r.hist.quantile(0.5)), fmtDur(r.hist.quantile(0.99)),
				r.admitted, r.over, r.errors)
			if r.firstErr != nil {
				fmt.Fprintf(out, "    first error: %v\n", r.firstErr)
			}
		}
	}
	fmt.Fprintf(out, "load average at end: %s\n", loadAverage())
	if len(cfg.concurrency) > 0 {
		g := cfg.concurrency[len(cfg.concurrency)-1]
		a, b := results[sl.name][g], results[en.name][g]
		ta, tb := float64(a.calls)/a.elapsed.Seconds(), float64(b.calls)/b.elapsed.Seconds()
		fmt.Fprintf(out, "\nat %d streams: throughput %.2fx envoy ratelimit's (goal >= 1.5x: %s); p99 %s vs %s (goal lower: %s); "+
			"over-admission %d (goal 0: %s)\n", g, ta/tb, verdict(ta >= 1.5*tb),
			fmtDur(a.hist.quantile(0.99)), fmtDur(b.hist.quantile(0.99)), verdict(a.hist.quantile(0.99) < b.hist.quantile(0.99)),
			a.over, verdict(a.over == 0))
	}
	return nil
}

func (r *gatewayResult) add(o *gatewayResult) {
	r.tally.add(&o.tally)
	r.admitted += o.admitted
	r.bound += o.bound
	r.over += o.over
}

func (s *rls) ask(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return s.c.ShouldRateLimit(s.authorized(ctx), req)
}

// authorized returns ctx carrying s's app token, if it has one.
func (s *rls) authorized(ctx context.Context) context.Context {
	if s.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.token)
}

// measureRLS runs g concurrent streams of requests on s's connection for
// warmup, then for d while recording latencies. Admissions are counted
// from the first request of the case, so that they can be checked against
// the service's own bound over the whole case.
func measureRLS(ctx context.Context, s *rls, req *rlsv3.RateLimitRequest, g int, warmup, d time.Duration) *gatewayResult {
	var admitted atomic.Int64
	// Authorized once: the metadata is the same for every request.
	authCtx := s.authorized(ctx)
	caseStart := time.Now()
	t := runCallers(ctx, g, warmup, d, func(int) error {
		resp, err := s.c.ShouldRateLimit(authCtx, req)
		if err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			admitted.Add(1)
		}
		return err
	}, nil)
	r := &gatewayResult{tally: t, admitted: admitted.Load(), bound: s.bound(caseStart, time.Now())}
	r.over = max(0, r.admitted-r.bound)
	return r
}

// defineGateway creates, in the -mysql database, an app, a bucket of
// capacity limit refilled at limit per second, a descriptor mapping of
// domain and generic_key gw-<suffix> to it and an app token, and syncs
// the bucket to Redis. It returns the token.
func defineGateway(ctx context.Context, cfg config, redisAddr, prefix, suffix string) (string, error) {
	if err := migrations.Up(cfg.mysqlDSN); err != nil {
		return "", err
	}
	db, err := database.Open(ctx, cfg.mysqlDSN, database.Options{})
	if err != nil {
		return "", err
	}
	defer db.Close()
	actor := audit.Actor{User: "bench", Via: "bench"}
	name := "gw-" + suffix
	if err := apps.NewStore(db).Create(ctx, actor, &apps.App{Name: name}); err != nil {
		return "", err
	}
	rate, err := buckets.ParseRate(strconv.Itoa(cfg.limit) + "/s")
	if err != nil {
		return "", err
	}
	if err := buckets.NewStore(db).Create(ctx, actor, &buckets.Bucket{Name: name, OwnerApp: name,
		MaxPermits: int64(cfg.limit), Rate: rate}); err != nil {
		return "", err
	}
	if err := descriptors.NewStore(db).Create(ctx, actor, &descriptors.Mapping{App: name, Domain: name, Bucket: name,
		Entries: []descriptors.Entry{{Key: "generic_key", Value: name}}}); err != nil {
		return "", err
	}
	token, _, err := apptokens.NewStore(db).Create(ctx, actor, name, "bench", nil)
	if err != nil {
		return "", err
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	w := syncer.New(syncer.Config{Buckets: buckets.NewStore(db), Redis: rdb, Keyspace: redisscript.Keyspace{Prefix: prefix}})
	if _, err := w.SyncOnce(ctx); err != nil {
		return "", err
	}
	return token, nil
}

// process is a service this program started, stopped by its PID.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startProcess(path string, env []string, logPath string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(path)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *process) stop() { terminate(p.cmd, p.done, 10*time.Second) }

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// waitUntil polls ok for up to 30 s.
func waitUntil(ctx context.Context, p *process, what string, ok func() bool) error {
	for deadline := time.Now().Add(30 * time.Second); !ok(); {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			return fmt.Errorf("%s exited: %s", what, b)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.log)
			return fmt.Errorf("%s did not become ready: %s", what, b)
		}
	}
	return nil
}

func startDecide(ctx context.Context, bin, dir string, cfg config, redisAddr, prefix, token string) (*rls, error) {
	gport, err := freePort()
	if err != nil {
		return nil, err
	}
	hport, err := freePort()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"SLUICE_MYSQL_DSN="+cfg.mysqlDSN, "SLUICE_REDIS_ADDR="+redisAddr, "SLUICE_KEY_PREFIX="+prefix,
		"SLUICE_GRPC_ADDR=127.0.0.1:"+strconv.Itoa(gport), "SLUICE_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(hport),
		"SLUICE_LOG_LEVEL=warn",
		// As in the client comparison: a scheduling stall on a busy machine
		// must not trip the breaker and replace Redis answers by fallback ones.
		"SLUICE_TIMEOUT="+cfg.timeout.String())
	p, err := startProcess(bin, env, filepath.Join(dir, "decide.log"))
	if err != nil {
		return nil, err
	}
	ready := "http://127.0.0.1:" + strconv.Itoa(hport) + "/readyz"
	if err := waitUntil(ctx, p, "sluice-decide", func() bool {
		resp, err := http.Get(ready)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	}); err != nil {
		p.stop()
		return nil, err
	}
	conn, err := dial("127.0.0.1:" + strconv.Itoa(gport))
	if err != nil {
		p.stop()
		return nil, err
	}
	return &rls{name: "sluice-decide", conn: conn, c: rlsv3.NewRateLimitServiceClient(conn), token: token,
		stop: func() { conn.Close(); p.stop() }}, nil
}

// startEnvoyRatelimit runs envoyproxy/ratelimit with one descriptor of
// limit requests per second, its defaults otherwise (no local cache, no
// pipelining window, a pool of 10 connections) and statsd off.
func startEnvoyRatelimit(ctx context.Context, bin, dir, redisAddr, name string, limit int) (*rls, error) {
	confDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("domain: %s\ndescriptors:\n  - key: generic_key\n    value: %s\n    rate_limit:\n      unit: second\n      requests_per_unit: %d\n",
		name, name, limit)
	if err := os.WriteFile(filepath.Join(confDir, "bench.yaml"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	env := append(os.Environ(),
		"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
		"RUNTIME_ROOT="+filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"PORT="+strconv.Itoa(ports[0]), "GRPC_PORT="+strconv.Itoa(ports[1]), "DEBUG_PORT="+strconv.Itoa(ports[2]))
	p, err := startProcess(bin, env, filepath.Join(dir, "envoy-ratelimit.log"))
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[1])
	if err := waitUntil(ctx, p, "envoy ratelimit", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}); err != nil {
		p.stop()
		return nil, err
	}
	conn, err := dial(addr)
	if err != nil {
		p.stop()
		return nil, err
	}
	return &rls{name: "envoy ratelimit", conn: conn, c: rlsv3.NewRateLimitServiceClient(conn),
		stop: func() { conn.Close(); p.stop() }}, nil
}
