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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
)

// keyedReport is what a keyed worker process prints: per key (by index),
// the tokens admitted and when its calls started and ended (unix ns).
type keyedReport struct {
	Allowed    []int64  `json:"allowed"`
	FirstStart []int64  `json:"first_start"`
	FirstEnd   []int64  `json:"first_end"`
	LastStart  []int64  `json:"last_start"`
	LastEnd    []int64  `json:"last_end"`
	Calls      int64    `json:"calls"`
	Fallbacks  int64    `json:"fallbacks"`
	Errors     []string `json:"errors"`
}

// TestKeyedHelperProcess is a worker of the keyed multi-process scenario;
// it does nothing in a normal run.
func TestKeyedHelperProcess(t *testing.T) {
	if os.Getenv("SLUICE_KEYED_WORKER") != "1" {
		t.Skip("worker process of the keyed multi-process scenario")
	}
	rep, err := runKeyedWorker()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("REPORT %s\n", b)
}

func runKeyedWorker() (keyedReport, error) {
	env := func(k string) string { return os.Getenv("SLUICE_KEYED_WORKER_" + k) }
	dur, _ := time.ParseDuration(env("DURATION"))
	goroutines, _ := strconv.Atoi(env("GOROUTINES"))
	keys, _ := strconv.Atoi(env("KEYS"))
	index, _ := strconv.Atoi(env("INDEX"))
	bucket := env("BUCKET")

	rdb := redis.NewClient(&redis.Options{Addr: env("ADDR"), PoolSize: 8})
	defer rdb.Close()
	l, err := client.New(rdb, "svc", client.WithKeyPrefix(env("PREFIX")),
		client.WithFailurePolicy(client.FailClosed), client.WithTimeout(3*time.Second))
	if err != nil {
		return keyedReport{}, err
	}
	defer l.Close()
	if _, err := l.AcquireKey(context.Background(), "warm-up", "k", 1); err != nil && !errors.Is(err, client.ErrUnknownBucket) {
		return keyedReport{}, err
	}
	fmt.Println("READY")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return keyedReport{}, fmt.Errorf("read start time: %w", err)
	}
	startNS, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return keyedReport{}, err
	}
	time.Sleep(time.Until(time.Unix(0, startNS)))
	end := time.Unix(0, startNS).Add(dur)

	names := make([]string, keys)
	for k := range names {
		names[k] = "user-" + strconv.Itoa(k)
	}
	rep := keyedReport{Allowed: make([]int64, keys), FirstStart: make([]int64, keys), FirstEnd: make([]int64, keys),
		LastStart: make([]int64, keys), LastEnd: make([]int64, keys)}
	for k := range keys {
		rep.FirstStart[k], rep.FirstEnd[k] = math.MaxInt64, math.MaxInt64
	}
	// Every goroutine walks all keys, starting at its own offset, so each
	// key is asked for evenly by every process throughout the run.
	var mu sync.Mutex
	var calls, fallbacks atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			type stat struct{ allowed, firstStart, firstEnd, lastStart, lastEnd int64 }
			mine := map[int]*stat{}
			var errs []string
			offset := (index*goroutines + g) * keys / (4 * goroutines)
			for i := 0; ; i++ {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				k := (offset + i) % keys
				res, err := l.AcquireKey(context.Background(), bucket, names[k], 1)
				t1 := time.Now()
				calls.Add(1)
				s := mine[k]
				if s == nil {
					s = &stat{firstStart: t0.UnixNano(), firstEnd: t1.UnixNano()}
					mine[k] = s
				}
				s.lastStart, s.lastEnd = t0.UnixNano(), t1.UnixNano()
				switch {
				case res.Fallback:
					fallbacks.Add(1)
				case err != nil:
					if len(errs) < 5 {
						errs = append(errs, err.Error())
					}
				case res.Allowed:
					s.allowed++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k, s := range mine {
				rep.Allowed[k] += s.allowed
				rep.FirstStart[k] = min(rep.FirstStart[k], s.firstStart)
				rep.FirstEnd[k] = min(rep.FirstEnd[k], s.firstEnd)
				rep.LastStart[k] = max(rep.LastStart[k], s.lastStart)
				rep.LastEnd[k] = max(rep.LastEnd[k], s.lastEnd)
			}
			rep.Errors = append(rep.Errors, errs...)
		})
	}
	wg.Wait()
	rep.Calls, rep.Fallbacks = calls.Load(), fallbacks.Load()
	return rep, nil
}

