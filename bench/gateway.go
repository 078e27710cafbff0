package main

import (
	"bytes"
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
	"slices"
	"strconv"
	"strings"
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

// The gateway comparison: sluice-decide against envoyproxy/ratelimit in
// two configurations (its defaults, and its best: a pool of 100 and its
// over-limit local cache), each a process of its own on one redis-server,
// driven by the same load generator over gRPC (Envoy's ShouldRateLimit)
// and over HTTP (sluice-decide's POST /v1/acquire, envoy ratelimit's
// POST /json). With -stub, a stub answering every request at once
// (stub.go) runs beside them as a process of its own too: the transport's
// floor.

// rls is one rate limit service under test.
type rls struct {
	name  string
	conn  *grpc.ClientConn
	c     rlsv3.RateLimitServiceClient
	token string // sent as "authorization" metadata (gRPC) or header (HTTP) when set
	// httpURL and httpBody are the service's HTTP form of the request.
	httpURL  string
	httpBody []byte
	// bound is the most a correct service may admit in [start, end]; nil
	// for the stub, which grants everything and is not checked.
	bound func(start, end time.Time) int64
	stop  func()
	pid   int // of the service's process, for its CPU time
}

// envoyConfig is a configuration of envoyproxy/ratelimit: its name in the
// tables and the settings (environment variables) that differ from its
// defaults.
type envoyConfig struct {
	name string
	env  []string
}

// envoyConfigs: its defaults (a pool of 10 connections, no pipelining
// window, no local cache), and its best configuration for this workload:
// a pool of 100 and LOCAL_CACHE_SIZE_IN_BYTES, which keeps descriptors
// over their limit in process memory until their window ends and answers
// them without Redis.
var envoyConfigs = []envoyConfig{
	{name: "envoy defaults"},
	{name: "envoy pool100+cache", env: []string{"REDIS_POOL_SIZE=100", "LOCAL_CACHE_SIZE_IN_BYTES=" + strconv.Itoa(16<<20)}},
}

// gatewayResult sums one service's cases at one concurrency.
type gatewayResult struct {
	tally
	admitted, bound, over int64
	cpu                   time.Duration // of the service's process while measured
	// genCPU and redisCPU are the load generator's (this process's) and
	// redis-server's CPU time while measured: with the service's, what a
	// request costs the two cores.
	genCPU, redisCPU time.Duration
	// rounds is the throughput of each round, in order.
	rounds []float64
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
	redisCPU, closeCPU := redisCPUFunc(ctx, &redis.Options{Addr: redisAddr})
	defer closeCPU()

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
	// Fixed windows of one second on the server's clock: at most the
	// limit in every second the case touched.
	windowBound := func(start, end time.Time) int64 {
		return limit * (end.Unix() - start.Unix() + 1)
	}
	services := []*rls{sl}
	var envoys []*rls
	for i, ec := range envoyConfigs {
		// Each configuration counts under a key prefix of its own.
		en, err := startEnvoyRatelimit(ctx, cfg.envoyRatelimit, filepath.Join(dir, "envoy"+strconv.Itoa(i)), redisAddr,
			name, cfg.limit, append([]string{"CACHE_KEY_PREFIX=" + prefix + "envoy" + strconv.Itoa(i) + "_"}, ec.env...))
		if err != nil {
			return fmt.Errorf("%s: %w", ec.name, err)
		}
		defer en.stop()
		en.name, en.bound = ec.name, windowBound
		envoys = append(envoys, en)
	}
	services = append(services, envoys...)
	var stub *rls
	if cfg.stub {
		if stub, err = startStub(ctx, dir); err != nil {
			return err
		}
		defer stub.stop()
		services = append(services, stub)
	}
	req := &rlsv3.RateLimitRequest{Domain: name, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: name}},
	}}}
	envoyBody := []byte(`{"domain":"` + name + `","descriptors":[{"entries":[{"key":"generic_key","value":"` + name + `"}]}]}`)
	for _, s := range services[1:] {
		s.httpBody = envoyBody // envoy ratelimit's, and the stub's
	}
	sl.httpBody = []byte(`{"bucket":"` + name + `"}`)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000, IdleConnTimeout: time.Minute}}
	for _, s := range services {
		if _, err := s.ask(ctx, req); err != nil {
			return fmt.Errorf("%s: first request: %w", s.name, err)
		}
		if _, err := s.askHTTP(ctx, hc); err != nil && slices.Contains(cfg.transports, "http") {
			return fmt.Errorf("%s: first HTTP request: %w", s.name, err)
		}
	}

	out := os.Stdout
	fmt.Fprintf(out, "go %s, GOMAXPROCS %d, %d CPUs; redis at %s\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), redisAddr)
	fmt.Fprintf(out, "load average at start: %s\n", loadAverage())
	fmt.Fprintf(out, "sluice-decide: SLUICE_HEADERS=%s\n", cfg.decideHeaders)
	fmt.Fprintf(out, "limit: %d per second (sluice: capacity %d, rate %d/s; envoy ratelimit: %d per second, fixed window); "+
		"%d rounds of %v per case after %v warm-up, one gRPC connection per service, HTTP/1.1 keep-alive connections\n",
		cfg.limit, cfg.limit, cfg.limit, cfg.limit, cfg.rounds, cfg.duration, cfg.warmup)
	for _, ec := range envoyConfigs {
		fmt.Fprintf(out, "%s: %v\n", ec.name, ec.env)
	}
	if stub != nil {
		fmt.Fprintf(out, "%s: answers every request OK at once (default grpc-go and net/http servers, envoy ratelimit's requests); "+
			"it grants everything, so its over-admission is not checked (-)\n", stubName)
	}
	fmt.Fprintln(out)

	caseName := func(s *rls, tr string) string { return s.name + " " + tr }
	results := map[string]map[int]*gatewayResult{}
	for round := 1; round <= cfg.rounds; round++ {
		log.Printf("round %d of %d", round, cfg.rounds)
		for _, g := range cfg.concurrency {
			for _, tr := range cfg.transports {
				for _, i := range roundOrder(len(services), round, g) {
					s := services[i]
					if ctx.Err() != nil {
						return ctx.Err()
					}
					r := measureRLS(ctx, s, tr, req, hc, g, cfg.warmup, cfg.duration, redisCPU)
					n := caseName(s, tr)
					if results[n] == nil {
						results[n] = map[int]*gatewayResult{}
					}
					if sum := results[n][g]; sum != nil {
						sum.add(r)
					} else {
						results[n][g] = r
					}
				}
			}
		}
	}
	fmt.Fprintf(out, "%-28s %7s %9s %9s %9s %9s %9s %9s %6s %9s %9s %9s\n", "service", "streams", "calls", "ops/s", "p50", "p99",
		"admitted", "over-adm.", "errors", "cpu/call", "gen/call", "redis/call")
	for _, tr := range cfg.transports {
		for _, g := range cfg.concurrency {
			for _, s := range services {
				r := results[caseName(s, tr)][g]
				over := strconv.FormatInt(r.over, 10)
				if s.bound == nil {
					over = "-"
				}
				fmt.Fprintf(out, "%-28s %7d %9d %9.0f %9s %9s %9d %9s %6d %9s %9s %9s\n", caseName(s, tr), g, r.calls,
					float64(r.calls)/r.elapsed.Seconds(), fmtDur(r.hist.quantile(0.5)), fmtDur(r.hist.quantile(0.99)),
					r.admitted, over, r.errors, fmtDur(r.cpuPerCall()), fmtDur(r.perCall(r.genCPU)), fmtDur(r.perCall(r.redisCPU)))
				if r.firstErr != nil {
					fmt.Fprintf(out, "    first error: %v\n", r.firstErr)
				}
			}
		}
	}
	fmt.Fprintf(out, "load average at end: %s\n", loadAverage())
	fmt.Fprintf(out, "\nsluice-decide against envoy ratelimit's best configuration at each point (ratios: the median of the rounds' ratios)")
	if stub != nil {
		fmt.Fprintf(out, " (floor: the stub's throughput over envoy's best, the most any service reaches against it in this harness)")
	}
	fmt.Fprintln(out, ":")
	for _, tr := range cfg.transports {
		for _, g := range cfg.concurrency {
			a := results[caseName(sl, tr)][g]
			var b *gatewayResult
			var bn string
			for _, s := range envoys {
				if x := results[caseName(s, tr)][g]; b == nil || x.opsPerSec() > b.opsPerSec() {
					b, bn = x, s.name
				}
			}
			ratio := a.ratio(b)
			fmt.Fprintf(out, "  %-4s %3d streams: sluice / best %.2fx", tr, g, ratio)
			if stub != nil {
				fmt.Fprintf(out, ", floor: stub / best %.2fx", results[caseName(stub, tr)][g].ratio(b))
			}
			fmt.Fprintf(out, " (best: %s); p99 %s vs %s (goal lower: %s); over-admission %d (goal 0: %s)",
				bn, fmtDur(a.hist.quantile(0.99)), fmtDur(b.hist.quantile(0.99)),
				verdict(a.hist.quantile(0.99) < b.hist.quantile(0.99)), a.over, verdict(a.over == 0))
			if g == 100 {
				fmt.Fprintf(out, "; goal >= 1.5x: %s", verdict(ratio >= 1.5))
			}
			fmt.Fprintln(out)
		}
	}
	return nil
}

