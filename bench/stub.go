package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// The transport floor of the gateway comparison: a stub rate limit
// service that answers every request at once, allowing it, without Redis
// or any work of its own. It runs as a process of its own like the
// services under test, with grpc-go's and net/http's default server
// options, so its CPU per request is what the transport alone costs a
// service in this harness, and its throughput is the most any service
// could reach on the cores it shares with the load generator.

// stubCommand is the hidden first argument that makes this program the
// stub (see startStub): the harness runs itself again, so the stub needs
// no build of its own.
const stubCommand = "gateway-stub"

// stubName labels the stub in the tables.
const stubName = "transport floor (stub)"

// Fixed answers of the HTTP forms: 200 with the body shape each service
// answers, never read by the harness (it checks the status only).
var (
	stubAcquireBody = []byte(`{"allowed":true,"remaining":0,"limit":0,"retry_after":0,"reset_after":0,"would_deny":false}` + "\n")
	stubJSONBody    = []byte(`{"overallCode":"OK"}` + "\n")
)

// stubRLS answers every ShouldRateLimit with OK.
type stubRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (stubRLS) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// stubHandler answers POST /v1/acquire (sluice-decide's form) and POST
// /json (envoy ratelimit's) with 200 once the body is read, without
// decoding it.
func stubHandler(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

// serveStub is the stub's process: args are the gRPC and the HTTP
// address. It serves until SIGTERM or SIGINT.
func serveStub(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("%s: want the gRPC and the HTTP address, got %q", stubCommand, args)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	gl, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	hl, err := net.Listen("tcp", args[1])
	if err != nil {
		gl.Close()
		return err
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, stubRLS{})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/acquire", stubHandler(stubAcquireBody))
	mux.Handle("POST /json", stubHandler(stubJSONBody))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(gl) }()
	go func() { errc <- hs.Serve(hl) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	gs.Stop()
	_ = hs.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// startStub runs this program again as the stub and waits until both its
// ports accept connections. The harness sends it envoy ratelimit's
// requests (no app token), over gRPC and POST /json.
func startStub(ctx context.Context, dir string) (*rls, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("stub: %w", err)
	}
	var addrs [2]string
	for i := range addrs {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addrs[i] = "127.0.0.1:" + strconv.Itoa(port)
	}
	p, err := startProcess(self, os.Environ(), filepath.Join(dir, "stub.log"), stubCommand, addrs[0], addrs[1])
	if err != nil {
		return nil, err
	}
	if err := waitUntil(ctx, p, "stub", listening(addrs[:]...)); err != nil {
		p.stop()
		return nil, err
	}
	conn, err := dial(addrs[0])
	if err != nil {
		p.stop()
		return nil, err
	}
	return &rls{name: stubName, conn: conn, c: rlsv3.NewRateLimitServiceClient(conn),
		httpURL: "http://" + addrs[1] + "/json",
		stop:    func() { conn.Close(); p.stop() }, pid: p.cmd.Process.Pid}, nil
}
