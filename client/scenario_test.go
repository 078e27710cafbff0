package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
)

// heavy keeps the tests that time single calls (holding it for reading)
// apart from the multi-process load (holding it for writing).
var heavy sync.RWMutex

// The multi-process scenarios re-run this test binary as worker processes
// (TestHelperProcess) that hammer the buckets and report what they got.

type scenarioBucket struct {
	name         string
	capacity     int64
	permitsMicro int64
	period       int64
}

func (b scenarioBucket) perSecond() float64 {
	return float64(b.permitsMicro) / 1e6 / float64(b.period)
}

// The three buckets of BRIEF Q1.
var q1Buckets = []scenarioBucket{
	{"tiny", 1, 1_000_000, 1},          // capacity 1, 1/s
	{"fast", 100, 1000 * 1_000_000, 1}, // capacity 100, 1000/s
	{"deep", 10000, 50 * 1_000_000, 1}, // capacity 10000, 50/s
}

// workerReport is what a worker process prints.
type workerReport struct {
	Allowed   map[string]int64 `json:"allowed"`
	Calls     int64            `json:"calls"`
	Fallbacks int64            `json:"fallbacks"`
	Errors    []string         `json:"errors"`
	First     int64            `json:"first"`      // unix ns when the first call started
	Last      int64            `json:"last"`       // unix ns when the last call ended
	LastStart int64            `json:"last_start"` // unix ns when the last call started
}

// TestHelperProcess is a worker of the multi-process scenarios; it does
// nothing in a normal run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("SLUICE_WORKER") != "1" {
		t.Skip("worker process of the multi-process scenarios")
	}
	if os.Getenv("SLUICE_WORKER_MODE") == "outage" {
		reps, err := runOutageWorker()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		b, _ := json.Marshal(reps)
		fmt.Printf("REPORT %s\n", b)
		return
	}
	rep, err := runWorker()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("REPORT %s\n", b)
}

func runWorker() (workerReport, error) {
	env := func(k string) string { return os.Getenv("SLUICE_WORKER_" + k) }
	dur, _ := time.ParseDuration(env("DURATION"))
	// The clock skew this process pretends to have. The token math happens
	// in the script with Redis TIME only, so the limiter has nothing to
	// apply it to; what a skewed clock does change is when this process
	// believes the agreed start time has come.
	skew, _ := time.ParseDuration(env("SKEW"))
	goroutines, _ := strconv.Atoi(env("GOROUTINES"))
	buckets := strings.Split(env("BUCKETS"), ",")
	const pace = 4 * time.Millisecond

	rdb := redis.NewClient(&redis.Options{Addr: env("ADDR")})
	defer rdb.Close()
	l, err := client.New(rdb, "svc", client.WithKeyPrefix(env("PREFIX")),
		client.WithFailurePolicy(client.FailClosed), client.WithTimeout(3*time.Second))
	if err != nil {
		return workerReport{}, err
	}
	defer l.Close()

	// Warm up (connections, script), say so, and wait for the agreed start.
	if _, err := l.Acquire(context.Background(), "warm-up", 1); err != nil && !errors.Is(err, client.ErrUnknownBucket) {
		return workerReport{}, err
	}
	fmt.Println("READY")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return workerReport{}, fmt.Errorf("read start time: %w", err)
	}
	startNS, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return workerReport{}, err
	}
	start := time.Unix(0, startNS).Add(-skew)
	time.Sleep(time.Until(start))
	end := start.Add(dur)
	var (
		mu      sync.Mutex
		rep     = workerReport{Allowed: map[string]int64{}, First: math.MaxInt64}
		wg      sync.WaitGroup
		calls   atomic.Int64
		fallbck atomic.Int64
	)
	for g := range goroutines {
		wg.Go(func() {
			allowed := map[string]int64{}
			first, last, lastStart := int64(math.MaxInt64), int64(0), int64(0)
			var errs []string
			for i := g; ; i++ {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				b := buckets[i%len(buckets)]
				res, err := l.Acquire(context.Background(), b, 1)
				t1 := time.Now()
				first, last, lastStart = min(first, t0.UnixNano()), max(last, t1.UnixNano()), max(lastStart, t0.UnixNano())
				calls.Add(1)
				switch {
				case res.Fallback:
					fallbck.Add(1)
				case err != nil:
					errs = append(errs, err.Error())
				case res.Allowed:
					allowed[b]++
				}
				// Paced demand: 100 goroutines still ask for each bucket thousands
				// of times a second, far above every rate, but leave CPU to spare
				// so that no process stalls long enough to let a bucket overflow.
				time.Sleep(pace)
			}
			mu.Lock()
			defer mu.Unlock()
			for k, v := range allowed {
				rep.Allowed[k] += v
			}
			rep.First, rep.Last, rep.LastStart = min(rep.First, first), max(rep.Last, last), max(rep.LastStart, lastStart)
			rep.Errors = append(rep.Errors, errs...)
		})
	}
	wg.Wait()
	rep.Calls, rep.Fallbacks = calls.Load(), fallbck.Load()
	return rep, nil
}

