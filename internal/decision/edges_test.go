package decision

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/startup"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// probe GETs url on a connection of its own and returns the status.
func probe(t *testing.T, url string) int {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The attack of the slow-connection report, scaled down with a lowered
// cap: many connections that each send a POST with Content-Length: 100 and
// one byte of body, and many that open the gRPC port and send nothing.
// Health, readiness, a caller connected before and a new gRPC caller must
// still be answered, and the service's connections stay under the cap.
func TestSlowAndIdleConnectionsLeaveProbesAndCallersAnswering(t *testing.T) {
	// Not parallel: it counts the file descriptors of the process.
	limits := startup.DecisionLimits()
	limits.MaxConns = 64
	st := newStack(t, ServerConfig{Limits: limits}, gatewayBuckets, gatewayMappings)
	steady := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	call := func(e *envoy) error {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.token)
		// Waits for a connection: one closed to make room is reopened.
		resp, err := e.c.ShouldRateLimit(ctx, request("edge", 0, desc("generic_key", "unmapped")), grpc.WaitForReady(true))
		if status.Code(err) == codes.Unavailable {
			// Its connection was closed to make room while the answer was
			// in progress (startup.LimitListener counts reads only), as a
			// gateway's would be: asked again, it must be answered.
			resp, err = e.c.ShouldRateLimit(ctx, request("edge", 0, desc("generic_key", "unmapped")), grpc.WaitForReady(true))
		}
		if err == nil && resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Errorf("unmatched descriptor answered %v", resp.GetOverallCode())
		}
		return err
	}
	if err := call(steady); err != nil {
		t.Fatal(err)
	}
	base := openFDs(t)

	// The steady caller goes on asking during the attack.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failures atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			calls.Add(1)
			if err := call(steady); err != nil {
				failures.Add(1)
				t.Errorf("steady caller: %v", err)
			}
		}
	}()

	const slow, idle = 1200, 600
	conns := make([]net.Conn, 0, slow+idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	head := []byte("POST /v1/acquire HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	for i := range slow + idle {
		addr := st.srv.HTTPAddr()
		if i >= slow {
			addr = st.srv.GRPCAddr()
		}
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i < slow {
			if _, err := c.Write(head); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
		}
	}

	// Each probe on a new connection is accepted after every connection
	// of the attack before it. How long they took is logged, not asserted.
	took := make([]time.Duration, 3)
	at := time.Now()
	if code := probe(t, "http://"+st.srv.HTTPAddr()+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d", code)
	}
	took[0], at = time.Since(at), time.Now()
	if code := probe(t, "http://"+st.srv.HTTPAddr()+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz answered %d", code)
	}
	took[1], at = time.Since(at), time.Now()
	if err := call(dialEnvoy(t, st.srv.GRPCAddr(), st.edge)); err != nil {
		t.Errorf("new gRPC caller: %v", err)
	}
	took[2] = time.Since(at)
	close(stop)
	wg.Wait()
	if calls.Load() == 0 || failures.Load() > 0 {
		t.Errorf("steady caller: %d of %d calls failed", failures.Load(), calls.Load())
	}

	// The test's own ends of the attack hold slow+idle descriptors; the
	// service's ends at most the cap of each listener.
	fds := openFDs(t)
	if limit := base + slow + idle + 2*limits.MaxConns + 64; fds > limit {
		t.Errorf("%d file descriptors open, want at most %d (%d before the attack)", fds, limit, base)
	}
	for name, ln := range map[string]net.Listener{"http": st.srv.hln, "grpc": st.srv.gln} {
		if open := ln.(*startup.LimitListener).Open(); open > limits.MaxConns {
			t.Errorf("%s listener holds %d connections, cap %d", name, open, limits.MaxConns)
		}
	}
	t.Logf("%d descriptors before the attack, %d after; %d steady calls; /healthz %s, /readyz %s, new gRPC caller %s",
		base, fds, calls.Load(), took[0].Round(time.Millisecond), took[1].Round(time.Millisecond), took[2].Round(time.Millisecond))
}

// syncBuffer is a log sink shared by the service's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

// counterValue reads a counter of reg by name and label value.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A key no bucket can take is the caller's mistake: 422 over HTTP,
// INVALID_ARGUMENT over gRPC, never a 500; invalid UTF-8 is refused rather
// than folded into U+FFFD; and the refusals are logged once a minute, not
// once a request.
func TestCallerKeysAreRefusedAndLoggedOnceAMinute(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	st := newStack(t, ServerConfig{Registry: reg, Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		gatewayBuckets, gatewayMappings)
	addr, auth := st.srv.HTTPAddr(), "Bearer "+st.edge
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/acquire", strings.NewReader(body))
		code, _, out := send(t, req, auth)
		return code, out
	}
	for _, body := range []string{
		`{"bucket": "per-ip", "key": "` + strings.Repeat("k", 257) + `"}`,
		`{"bucket": "per-ip", "key": "` + strings.Repeat("k", 1024) + `"}`,
		`{"bucket": "per-ip", "key": "` + strings.Repeat("k", 1025) + `"}`,
		"{\"bucket\": \"per-ip\", \"key\": \"a\xff\"}",   // invalid UTF-8
		`{"bucket": "per-ip", "key": "a\ud800"}`,         // a lone surrogate: U+FFFD once decoded
		"{\"bucket\": \"per-ip\", \"key\": \"a\uFFFD\"}", // U+FFFD itself
	} {
		if code, out := post(body); code != http.StatusUnprocessableEntity || !strings.Contains(out, `"invalid"`) {
			t.Errorf("POST %.60q: %d %s, want 422", body, code, out)
		}
	}
	for _, key := range []string{strings.Repeat("k", 300), "a\xff"} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/acquire?bucket=per-ip&key="+url.QueryEscape(key), nil)
		if code, _, out := send(t, req, auth); code != http.StatusUnprocessableEntity {
			t.Errorf("GET key %.20q: %d %s, want 422", key, code, out)
		}
	}
	// Keys that differ only in invalid bytes never share tokens: both are
	// refused, and a valid key still has all its tokens.
	if code, out := post(`{"bucket": "per-ip", "key": "a"}`); code != 200 || !strings.Contains(out, `"remaining":1`) {
		t.Errorf("valid key: %d %s", code, out)
	}

	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	long := request("edge", 0, desc("generic_key", "api", "remote_address", strings.Repeat("1", 300)))
	const n = 200
	for range n {
		if _, err := e.ask(long); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("gRPC over-long key: %v, want InvalidArgument", err)
		}
		if code, _ := post(`{"bucket": "per-ip", "key": "` + strings.Repeat("k", 300) + `"}`); code != http.StatusUnprocessableEntity {
			t.Fatalf("HTTP over-long key: %d", code)
		}
	}
	if got := logs.lines(`"decision request refused`); got != 1 {
		t.Errorf("%d refusal lines logged, want 1 a minute", got)
	}
	if logs.lines(`"level":"ERROR"`) > 0 {
		t.Errorf("caller errors logged as errors:\n%s", logs.buf.String())
	}
	total := 6 + 2 + 2*n
	if got := counterValue(t, reg, "sluice_decide_log_suppressed_total", "kind", "refused_invalid"); got != float64(total-1) {
		t.Errorf("suppressed lines counted %v, want %d", got, total-1)
	}
}
