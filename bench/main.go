// Command bench compares Sluice's client with go-redis/redis_rate (GCRA)
// and a plain EVALSHA of a minimal Redis-clock token-bucket script, side
// by side against one redis-server in one run, at several levels of
// concurrency, each peer with several pool sizes. It prints ops/s, p50 and
// p99 latency and heap allocations per call for each, checks Sluice against
// each peer's best pool size, then measures what an acquire costs in
// Sluice's local fallback once Redis is dead.
//
//	cd bench && go run . [-redis 127.0.0.1:6379] [-rounds 3] [-duration 1.5s]
//
// Without -redis it starts its own redis-server on loopback, without
// persistence, and stops it at the end.
//
// With -gateway it compares the decision service (sluice-decide, gRPC)
// with envoyproxy/ratelimit instead, both as processes on the same
// redis-server, driven by one gRPC load generator sending Envoy's
// ShouldRateLimit requests at each number of concurrent streams:
//
//	go run . -gateway -envoy-ratelimit /path/to/service_cmd -mysql 'user:pw@tcp(127.0.0.1:3306)/bench'
//
// Beside them (-stub, on by default) it runs a stub service answering at
// once, this program again as a process of its own, as the transport's
// floor.
//
// With -kinds it measures only what each kind of limit costs Redis per
// call against a plain acquire (see kindsCost), on its private
// redis-server:
//
//	go run . -kinds
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) > 1 && os.Args[1] == stubCommand {
		if err := serveStub(os.Args[2:]); err != nil {
			log.Fatalf("bench: %v", err)
		}
		return
	}
	if err := run(); err != nil {
		log.Fatalf("bench: %v", err)
	}
}

type config struct {
	redisAddr   string
	redisServer string
	duration    time.Duration
	warmup      time.Duration
	concurrency []int
	only        string
	buckets     int
	cpuProfile  string
	memProfile  string
	fallbackN   int
	rounds      int
	timeout     time.Duration

	gateway        bool
	envoyRatelimit string
	decideBin      string
	decideHeaders  string
	mysqlDSN       string
	limit          int
	pools          []int
	sluicePools    []int
	transports     []string
	stub           bool
	scriptCalls    int
	lease          time.Duration

	kinds       bool
	kindsCalls  int
	kindsRounds int
	slotBefore  string
}