// runScenario defines the buckets fresh (full), starts one worker process
// per skew, and checks every bucket: admitted <= capacity + rate x elapsed,
// where elapsed runs from the first call of any process to the end of the
// last, and admitted >= minShare of the same bound over the time demand
// surely lasted: up to the start of the last call, since a call that ends
// late (a stalled goroutine) asks for no more tokens.
func runScenario(t *testing.T, buckets []scenarioBucket, skews []time.Duration, goroutines int, dur time.Duration, minShare float64) {
	t.Helper()
	// A private server: other tests' load on the shared one stays out of the figures.
	e, srv := privateRedis(t)
	var names []string
	for _, b := range buckets {
		e.define(t, b.name, b.capacity, b.permitsMicro, b.period, "svc")
		names = append(names, b.name)
	}
	var cmds []*exec.Cmd
	var outs []*syncBuffer
	var stdins []io.WriteCloser
	for _, skew := range skews {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "SLUICE_WORKER=1",
			"SLUICE_WORKER_ADDR="+srv.Addr, "SLUICE_WORKER_PREFIX="+e.prefix, "SLUICE_WORKER_DURATION="+dur.String(),
			"SLUICE_WORKER_SKEW="+skew.String(), "SLUICE_WORKER_GOROUTINES="+strconv.Itoa(goroutines),
			"SLUICE_WORKER_BUCKETS="+strings.Join(names, ","))
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		cmds, outs, stdins = append(cmds, cmd), append(outs, out), append(stdins, stdin)
	}
	// Start together once every process is up: a slow start must not eat
	// into the run.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < len(outs); {
		if strings.Contains(outs[i].String(), "READY") {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %d did not start:\n%s", i, outs[i])
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Far enough ahead for a clock 500 ms fast to start on its own time.
	start := time.Now().Add(700 * time.Millisecond)
	for _, w := range stdins {
		fmt.Fprintln(w, start.UnixNano())
		w.Close()
	}
	total := map[string]int64{}
	first, last, lastStart := int64(math.MaxInt64), int64(0), int64(0)
	var calls int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
		var rep workerReport
		_, js, ok := strings.Cut(outs[i].String(), "REPORT ")
		if js, _, _ = strings.Cut(js, "\n"); !ok || json.Unmarshal([]byte(js), &rep) != nil {
			t.Fatalf("worker %d printed no report:\n%s", i, outs[i])
		}
		if rep.Fallbacks > 0 || len(rep.Errors) > 0 {
			t.Errorf("worker %d: %d fallbacks, errors %v", i, rep.Fallbacks, rep.Errors[:min(len(rep.Errors), 5)])
		}
		for k, v := range rep.Allowed {
			total[k] += v
		}
		first, last, lastStart = min(first, rep.First), max(last, rep.Last), max(lastStart, rep.LastStart)
		calls += rep.Calls
	}
	elapsed, demanded := time.Duration(last-first), time.Duration(lastStart-first)
	t.Logf("%d processes x %d goroutines, %d calls in %v (%.0f/s)", len(skews), goroutines, calls, elapsed,
		float64(calls)/elapsed.Seconds())
	for _, b := range buckets {
		bound := float64(b.capacity) + b.perSecond()*elapsed.Seconds()
		got := total[b.name]
		t.Logf("bucket %s (capacity %d, %g/s): admitted %d, bound %.1f (%.2f%%)", b.name, b.capacity, b.perSecond(),
			got, bound, 100*float64(got)/bound)
		if float64(got) > bound {
			t.Errorf("bucket %s admitted %d, more than %.1f", b.name, got, bound)
		}
		// The floor: a share of what the bucket allowed over the time demand
		// lasted, or of what was asked for if less (a starved run asks less).
		floor := min(float64(b.capacity)+b.perSecond()*demanded.Seconds(), float64(calls)/float64(len(buckets)))
		if float64(got) < minShare*floor {
			t.Errorf("bucket %s admitted %d, less than %.0f%% of %.1f", b.name, got, 100*minShare, floor)
		}
	}
}