func (r *gatewayResult) opsPerSec() float64 { return float64(r.calls) / r.elapsed.Seconds() }

func (r *gatewayResult) add(o *gatewayResult) {
	r.tally.add(&o.tally)
	r.admitted += o.admitted
	r.bound += o.bound
	r.over += o.over
	r.cpu += o.cpu
	r.genCPU += o.genCPU
	r.redisCPU += o.redisCPU
	r.rounds = append(r.rounds, o.rounds...)
}

// ratio is r's throughput over o's, the median of the rounds' ratios (as
// the client comparison's).
func (r *gatewayResult) ratio(o *gatewayResult) float64 {
	return medianRatio(r.rounds, o.rounds, r.opsPerSec()/o.opsPerSec())
}

// cpuPerCall is the service's CPU time per request: unlike throughput, it
// barely moves with what other work shares the machine.
func (r *gatewayResult) cpuPerCall() time.Duration { return r.perCall(r.cpu) }

func (r *gatewayResult) perCall(d time.Duration) time.Duration {
	if r.calls == 0 {
		return 0
	}
	return d / time.Duration(r.calls)
}

// pidCPU is the CPU time (user and system) process pid has used, from
// /proc (Linux; 0 elsewhere), in clock ticks of 10 ms.
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
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

// askHTTP sends the service's HTTP request and reports whether it was
// admitted (200) or denied (429); any other status is an error.
func (s *rls) askHTTP(ctx context.Context, hc *http.Client) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.httpURL, bytes.NewReader(s.httpBody))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusTooManyRequests:
		return false, nil
	}
	return false, fmt.Errorf("HTTP status %d", resp.StatusCode)
}