func parseFlags() (config, error) {
	var c config
	var conc, pools, sluicePools, transportList string
	flag.StringVar(&c.redisAddr, "redis", "", "address of a running redis-server; empty starts a private one")
	flag.StringVar(&c.redisServer, "redis-server", "redis-server", "redis-server binary used when -redis is empty")
	flag.DurationVar(&c.duration, "duration", 1500*time.Millisecond, "measured time per implementation, concurrency and round")
	flag.DurationVar(&c.timeout, "sluice-timeout", time.Second, "Sluice's per-call timeout in the comparison (the others wait up to go-redis's 3 s read timeout)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every case once, so that noise from the machine falls on all implementations alike")
	flag.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "unmeasured time before each measurement")
	flag.StringVar(&conc, "goroutines", "1,2,5,10,20,50,100", "comma-separated numbers of concurrent callers")
	flag.StringVar(&pools, "peer-pools", "0,100", "comma-separated pool sizes the peers run with (0: go-redis's default); each is compared at its best")
	flag.StringVar(&sluicePools, "sluice-pools", "", "comma-separated pool sizes of extra Sluice limiters, labelled 'sluice pool=N' (the engine keeps at most one round trip in flight per pooled connection)")
	flag.StringVar(&c.only, "only", "", "run only the implementations whose name contains one of these comma-separated parts (sluice, redis_rate, plain, unbatched)")
	flag.IntVar(&c.buckets, "buckets", 16, "buckets the callers spread over (caller i uses bucket i mod buckets)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write CPU profiles of the measured Sluice runs to this path + .g<goroutines>.r<round>")
	flag.StringVar(&c.memProfile, "memprofile", "", "write a profile of every allocation to this file (use with -only sluice)")
	flag.IntVar(&c.fallbackN, "fallback-calls", 2_000_000, "calls measured in the local fallback")
	flag.BoolVar(&c.gateway, "gateway", false, "compare the decision service (gRPC) with envoyproxy/ratelimit instead")
	flag.StringVar(&c.envoyRatelimit, "envoy-ratelimit", "", "with -gateway: path of the envoyproxy/ratelimit binary (service_cmd)")
	flag.StringVar(&c.decideBin, "decide", "", "with -gateway: path of sluice-decide; empty builds ../cmd/decide")
	flag.StringVar(&c.decideHeaders, "decide-headers", "none", "with -gateway: sluice-decide's SLUICE_HEADERS; none matches envoy ratelimit, which adds no response headers by default (draft is sluice-decide's default)")
	flag.StringVar(&c.mysqlDSN, "mysql", "", "with -gateway: DSN of a MySQL database the harness may migrate and add rows to")
	flag.StringVar(&transportList, "transports", "grpc,http", "with -gateway: comma-separated transports to drive each service over (grpc, http)")
	flag.BoolVar(&c.stub, "stub", true, "with -gateway: also run a stub service answering every request OK at once (the transport's floor; not checked for over-admission)")
	flag.IntVar(&c.limit, "limit", 1000, "with -gateway: the limit, requests per second (and the bucket's capacity)")
	flag.DurationVar(&c.lease, "lease", 100*time.Millisecond, "lease time of the 'sluice lease' case: Sluice on one hot bucket in lease mode (0 skips it)")
	flag.IntVar(&c.scriptCalls, "script-calls", 20_000, "calls per round measuring Redis's time per script call (0 skips; only with the private redis-server)")
	flag.BoolVar(&c.kinds, "kinds", false, "only measure Redis's time per call of every kind of limit (quota, slot take, reserve, ...) against a plain acquire, on the private redis-server")
	flag.IntVar(&c.kindsCalls, "kinds-calls", 4_000, "with -kinds: calls per case and round")
	flag.IntVar(&c.kindsRounds, "kinds-rounds", 30, "with -kinds: rounds; each figure is the best")
	flag.StringVar(&c.slotBefore, "slot-lua-before", "", "with -kinds: a file holding another build of the slot script, measured beside the current one")
	flag.Parse()
	for f := range strings.SplitSeq(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, fmt.Errorf("-goroutines: %q is not a positive number", f)
		}
		c.concurrency = append(c.concurrency, n)
	}
	for f := range strings.SplitSeq(pools, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return c, fmt.Errorf("-peer-pools: %q is not a pool size", f)
		}
		c.pools = append(c.pools, n)
	}
	for f := range strings.SplitSeq(transportList, ",") {
		switch f = strings.TrimSpace(f); f {
		case "grpc", "http":
			c.transports = append(c.transports, f)
		default:
			return c, fmt.Errorf("-transports: %q is neither grpc nor http", f)
		}
	}
	for f := range strings.SplitSeq(sluicePools, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, fmt.Errorf("-sluice-pools: %q is not a pool size", f)
		}
		c.sluicePools = append(c.sluicePools, n)
	}
	if c.rounds < 1 {
		return c, fmt.Errorf("-rounds must be at least 1")
	}
	if c.buckets < 1 {
		return c, fmt.Errorf("-buckets must be at least 1")
	}
	return c, nil
}