// TestProcessesShareBuckets is BRIEF Q1 and Q2: 4 processes x 25
// goroutines on three buckets, first with agreeing clocks, then with
// clocks off by up to 500 ms either way. The acquire script reads only
// Redis TIME, so a skewed clock only changes when a process starts and
// stops; the bound over the whole span still holds.
//
// The upper bound is checked in every run: the span runs from the first
// call's start to the last call's end, so a stalled process only widens
// it. The floor (97% of the bound) needs the demand of all 100 goroutines,
// which CPU starvation takes away: it is checked in the soak suite
// (SLUICE_SOAK=1, make soak), with the 10 s runs of the brief; make test
// runs 3 s and asks for half of it, or of the calls made on the bucket if
// fewer (a starved run asks less).
//
// The runs last a whole number of seconds plus 0.15 s: the 1/s bucket
// admits whole tokens, 1 + floor of the seconds elapsed since its first
// grant, so a run of exactly 10 s could end a hair before the 11th token
// and miss 97% of the bound by rounding alone. The two runs go one after
// the other, and not while the tests timing single calls run (see heavy).
func TestProcessesShareBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process scenario")
	}
	t.Parallel()
	heavy.Lock()
	defer heavy.Unlock()
	dur, floor := 3150*time.Millisecond, 0.5
	if soak() {
		dur, floor = 10150*time.Millisecond, 0.97
	}
	t.Run("clocks agree", func(t *testing.T) {
		runScenario(t, q1Buckets, make([]time.Duration, 4), 25, dur, floor)
	})
	t.Run("clocks skewed", func(t *testing.T) {
		runScenario(t, q1Buckets, []time.Duration{-500 * time.Millisecond, -200 * time.Millisecond,
			200 * time.Millisecond, 500 * time.Millisecond}, 25, dur, floor)
	})
}

// TestSlowRates is BRIEF Q3: fractional and slow rates (0.5/s and 7/min)
// under saturating demand for 60 s deliver within 1% of the configured
// rate, measured between the first and the last grant. It belongs to the
// soak suite (SLUICE_SOAK=1, make soak): 61 s of client-side timing does
// not hold on a saturated machine. The count is also checked against
// Redis's clock: never more than 1 + rate x the Redis time of the run.
func TestSlowRates(t *testing.T) {
	if !soak() {
		t.Skip("61 s scenario of the soak suite: SLUICE_SOAK=1 (make soak)")
	}
	t.Parallel()
	e := sharedRedis(t)
	buckets := []scenarioBucket{{"half", 1, 500_000, 1}, {"seven", 1, 7_000_000, 60}}
	for _, b := range buckets {
		e.define(t, b.name, b.capacity, b.permitsMicro, b.period, "svc")
	}
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(3*time.Second))
	t0, err := e.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Midway between the last grant due (60 s) and the next (62 s at 0.5/s),
	// so that a stall on either side changes no count.
	end := time.Now().Add(61 * time.Second)
	grants := make([][]time.Time, len(buckets))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, b := range buckets {
		for range 3 {
			wg.Go(func() {
				for time.Now().Before(end) {
					res, err := l.Acquire(context.Background(), b.name, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						mu.Lock()
						grants[i] = append(grants[i], time.Now())
						mu.Unlock()
						continue
					}
					time.Sleep(min(res.RetryAfter, 10*time.Millisecond))
				}
			})
		}
	}
	wg.Wait()
	t1, err := e.rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range buckets {
		g := grants[i]
		if most := 1 + b.perSecond()*t1.Sub(t0).Seconds(); float64(len(g)) > most {
			t.Errorf("bucket %s: %d grants in %v of Redis time, more than %.2f", b.name, len(g), t1.Sub(t0), most)
		}
		if len(g) < 3 {
			t.Fatalf("bucket %s: %d grants", b.name, len(g))
		}
		slices.SortFunc(g, time.Time.Compare)
		span := g[len(g)-1].Sub(g[0])
		rate := float64(len(g)-1) / span.Seconds()
		t.Logf("bucket %s: %d grants in %v: %.5f/s, configured %.5f/s (%+.2f%%)", b.name, len(g), span, rate,
			b.perSecond(), 100*(rate/b.perSecond()-1))
		if math.Abs(rate/b.perSecond()-1) > 0.01 {
			t.Errorf("bucket %s delivered %.5f/s, configured %.5f/s", b.name, rate, b.perSecond())
		}
		// 60 s of refill after the initial token; nothing more, nothing less.
		if want := 1 + int(60*b.perSecond()); len(g) != want {
			t.Errorf("bucket %s: %d grants, want %d", b.name, len(g), want)
		}
	}
}