// measureRLS runs g concurrent streams of requests to s over transport tr
// (on s's one gRPC connection, or on keep-alive HTTP connections) for
// warmup, then for d while recording latencies. Admissions are counted
// from the first request of the case, so that they can be checked against
// the service's own bound over the whole case.
func measureRLS(ctx context.Context, s *rls, tr string, req *rlsv3.RateLimitRequest, hc *http.Client, g int,
	warmup, d time.Duration, redisCPU func() time.Duration) *gatewayResult {
	var admitted atomic.Int64
	// Authorized once: the metadata is the same for every request.
	authCtx := s.authorized(ctx)
	call := func(int) error {
		resp, err := s.c.ShouldRateLimit(authCtx, req)
		if err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			admitted.Add(1)
		}
		return err
	}
	if tr == "http" {
		call = func(int) error {
			ok, err := s.askHTTP(ctx, hc)
			if ok {
				admitted.Add(1)
			}
			return err
		}
	}
	caseStart := time.Now()
	var cpu, gen, rcpu [2]time.Duration
	t := runCallers(ctx, g, warmup, d, call, func(opening bool) {
		i := 1
		if opening {
			i = 0
		}
		cpu[i], gen[i], rcpu[i] = pidCPU(s.pid), processCPU(), redisCPU()
	})
	r := &gatewayResult{tally: t, admitted: admitted.Load(), cpu: cpu[1] - cpu[0], genCPU: gen[1] - gen[0],
		redisCPU: rcpu[1] - rcpu[0]}
	r.rounds = []float64{r.opsPerSec()}
	if s.bound != nil {
		r.bound = s.bound(caseStart, time.Now())
		r.over = max(0, r.admitted-r.bound)
	}
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

func startProcess(path string, env []string, logPath string, args ...string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
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
		"SLUICE_LOG_LEVEL=warn", "SLUICE_HEADERS="+cfg.decideHeaders,
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
		httpURL: "http://127.0.0.1:" + strconv.Itoa(hport) + "/v1/acquire",
		stop:    func() { conn.Close(); p.stop() }, pid: p.cmd.Process.Pid}, nil
}

// startEnvoyRatelimit runs envoyproxy/ratelimit with one descriptor of
// limit requests per second, statsd off, and the settings of extra; its
// defaults otherwise (no local cache, no pipelining window, a pool of 10
// connections).
func startEnvoyRatelimit(ctx context.Context, bin, dir, redisAddr, name string, limit int, extra []string) (*rls, error) {
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
	env = append(env, extra...)
	p, err := startProcess(bin, env, filepath.Join(dir, "envoy-ratelimit.log"))
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[1])
	if err := waitUntil(ctx, p, "envoy ratelimit", listening(addr)); err != nil {
		p.stop()
		return nil, err
	}
	conn, err := dial(addr)
	if err != nil {
		p.stop()
		return nil, err
	}
	return &rls{name: "envoy ratelimit", conn: conn, c: rlsv3.NewRateLimitServiceClient(conn),
		httpURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/json",
		stop:    func() { conn.Close(); p.stop() }, pid: p.cmd.Process.Pid}, nil
}

// listening reports whether every one of addrs accepts a connection.
func listening(addrs ...string) func() bool {
	return func() bool {
		for _, a := range addrs {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return false
			}
			c.Close()
		}
		return true
	}
}
