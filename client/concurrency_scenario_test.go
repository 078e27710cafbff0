package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// The concurrency scenarios (BRIEF Q22) re-run this test binary as worker
// processes (TestSlotHelperProcess) that take and release slots of one
// concurrency limit, or take some and wait to be killed.

// slotReport is what a pairs worker prints.
type slotReport struct {
	Pairs     int64    `json:"pairs"`     // slots taken and released
	Denied    int64    `json:"denied"`    // takes refused at the limit
	MaxCount  int64    `json:"max_count"` // the most in flight the callers counted
	Over      int64    `json:"over"`      // times the callers counted more than the limit
	Lost      int64    `json:"lost"`      // releases of slots that had expired while held
	Fallbacks int64    `json:"fallbacks"` // answers of the failure policy
	Errors    []string `json:"errors"`
}

// TestSlotHelperProcess is a worker of the concurrency scenarios; it does
// nothing in a normal run.
func TestSlotHelperProcess(t *testing.T) {
	if os.Getenv("SLUICE_SLOT_WORKER") == "" {
		t.Skip("worker process of the concurrency scenarios")
	}
	var err error
	switch os.Getenv("SLUICE_SLOT_WORKER") {
	case "pairs":
		var rep slotReport
		if rep, err = runSlotPairs(); err == nil {
			b, _ := json.Marshal(rep)
			fmt.Printf("REPORT %s\n", b)
		}
	case "hold":
		err = runSlotHolder()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func slotWorkerEnv() (func(string) string, *redis.Client, *client.Limiter, error) {
	env := func(k string) string { return os.Getenv("SLUICE_SLOT_" + k) }
	rdb := redis.NewClient(&redis.Options{Addr: env("ADDR"), PoolSize: 40})
	l, err := client.New(rdb, "svc", client.WithKeyPrefix(env("PREFIX")), client.WithFailurePolicy(client.FailClosed),
		client.WithTimeout(5*time.Second))
	return env, rdb, l, err
}

// runSlotPairs runs GOROUTINES goroutines that each take and release
// PAIRS slots of limit LIMIT, holding each for a random time up to HOLD.
// While it holds a slot, a caller counts itself in the shared counter
// COUNTER (INCR after the take, DECR before the release), so that the
// callers of every process together count what is in flight.
func runSlotPairs() (slotReport, error) {
	env, rdb, l, err := slotWorkerEnv()
	if err != nil {
		return slotReport{}, err
	}
	defer rdb.Close()
	defer l.Close()
	goroutines, _ := strconv.Atoi(env("GOROUTINES"))
	pairs, _ := strconv.Atoi(env("PAIRS"))
	limit, _ := strconv.ParseInt(env("LIMIT"), 10, 64)
	hold, _ := time.ParseDuration(env("HOLD"))
	name, counter := env("LIMIT_NAME"), env("COUNTER")
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return slotReport{}, fmt.Errorf("wait for the start: %w", err)
	}
	var (
		mu  sync.Mutex
		rep slotReport
		wg  sync.WaitGroup
	)
	ctx := context.Background()
	for range goroutines {
		wg.Go(func() {
			var r slotReport
			for r.Pairs < int64(pairs) && len(r.Errors) < 5 {
				s, err := l.TakeSlot(ctx, name)
				switch {
				case s.Fallback:
					r.Fallbacks++
					continue
				case err != nil:
					r.Errors = append(r.Errors, err.Error())
					continue
				case !s.Allowed:
					// The limit is full: try again after about a hold's time.
					r.Denied++
					time.Sleep(time.Duration(rand.Int64N(int64(5 * hold))))
					continue
				}
				n, err := rdb.Incr(ctx, counter).Result()
				if err != nil {
					r.Errors = append(r.Errors, err.Error())
				}
				r.MaxCount = max(r.MaxCount, n)
				if n > limit {
					r.Over++
				}
				if hold > 0 {
					time.Sleep(time.Duration(rand.Int64N(int64(hold))))
				}
				if err := rdb.Decr(ctx, counter).Err(); err != nil {
					r.Errors = append(r.Errors, err.Error())
				}
				res, err := s.Release(ctx)
				switch {
				case err != nil:
					r.Errors = append(r.Errors, "release: "+err.Error())
				case !res.Allowed:
					r.Lost++
				}
				r.Pairs++
			}
			mu.Lock()
			defer mu.Unlock()
			rep.Pairs, rep.Denied, rep.Over, rep.Lost = rep.Pairs+r.Pairs, rep.Denied+r.Denied, rep.Over+r.Over, rep.Lost+r.Lost
			rep.Fallbacks += r.Fallbacks
			rep.MaxCount = max(rep.MaxCount, r.MaxCount)
			rep.Errors = append(rep.Errors, r.Errors...)
		})
	}
	wg.Wait()
	return rep, nil
}

// runSlotHolder takes HOLD_N slots of LIMIT_NAME, prints their ids and
// waits to be killed.
func runSlotHolder() error {
	env, rdb, l, err := slotWorkerEnv()
	if err != nil {
		return err
	}
	defer rdb.Close()
	defer l.Close()
	n, _ := strconv.Atoi(env("HOLD_N"))
	var ids []string
	for range n {
		s, err := l.TakeSlot(context.Background(), env("LIMIT_NAME"))
		if err != nil || !s.Allowed {
			return fmt.Errorf("take: %+v %v", s.SlotResult, err)
		}
		ids = append(ids, s.ID())
	}
	fmt.Printf("HELD %s\n", strings.Join(ids, " "))
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // killed before this returns
	return errors.New("not killed")
}

// defineSlots creates concurrency limit name: at most limit slots, each
// expiring lease after it was taken or renewed, for apps.
func (e env) defineSlots(t testing.TB, name string, limit int64, lease time.Duration, apps ...string) {
	t.Helper()
	cfg := redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: limit, Apps: apps,
		Kind: redisscript.KindConcurrency, SlotMillis: lease.Milliseconds()}
	if out, err := redisscript.Apply(context.Background(), e.rdb, e.ks(), cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("define %s: %v %v", name, out, err)
	}
}