func run() error {
	cfg, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	addr := cfg.redisAddr
	if addr == "" {
		path, err := exec.LookPath(cfg.redisServer)
		if err != nil {
			return fmt.Errorf("no -redis given and %s not found: %w", cfg.redisServer, err)
		}
		srv, err := startRedis(ctx, path)
		if err != nil {
			return err
		}
		defer srv.stop()
		addr = srv.addr
	}
	if cfg.gateway {
		return runGateway(ctx, cfg, addr)
	}
	opts := &redis.Options{Addr: addr}
	if cfg.kinds {
		if cfg.redisAddr != "" {
			return fmt.Errorf("-kinds resets Redis's statistics: it runs only on the private redis-server (no -redis)")
		}
		version, err := serverVersion(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Printf("go %s, %d CPUs, %s/%s; redis %s\nload average at start: %s\n", runtime.Version(), runtime.NumCPU(),
			runtime.GOOS, runtime.GOARCH, version, loadAverage())
		if err := kindsCost(ctx, os.Stdout, opts, cfg.kindsCalls, cfg.kindsRounds, cfg.slotBefore); err != nil {
			return fmt.Errorf("kinds: %w", err)
		}
		fmt.Printf("load average at end: %s\n", loadAverage())
		return nil
	}
	version, err := serverVersion(ctx, opts)
	if err != nil {
		return err
	}

	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	w := workload{buckets: cfg.buckets, capacity: 1_000_000_000, rate: 1_000_000,
		prefix: "bench" + hex.EncodeToString(rnd[:]) + ":"}
	defer cleanup(opts, w.prefix)

	out := os.Stdout
	fmt.Fprintf(out, "go %s, GOMAXPROCS %d, %d CPUs, %s/%s; redis %s at %s\n", runtime.Version(),
		runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, version, addr)
	fmt.Fprintf(out, "load average at start: %s\n", loadAverage())
	fmt.Fprintf(out, "workload: %d buckets (capacity %d, %d/s: every call is granted), n=1; %d rounds of %v per case, each after %v warm-up\n\n",
		w.buckets, w.capacity, w.rate, cfg.rounds, cfg.duration, cfg.warmup)

	impls, err := newLimiters(ctx, opts, w, cfg.timeout, cfg.pools, cfg.sluicePools, cfg.lease.Milliseconds())
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range impls {
			l.close()
		}
	}()

	prof, err := startProfiles(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := prof.stop(); err != nil {
			log.Print(err)
		}
	}()

	redisCPU, closeCPU := redisCPUFunc(ctx, opts)
	defer closeCPU()
	results := map[string]map[int]*result{}
	for round := 1; round <= cfg.rounds; round++ {
		log.Printf("round %d of %d", round, cfg.rounds)
		for _, g := range cfg.concurrency {
			for _, i := range roundOrder(len(impls), round, g) {
				l := impls[i]
				if !selected(cfg.only, l.name()) {
					continue
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				profiled := l.name() == "sluice"
				r := measure(ctx, l, g, cfg.warmup, cfg.duration, redisCPU, func(on bool) {
					if profiled {
						if err := prof.enable(on, g, round); err != nil {
							log.Print(err)
						}
					}
				})
				if s, ok := l.(settler); ok {
					if err := s.settle(ctx); err != nil {
						return fmt.Errorf("%s: settle: %w", l.name(), err)
					}
				}
				if results[l.name()] == nil {
					results[l.name()] = map[int]*result{}
				}
				if sum := results[l.name()][g]; sum != nil {
					sum.add(r)
				} else {
					results[l.name()][g] = r
				}
			}
		}
	}
	fmt.Fprintf(out, "%-20s %5s %10s %10s %10s %10s %8s %9s %9s %7s\n", "implementation", "gor.", "calls", "ops/s", "p50", "p99",
		"allocs", "cpu/call", "redis/call", "errors")
	for _, g := range cfg.concurrency {
		for _, l := range impls {
			r := results[l.name()][g]
			if r == nil {
				continue
			}
			cc, rc := r.cpuPerCall()
			fmt.Fprintf(out, "%-20s %5d %10d %10.0f %10s %10s %8.2f %9s %9s %7d\n", l.name(), g, r.calls, r.opsPerSec(),
				fmtDur(r.hist.quantile(0.50)), fmtDur(r.hist.quantile(0.99)), r.allocsPerCall(), fmtDur(cc), fmtDur(rc), r.errors)
			if r.firstErr != nil {
				fmt.Fprintf(out, "    first error: %v\n", r.firstErr)
			}
		}
	}

	var fb *fallbackResult
	if cfg.only == "" || selected(cfg.only, "sluice") {
		fb, err = measureFallback(ctx, addr, w, cfg.fallbackN)
		if err != nil {
			return fmt.Errorf("fallback: %w", err)
		}
	}
	if fb != nil {
		fmt.Fprintf(out, "\nsluice local fallback after Redis died (%d calls, 1 goroutine): %.0f ns/call, %.2f allocs/call; "+
			"first fallback answer %v after the kill\n", fb.calls, fb.nsPerCall, fb.allocsPerCall, fmtDur(fb.detect))
	}
	if cfg.redisAddr == "" && cfg.scriptCalls > 0 && cfg.only == "" {
		if err := scriptCost(ctx, out, opts, w, cfg.scriptCalls, 9); err != nil {
			return fmt.Errorf("script cost: %w", err)
		}
	}
	fmt.Fprintf(out, "load average at end: %s\n", loadAverage())
	printGoals(out, results, fb, cfg.concurrency)
	return nil
}

// selected reports whether the implementation name is picked by only, a
// comma-separated list of parts of names (empty picks every one).
func selected(only, name string) bool {
	if only == "" {
		return true
	}
	for part := range strings.SplitSeq(only, ",") {
		if part = strings.TrimSpace(part); part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// loadAverage reports how busy the machine was: other processes on the
// same cores move every figure.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func serverVersion(ctx context.Context, opts *redis.Options) (string, error) {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("redis at %s: %w", opts.Addr, err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "?", nil
}

// cleanup deletes every key this run wrote (the prefix is random per run).
func cleanup(opts *redis.Options, prefix string) {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, pattern := range []string{prefix + "*", "rate:" + prefix + "*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}
}

// roundOrder is the order the n systems run in at one round and
// concurrency: a permutation drawn anew for each (seeded by both, so that
// a run can be repeated). Neither a fixed order nor a rotation of one will
// do: a system that leaves work behind in Redis would slow the same
// successor in every round (settle now clears what the keyed case
// leaves), and of two pool settings of a peer, equal below their pool
// size, the best would be the one that never follows it.
func roundOrder(n, round, g int) []int {
	return mathrand.New(mathrand.NewPCG(uint64(round), uint64(g))).Perm(n)
}

// result sums the measured calls of one implementation at one concurrency
// over the rounds.
type result struct {
	tally
	mallocs       uint64
	cpu, redisCPU time.Duration // CPU time of this process and of redis-server
	// rounds is the throughput of each round, in order.
	rounds []float64
}

func (r *result) add(o *result) {
	r.tally.add(&o.tally)
	r.mallocs += o.mallocs
	r.cpu += o.cpu
	r.redisCPU += o.redisCPU
	r.rounds = append(r.rounds, o.rounds...)
}

// ratio is a's throughput over b's: the median of the rounds' ratios. The
// systems take turns within a round, so each round's pair ran seconds
// apart; a round the rest of the machine disturbed moves one pair's
// ratio, not the result, as it would move a sum over the rounds.
func ratio(a, b *result) float64 {
	return medianRatio(a.rounds, b.rounds, a.opsPerSec()/b.opsPerSec())
}

// medianRatio is the median of a[i] / b[i] over the rounds both have, and
// whole when there are none.
func medianRatio(a, b []float64, whole float64) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return whole
	}
	rs := make([]float64, n)
	for i := range n {
		rs[i] = a[i] / b[i]
	}
	slices.Sort(rs)
	if n%2 == 1 {
		return rs[n/2]
	}
	return (rs[n/2-1] + rs[n/2]) / 2
}

// tally is what every kind of run counts, summed over the rounds.
type tally struct {
	calls, errors int64
	elapsed       time.Duration
	hist          histogram
	firstErr      error
}

func (t *tally) add(o *tally) {
	t.calls += o.calls
	t.errors += o.errors
	t.elapsed += o.elapsed
	t.hist.merge(&o.hist)
	if t.firstErr == nil {
		t.firstErr = o.firstErr
	}
}

func (r *result) opsPerSec() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// cpuPerCall returns the CPU time per call of the client process and of
// Redis: on a machine shared with other work these stay put when the
// throughput moves.
func (r *result) cpuPerCall() (client, server time.Duration) {
	if r.calls == 0 {
		return 0, 0
	}
	return r.cpu / time.Duration(r.calls), r.redisCPU / time.Duration(r.calls)
}

func (r *result) allocsPerCall() float64 {
	if r.calls == 0 {
		return 0
	}
	return float64(r.mallocs) / float64(r.calls)
}

// measure runs g callers of l for warmup, then for d while recording each
// call's latency and the process's heap allocations.
func measure(ctx context.Context, l limiter, g int, warmup, d time.Duration, redisCPU func() time.Duration, profile func(bool)) *result {
	var (
		before, after            runtime.MemStats
		cpu0, rcpu0, cpu1, rcpu1 time.Duration
	)
	t := runCallers(ctx, g, warmup, d, func(i int) error {
		_, err := l.acquire(ctx, i)
		return err
	}, func(opening bool) {
		if opening {
			runtime.GC()
			profile(true)
			runtime.ReadMemStats(&before)
			cpu0, rcpu0 = processCPU(), redisCPU()
			return
		}
		cpu1, rcpu1 = processCPU(), redisCPU()
		runtime.ReadMemStats(&after)
		profile(false)
	})
	// The calls in flight when measuring ended were counted in the
	// histogram but may have allocated after the second ReadMemStats; at
	// most g calls of hundreds of thousands, so the error is negligible.
	r := &result{tally: t, mallocs: after.Mallocs - before.Mallocs, cpu: cpu1 - cpu0, redisCPU: rcpu1 - rcpu0}
	r.rounds = []float64{r.opsPerSec()}
	return r
}

// runCallers runs g goroutines, each calling call with its index in a
// loop, for warmup, then for d (or until ctx ends) while recording each
// call's latency and counting its errors. window, unless nil, runs just
// before the measured window opens (with true) and just after it closes
// (false), to take readings of its own over the same window.
func runCallers(ctx context.Context, g int, warmup, d time.Duration, call func(i int) error, window func(opening bool)) tally {
	hists := make([]*histogram, g)
	for i := range hists {
		hists[i] = new(histogram)
	}
	var (
		stop      atomic.Bool
		measuring atomic.Bool
		errs      atomic.Int64
		firstErr  error
		errOnce   sync.Once
		wg        sync.WaitGroup
	)
	for i := range g {
		h := hists[i]
		wg.Go(func() {
			for !stop.Load() {
				on := measuring.Load()
				t0 := time.Now()
				err := call(i)
				if on {
					h.record(time.Since(t0))
					if err != nil {
						errs.Add(1)
						errOnce.Do(func() { firstErr = err })
					}
				}
			}
		})
	}
	time.Sleep(warmup)
	if window != nil {
		window(true)
	}
	start := time.Now()
	measuring.Store(true)
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	if window != nil {
		window(false)
	}
	stop.Store(true)
	wg.Wait()

	t := tally{errors: errs.Load(), elapsed: elapsed, firstErr: firstErr}
	for _, h := range hists {
		t.hist.merge(h)
	}
	t.calls = int64(t.hist.total)
	return t
}

// processCPU returns the user and system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPUFunc returns a function reading redis-server's CPU time (user
// and system, from INFO cpu).
func redisCPUFunc(ctx context.Context, opts *redis.Options) (func() time.Duration, func()) {
	rdb := redis.NewClient(opts)
	return func() time.Duration {
		info, err := rdb.Info(ctx, "cpu").Result()
		if err != nil {
			return 0
		}
		var total float64
		for line := range strings.SplitSeq(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
		return time.Duration(total * float64(time.Second))
	}, func() { rdb.Close() }
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	default:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
}

// best returns the configuration of peer (its name, or its name and a
// pool size) with the highest throughput at g goroutines. Pool sizes of
// at least g are one configuration at g goroutines, since no pool grows
// past its callers: their rounds are averaged into one result, named for
// all of them, rather than the luckier of identical runs picked, which
// would favour the peer by the spread of the machine alone.
func best(results map[string]map[int]*result, peer string, g int) (string, *result) {
	var name string
	var r *result
	var alike []string
	for n, byG := range results {
		if n != peer && !strings.HasPrefix(n, peer+" ") {
			continue
		}
		x := byG[g]
		if x == nil {
			continue
		}
		if poolSize(n) >= g {
			alike = append(alike, n)
		}
		if r == nil || x.opsPerSec() > r.opsPerSec() {
			name, r = n, x
		}
	}
	if len(alike) < 2 {
		return name, r
	}
	slices.Sort(alike)
	m := &result{}
	for _, n := range alike {
		m.add(results[n][g])
	}
	m.rounds = meanRounds(results, alike, g)
	if r != nil && !slices.Contains(alike, name) && r.opsPerSec() > m.opsPerSec() {
		return name, r
	}
	return peer + ", any pool", m
}

// poolSize is the pool size of the configuration named n: its " pool=N"
// suffix, or go-redis's default.
func poolSize(n string) int {
	if _, s, ok := strings.Cut(n, " pool="); ok {
		if v, err := strconv.Atoi(s); err == nil {
			return v
		}
	}
	return 10 * runtime.GOMAXPROCS(0)
}

// meanRounds is, round by round, the mean throughput of the
// configurations names at g goroutines.
func meanRounds(results map[string]map[int]*result, names []string, g int) []float64 {
	n := len(results[names[0]][g].rounds)
	for _, name := range names[1:] {
		n = min(n, len(results[name][g].rounds))
	}
	out := make([]float64, n)
	for i := range out {
		for _, name := range names {
			out[i] += results[name][g].rounds[i] / float64(len(names))
		}
	}
	return out
}

// printGoals checks the goals of the performance issue: at every
// concurrency Sluice's throughput at least 0.95x its own acquire script
// sent alone per call and at least redis_rate's, its p50 at most 1.1x the
// script's below 20 goroutines; at 100 goroutines at least 1.3x
// redis_rate's throughput; each peer taken in its best pool configuration.
func printGoals(out io.Writer, results map[string]map[int]*result, fb *fallbackResult, conc []int) {
	s := results["sluice"]
	if s == nil {
		return
	}
	fmt.Fprintf(out, "\nsluice against each peer's best pool configuration (ratios: the median of the rounds' ratios):\n")
	fmt.Fprintf(out, "%5s %10s %10s | %-22s %10s %10s | %-22s %10s %10s | %8s %8s %8s\n", "gor.", "sluice", "p50",
		"plain (best)", "ops/s", "p50", "redis_rate (best)", "ops/s", "p50", "x plain", "p50 x", "x rr")
	for _, g := range conc {
		sr := s[g]
		pn, pr := best(results, "plain", g)
		rn, rr := best(results, "redis_rate", g)
		if sr == nil || pr == nil || rr == nil {
			continue
		}
		xp := ratio(sr, pr)
		lp := float64(sr.hist.quantile(0.5)) / float64(pr.hist.quantile(0.5))
		xr := ratio(sr, rr)
		fmt.Fprintf(out, "%5d %10.0f %10s | %-22s %10.0f %10s | %-22s %10.0f %10s | %7.2fx %7.2fx %7.2fx\n", g,
			sr.opsPerSec(), fmtDur(sr.hist.quantile(0.5)), pn, pr.opsPerSec(), fmtDur(pr.hist.quantile(0.5)),
			rn, rr.opsPerSec(), fmtDur(rr.hist.quantile(0.5)), xp, lp, xr)
	}
	if _, ur := best(results, "unbatched acquire", conc[0]); ur != nil {
		fmt.Fprintf(out, "\nsluice against its own acquire script sent alone per call (the same work in Redis):\n")
		fmt.Fprintf(out, "%5s %10s %10s | %-26s %10s %10s | %8s %8s\n", "gor.", "sluice", "p50",
			"unbatched acquire (best)", "ops/s", "p50", "x", "p50 x")
		for _, g := range conc {
			sr := s[g]
			un, ur := best(results, "unbatched acquire", g)
			if sr == nil || ur == nil {
				continue
			}
			fmt.Fprintf(out, "%5d %10.0f %10s | %-26s %10.0f %10s | %7.2fx %7.2fx\n", g,
				sr.opsPerSec(), fmtDur(sr.hist.quantile(0.5)), un, ur.opsPerSec(), fmtDur(ur.hist.quantile(0.5)),
				ratio(sr, ur), float64(sr.hist.quantile(0.5))/float64(ur.hist.quantile(0.5)))
		}
	}
	fmt.Fprintf(out, "\ngoals:\n")
	for _, g := range conc {
		sr := s[g]
		_, ur := best(results, "unbatched acquire", g)
		_, rr := best(results, "redis_rate", g)
		if sr == nil || ur == nil || rr == nil {
			continue
		}
		xu, xr := ratio(sr, ur), ratio(sr, rr)
		fmt.Fprintf(out, "  %3d goroutines: %.2fx the unbatched acquire (goal >= 0.95x): %s; %.2fx redis_rate (goal >= 1x): %s", g,
			xu, verdict(xu >= 0.95), xr, verdict(xr >= 1))
		if g < 20 {
			lp := float64(sr.hist.quantile(0.5)) / float64(ur.hist.quantile(0.5))
			fmt.Fprintf(out, "; p50 %.2fx the unbatched acquire's (goal <= 1.1x): %s", lp, verdict(lp <= 1.1))
		}
		fmt.Fprintln(out)
	}
	if ls := results["sluice lease"]; ls != nil {
		for _, g := range conc {
			if r := ls[g]; r != nil {
				ok := r.opsPerSec() >= 1_000_000 && r.hist.quantile(0.5) < time.Microsecond
				fmt.Fprintf(out, "  lease, %3d goroutines: %.0f decisions/s, p50 %s (goal >= 1,000,000/s, p50 < 1µs): %s\n", g,
					r.opsPerSec(), fmtDur(r.hist.quantile(0.5)), verdict(ok))
			}
		}
	}
	if sr := s[100]; sr != nil {
		if _, rr := best(results, "redis_rate", 100); rr != nil {
			x := ratio(sr, rr)
			fmt.Fprintf(out, "  100 goroutines: %.2fx redis_rate's best throughput (goal >= 1.3x): %s\n", x, verdict(x >= 1.3))
		}
	}
	worst := 0.0
	for _, g := range conc {
		if x, ok := s[g]; ok {
			worst = max(worst, x.allocsPerCall())
		}
	}
	// Mallocs counts the whole process (timers, the scheduler), so a few
	// hundredths above a whole number are noise, not an allocation.
	fmt.Fprintf(out, "  allocations per acquire: at most %.2f (goal <= 5): %s\n", worst, verdict(worst < 5.01))
	if fb != nil {
		fmt.Fprintf(out, "  fallback: %.0f ns per acquire (goal < 5000 ns): %s\n", fb.nsPerCall, verdict(fb.nsPerCall < 5000))
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// profiles writes a CPU profile per concurrency level and an allocation
// profile; both are meant to be used with -only sluice so that only
// Sluice's calls are in them.
type profiles struct {
	cpuPath, memPath string
	cpu              *os.File
}

func startProfiles(cfg config) (*profiles, error) {
	p := &profiles{cpuPath: cfg.cpuProfile, memPath: cfg.memProfile}
	if p.memPath != "" {
		runtime.MemProfileRate = 1 // every allocation, so counts are exact
	}
	return p, nil
}

// enable starts or stops the CPU profile of the run with g callers.
func (p *profiles) enable(on bool, g, round int) error {
	if p.cpuPath == "" {
		return nil
	}
	if !on {
		pprof.StopCPUProfile()
		return p.cpu.Close()
	}
	f, err := os.Create(fmt.Sprintf("%s.g%d.r%d", p.cpuPath, g, round))
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	p.cpu = f
	return pprof.StartCPUProfile(f)
}

func (p *profiles) stop() error {
	if p.memPath == "" {
		return nil
	}
	f, err := os.Create(p.memPath)
	if err != nil {
		return fmt.Errorf("mem profile: %w", err)
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