// TestKeyedProcessesShareKeys is BRIEF Q13: 4 processes drive one keyed
// bucket hard over many keys, and for every key the tokens admitted stay
// within capacity + rate x T and reach 97% of it. Per key, T runs from the
// start of its first call (in any process) to the end of its last for the
// upper bound, and from the end of its first call to the start of its last
// for the floor: Redis ran each script between its call's start and end,
// and all processes share the host's clock with Redis.
//
// The default run takes about 5 s on 500 keys, each allowed 30 tokens and
// 2 more per second (40 over the run, so that one token is 2.5%): few
// enough keys that each is asked for far more often than it refills even
// under the race detector on a loaded machine. SLUICE_SOAK=1 runs
// BRIEF's figure: 10,000 keys for 10 s at 20 + 2/s.
func TestKeyedProcessesShareKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process scenario")
	}
	t.Parallel()
	heavy.Lock()
	defer heavy.Unlock()
	keys, dur, capacity := 500, 5*time.Second, int64(30)
	if os.Getenv("SLUICE_SOAK") == "1" {
		keys, dur, capacity = 10_000, 10*time.Second, 20
	}
	const perSecond = 2
	e, srv := privateRedis(t)
	e.defineKeyed(t, "per-user", capacity, perSecond*1_000_000, 1, "svc")

	const procs, goroutines = 4, 25
	var cmds []*exec.Cmd
	var outs []*syncBuffer
	var stdins []io.WriteCloser
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKeyedHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "SLUICE_KEYED_WORKER=1",
			"SLUICE_KEYED_WORKER_ADDR="+srv.Addr, "SLUICE_KEYED_WORKER_PREFIX="+e.prefix,
			"SLUICE_KEYED_WORKER_DURATION="+dur.String(), "SLUICE_KEYED_WORKER_GOROUTINES="+strconv.Itoa(goroutines),
			"SLUICE_KEYED_WORKER_KEYS="+strconv.Itoa(keys), "SLUICE_KEYED_WORKER_INDEX="+strconv.Itoa(i),
			"SLUICE_KEYED_WORKER_BUCKET=per-user")
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
	start := time.Now().Add(300 * time.Millisecond)
	for _, w := range stdins {
		fmt.Fprintln(w, start.UnixNano())
		w.Close()
	}
	allowed := make([]int64, keys)
	firstStart, firstEnd := make([]int64, keys), make([]int64, keys)
	lastStart, lastEnd := make([]int64, keys), make([]int64, keys)
	for k := range keys {
		firstStart[k], firstEnd[k] = math.MaxInt64, math.MaxInt64
	}
	var calls int64
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
		}
		var rep keyedReport
		_, js, ok := strings.Cut(outs[i].String(), "REPORT ")
		if js, _, _ = strings.Cut(js, "\n"); !ok || json.Unmarshal([]byte(js), &rep) != nil {
			t.Fatalf("worker %d printed no report:\n%.2000s", i, outs[i])
		}
		if rep.Fallbacks > 0 || len(rep.Errors) > 0 {
			t.Errorf("worker %d: %d fallbacks, errors %v", i, rep.Fallbacks, rep.Errors)
		}
		calls += rep.Calls
		for k := range keys {
			allowed[k] += rep.Allowed[k]
			if rep.LastEnd[k] == 0 {
				continue // this process never asked for the key
			}
			firstStart[k], firstEnd[k] = min(firstStart[k], rep.FirstStart[k]), min(firstEnd[k], rep.FirstEnd[k])
			lastStart[k], lastEnd[k] = max(lastStart[k], rep.LastStart[k]), max(lastEnd[k], rep.LastEnd[k])
		}
	}
	var over, under int
	var total, sumBound, worst float64 = 0, 0, 2
	for k := range keys {
		if lastEnd[k] == 0 {
			t.Fatalf("key %d was never asked for", k)
		}
		bound := float64(capacity) + perSecond*float64(lastEnd[k]-firstStart[k])/1e9
		floor := float64(capacity) + perSecond*float64(lastStart[k]-firstEnd[k])/1e9
		got := float64(allowed[k])
		total += got
		sumBound += bound
		worst = min(worst, got/floor)
		if got > bound {
			over++
			if over <= 5 {
				t.Errorf("key %d admitted %.0f, above capacity + rate x T = %.2f", k, got, bound)
			}
		}
		// The 97% floor assumes each key is asked for often enough that
		// no refill goes to waste, which only an unloaded machine
		// promises: the soak suite holds it; make test checks the bound.
		if soak() && got < 0.97*floor {
			under++
			if under <= 5 {
				t.Errorf("key %d admitted %.0f, below 97%% of %.2f", k, got, floor)
			}
		}
	}
	t.Logf("%d processes x %d goroutines, %d keys: %d calls in %v (%.0f/s); admitted %.0f of %.0f possible (%.2f%%); worst key %.2f%% of its floor; %d keys over, %d under",
		procs, goroutines, keys, calls, dur, float64(calls)/dur.Seconds(), total, sumBound, 100*total/sumBound, 100*worst, over, under)
}