// startSlotWorker starts a worker process of mode with env, and returns it
// with its output.
func startSlotWorker(t *testing.T, mode string, env ...string) (*exec.Cmd, *syncBuffer, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSlotHelperProcess$", "-test.v")
	cmd.Env = append(append(os.Environ(), "SLUICE_SLOT_WORKER="+mode), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out, func() { fmt.Fprintln(stdin); stdin.Close() }
}

func waitForLine(t *testing.T, out *syncBuffer, word string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, rest, ok := strings.Cut(out.String(), word); ok {
			if line, _, ok := strings.Cut(rest, "\n"); ok {
				return strings.TrimSpace(line)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s from the worker:\n%s", word, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrencyProcesses is BRIEF Q22's first and third part: 4
// processes x 25 goroutines take and release slots of a limit of 20,
// holding each for a random time up to 2 ms, 100,000 pairs in all (25,000
// per process) in the soak suite (SLUICE_SOAK=1, make soak: a minute or
// more on a loaded machine), 4,000 in make test. In flight never exceeds the limit, counted two
// ways: by the callers, who count themselves in a shared Redis counter
// while they hold a slot (the counter's value after each increment is at
// most the limit), and by sampling the slots in use from Redis meanwhile
// (on Redis's clock). No slot expires while held (the lease time, a
// minute, dwarfs any stall), and afterwards nothing leaks: no slot is
// held, the slot set is gone, and the counter is back at 0.
func TestConcurrencyProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process scenario")
	}
	t.Parallel()
	heavy.Lock()
	defer heavy.Unlock()
	const processes, goroutines, limit = 4, 25, 20
	// 100,000 pairs in the soak suite, 4,000 in make test.
	perGoroutine := 40
	if soak() {
		perGoroutine = 1000
	}
	e, srv := privateRedis(t)
	e.defineSlots(t, "work", limit, time.Minute, "svc")
	counter := e.prefix + "test:in-flight"
	var starts []func()
	var cmds []*exec.Cmd
	var outs []*syncBuffer
	for range processes {
		cmd, out, start := startSlotWorker(t, "pairs", "SLUICE_SLOT_ADDR="+srv.Addr, "SLUICE_SLOT_PREFIX="+e.prefix,
			"SLUICE_SLOT_GOROUTINES="+strconv.Itoa(goroutines), "SLUICE_SLOT_PAIRS="+strconv.Itoa(perGoroutine),
			"SLUICE_SLOT_LIMIT="+strconv.Itoa(limit), "SLUICE_SLOT_HOLD=2ms", "SLUICE_SLOT_LIMIT_NAME=work",
			"SLUICE_SLOT_COUNTER="+counter)
		cmds, outs, starts = append(cmds, cmd), append(outs, out), append(starts, start)
	}
	for _, out := range outs {
		waitForLine(t, out, "READY")
	}
	// Sample the slots in use from Redis while the workers run.
	ctx, stop := context.WithCancel(context.Background())
	var samples, maxInUse atomic.Int64
	var sampleErr atomic.Pointer[error]
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			st, err := redisscript.ReadSlots(ctx, e.rdb, e.ks(), "work", "")
			if err != nil {
				if ctx.Err() == nil {
					sampleErr.Store(&err)
				}
				return
			}
			samples.Add(1)
			if st.InUse > maxInUse.Load() {
				maxInUse.Store(st.InUse)
			}
		}
	}()
	began := time.Now()
	for _, start := range starts {
		start()
	}
	var total slotReport
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
		var rep slotReport
		if js := waitForLine(t, outs[i], "REPORT "); json.Unmarshal([]byte(js), &rep) != nil {
			t.Fatalf("worker %d printed no report:\n%s", i, outs[i])
		}
		if len(rep.Errors) > 0 {
			t.Errorf("worker %d: errors %v", i, rep.Errors)
		}
		total.Pairs, total.Denied, total.Over, total.Lost = total.Pairs+rep.Pairs, total.Denied+rep.Denied,
			total.Over+rep.Over, total.Lost+rep.Lost
		total.Fallbacks += rep.Fallbacks
		total.MaxCount = max(total.MaxCount, rep.MaxCount)
	}
	stop()
	<-sampled
	if p := sampleErr.Load(); p != nil {
		t.Fatalf("sampling: %v", *p)
	}
	t.Logf("%d processes x %d goroutines: %d pairs, %d denied takes in %v; most in flight: %d counted by the callers, "+
		"%d in %d samples of Redis", processes, goroutines, total.Pairs, total.Denied, time.Since(began).Round(time.Millisecond),
		total.MaxCount, maxInUse.Load(), samples.Load())
	if total.Pairs != int64(processes*goroutines*perGoroutine) {
		t.Errorf("%d pairs, want %d", total.Pairs, processes*goroutines*perGoroutine)
	}
	if total.Over > 0 || total.MaxCount > limit {
		t.Errorf("the callers counted up to %d in flight (%d times over the limit of %d)", total.MaxCount, total.Over, limit)
	}
	if maxInUse.Load() > limit {
		t.Errorf("Redis held up to %d slots, more than the limit of %d", maxInUse.Load(), limit)
	}
	if samples.Load() == 0 {
		t.Error("no sample of Redis")
	}
	if total.Lost > 0 || total.Fallbacks > 0 {
		t.Errorf("%d slots expired while held, %d answers of the failure policy", total.Lost, total.Fallbacks)
	}
	// Nothing leaked.
	st, err := redisscript.ReadSlots(context.Background(), e.rdb, e.ks(), "work", "")
	if err != nil {
		t.Fatal(err)
	}
	if st.InUse != 0 || st.Held != 0 {
		t.Errorf("after every release: %d slots in use, %d held (expired ones included)", st.InUse, st.Held)
	}
	if n, err := e.rdb.Exists(context.Background(), e.ks().Slots("work")).Result(); err != nil || n != 0 {
		t.Errorf("the slot set is still there: %d %v", n, err)
	}
	if v, err := e.rdb.Get(context.Background(), counter).Int64(); err != nil || v != 0 {
		t.Errorf("the callers' counter is %d %v after every release", v, err)
	}
}

