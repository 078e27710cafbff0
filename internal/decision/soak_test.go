package decision

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/startup"
)

// soakDuration is how long TestDecisionSoak runs: 10 s in the normal
// suite, an hour in the soak suite (SLUICE_SOAK=1), SLUICE_SOAK_DURATION
// when set.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("SLUICE_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SLUICE_SOAK_DURATION=%q: want a positive duration like 3m", v)
		}
		return d
	}
	if os.Getenv("SLUICE_SOAK") == "1" {
		return time.Hour
	}
	return 10 * time.Second
}

// rssBytes is this process's resident set size.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// peaks are the largest figures sampled.
type peaks struct {
	mu                  sync.Mutex
	rss, heap           int64 // heap: bytes of Go heap in use
	fds, goroutines, at int
}

func (p *peaks) sample(t *testing.T) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, fds, g := rssBytes(t), openFDs(t), runtime.NumGoroutine()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rss, p.heap = max(p.rss, rss), max(p.heap, int64(ms.HeapInuse))
	p.fds, p.goroutines = max(p.fds, fds), max(p.goroutines, g)
	p.at++
}

// The decision service under churning connections (opened and closed,
// left idle, trickling a request body, kept alive after a probe) beside
// steady acquires over gRPC and HTTP: memory, file descriptors and
// goroutines stay bounded, and the bucket never admits more than its
// capacity plus its rate times the time elapsed on Redis's clock.
func TestDecisionSoak(t *testing.T) {
	// Not parallel: it samples the whole process.
	run := soakDuration(t)
	limits := startup.DecisionLimits()
	limits.MaxConns = 128
	const capacity, perSecond = 20, 20
	st := newStack(t, ServerConfig{Limits: limits},
		[]bucketDef{{name: "soak", owner: "edge", rate: fmt.Sprintf("%d/s", perSecond), capacity: capacity}},
		[]descriptors.Mapping{{App: "edge", Domain: "edge", Entries: entries("generic_key", "soak"), Bucket: "soak"}})
	httpAddr, grpcAddr := st.srv.HTTPAddr(), st.srv.GRPCAddr()

	runtime.GC()
	base := peaks{rss: rssBytes(t), fds: openFDs(t), goroutines: runtime.NumGoroutine()}
	start, err := st.rdb.Time(bg).Result()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, run)
	defer cancel()
	var wg sync.WaitGroup

	// Steady acquires: two gRPC callers (Envoy's shape) and two HTTP ones
	// (the GET form, as nginx asks).
	var admitted, denied, calls, failures atomic.Int64
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var e *envoy
			if i < 2 {
				e = dialEnvoy(t, grpcAddr, st.edge)
			}
			hc := &http.Client{Timeout: 30 * time.Second}
			for ctx.Err() == nil {
				calls.Add(1)
				var allowed bool
				var err error
				if e != nil {
					cctx, ccancel := context.WithTimeout(bg, 30*time.Second)
					cctx = metadata.AppendToOutgoingContext(cctx, "authorization", "Bearer "+e.token)
					var resp *rlsv3.RateLimitResponse
					resp, err = e.c.ShouldRateLimit(cctx, request("edge", 0, desc("generic_key", "soak")), grpc.WaitForReady(true))
					ccancel()
					allowed = err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK
				} else {
					req, _ := http.NewRequest("GET", "http://"+httpAddr+"/v1/acquire?"+url.Values{"bucket": {"soak"}}.Encode(), nil)
					req.Header.Set("Authorization", "Bearer "+st.edge)
					var resp *http.Response
					if resp, err = hc.Do(req); err == nil {
						resp.Body.Close()
						allowed = resp.StatusCode == http.StatusOK
						if resp.StatusCode != http.StatusOK && resp.StatusCode != DeniedStatus {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
				}
				switch {
				case err != nil:
					failures.Add(1)
				case allowed:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}

	// Churn: each goroutine holds one connection at a time, in turn idle,
	// trickling a body, kept alive after a probe, or a silent gRPC one,
	// for up to 1.5 s, then closes it.
	const churners = 150
	var opened atomic.Int64
	head := []byte("POST /v1/acquire HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	probe := []byte("GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n")
	for i := range churners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for n := 0; ctx.Err() == nil; n++ {
				mode := (i + n) % 4
				addr := httpAddr
				if mode == 3 {
					addr = grpcAddr
				}
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					continue // the accept queue was full for a moment
				}
				opened.Add(1)
				switch mode {
				case 1:
					_, _ = c.Write(head)
				case 2:
					_, _ = c.Write(probe)
				}
				hold := time.NewTimer(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
				select {
				case <-ctx.Done():
				case <-hold.C:
				}
				hold.Stop()
				c.Close()
			}
		}()
	}

	// The peaks after a warm-up of a quarter of the run (at most a
	// minute), when every kind of connection has come and gone, bound the
	// rest: what grows after it grows with time, a leak.
	var p, warm peaks
	p.sample(t)
	warmUntil := time.Now().Add(min(run/4, time.Minute))
	tick := time.NewTicker(time.Second)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case now := <-tick.C:
			p.sample(t)
			if now.Before(warmUntil) {
				warm.sample(t)
			}
		}
	}
	tick.Stop()
	wg.Wait()
	end, err := st.rdb.Time(bg).Result()
	if err != nil {
		t.Fatal(err)
	}
	p.sample(t)

	elapsed := end.Sub(start)
	bound := capacity + int64(float64(perSecond)*elapsed.Seconds())
	hl, gl := st.srv.hln.(*startup.LimitListener), st.srv.gln.(*startup.LimitListener)
	t.Logf("soak: %s (Redis clock %s), %d connections churned (%d closed at the cap), %d acquires: "+
		"%d admitted (bound %d), %d denied, %d failed; peaks over %d samples: RSS %d MiB (%d MiB before, %d MiB in the warm-up), "+
		"Go heap %d MiB (%d MiB in the warm-up), %d file descriptors (%d before), %d goroutines (%d before)",
		run, elapsed.Round(time.Millisecond), opened.Load(), hl.Evicted()+gl.Evicted(), calls.Load(),
		admitted.Load(), bound, denied.Load(), failures.Load(), p.at, p.rss>>20, base.rss>>20, warm.rss>>20,
		p.heap>>20, warm.heap>>20, p.fds, base.fds, p.goroutines, base.goroutines)

	if admitted.Load() > bound {
		t.Errorf("over-admission: %d admitted in %s of Redis time, at most %d possible", admitted.Load(), elapsed, bound)
	}
	if calls.Load() == 0 || failures.Load()*100 > calls.Load() {
		t.Errorf("%d of %d steady acquires failed, want under 1%%", failures.Load(), calls.Load())
	}
	// The test holds at most one connection per churner and caller; the
	// service at most the cap on each listener.
	if limit := base.fds + churners + 8 + 2*limits.MaxConns + 64; p.fds > limit {
		t.Errorf("file descriptors peaked at %d, want at most %d", p.fds, limit)
	}
	// A connection costs the service a few goroutines, the test one per
	// churner and caller.
	if limit := base.goroutines + churners + 16 + 8*2*limits.MaxConns; p.goroutines > limit {
		t.Errorf("goroutines peaked at %d, want at most %d", p.goroutines, limit)
	}
	// Bounded connections keep memory flat after the warm-up (20,000 held
	// connections took 513 MB): the Go heap always, RSS without the race
	// detector, whose own memory grows with what the run has seen.
	if warm.at > 0 {
		if limit := warm.heap + 64<<20; p.heap > limit {
			t.Errorf("Go heap peaked at %d MiB, %d MiB after the warm-up: want at most %d MiB", p.heap>>20, warm.heap>>20, limit>>20)
		}
		if limit := warm.rss + 128<<20; !raceEnabled && p.rss > limit {
			t.Errorf("RSS peaked at %d MiB, %d MiB after the warm-up: want at most %d MiB", p.rss>>20, warm.rss>>20, limit>>20)
		}
	}
}
