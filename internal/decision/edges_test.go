package decision

import (
	"context"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

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
	// of the attack before it.
	if code := probe(t, "http://"+st.srv.HTTPAddr()+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d", code)
	}
	if code := probe(t, "http://"+st.srv.HTTPAddr()+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz answered %d", code)
	}
	if err := call(dialEnvoy(t, st.srv.GRPCAddr(), st.edge)); err != nil {
		t.Errorf("new gRPC caller: %v", err)
	}
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
	t.Logf("%d descriptors before the attack, %d after; %d steady calls", base, fds, calls.Load())
}