// TestConcurrencyKilledProcess is BRIEF Q22's second part: a process
// killed while it holds slots does not hold them for longer than the
// lease time, on Redis's clock. Each of its slots expires no later than
// the kill plus the lease time (their scores), and once Redis's clock
// passes the last of them, the whole limit is free again.
func TestConcurrencyKilledProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process scenario")
	}
	t.Parallel()
	const limit, lease = 5, time.Second
	e := sharedRedis(t)
	e.defineSlots(t, "jobs", limit, lease, "svc")
	ctx := context.Background()
	cmd, out, _ := startSlotWorker(t, "hold", "SLUICE_SLOT_ADDR="+redisAddr(t, e), "SLUICE_SLOT_PREFIX="+e.prefix,
		"SLUICE_SLOT_LIMIT_NAME=jobs", "SLUICE_SLOT_HOLD_N="+strconv.Itoa(limit))
	ids := strings.Fields(waitForLine(t, out, "HELD "))
	if len(ids) != limit {
		t.Fatalf("the worker held %v", ids)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, id := range ids {
		score, err := e.rdb.ZScore(ctx, e.ks().Slots("jobs"), id).Result()
		if errors.Is(err, redis.Nil) {
			continue // expired (and purged) already: a stalled test
		}
		if err != nil {
			t.Fatal(err)
		}
		exp := int64(score)
		if exp > killed.UnixMicro()+lease.Microseconds() {
			t.Errorf("slot %s expires at %d, after the kill (%d) plus the lease time", id, exp, killed.UnixMicro())
		}
		last = max(last, exp)
	}
	// Wait on Redis's clock for the last expiry, then take the whole limit.
	for {
		now, err := e.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.UnixMicro() > last {
			break
		}
		time.Sleep(time.Duration(last-now.UnixMicro())*time.Microsecond + time.Millisecond)
	}
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed))
	for i := range limit {
		s, err := l.TakeSlot(ctx, "jobs")
		if err != nil || !s.Allowed {
			t.Fatalf("take %d after the lease time: %+v %v", i+1, s.SlotResult, err)
		}
		if s.InUse != int64(i+1) {
			t.Errorf("take %d: %d in use, want %d: a slot of the killed process is still held", i+1, s.InUse, i+1)
		}
	}
}

// redisAddr is the address of the shared test Redis.
func redisAddr(t *testing.T, e env) string {
	t.Helper()
	c, ok := e.rdb.(*redis.Client)
	if !ok {
		t.Fatal("not a single-node client")
	}
	return c.Options().Addr
}
