package decision

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/startup"
)

// ServerConfig is what a running decision service needs.
type ServerConfig struct {
	DB    *sqlx.DB
	Redis redis.UniversalClient
	// KeyPrefix of the Redis keys; must match the sync worker's.
	KeyPrefix string
	// GRPCAddr and HTTPAddr are the listen addresses (":0" picks a port).
	// The HTTP listener serves /v1/acquire, /healthz and /readyz.
	GRPCAddr, HTTPAddr string
	// MetricsAddr, unless empty, is the address of a listener of its own
	// serving Prometheus /metrics: the metrics name apps and buckets
	// (some chosen by callers), so they are not served to whoever reaches
	// the decision ports.
	MetricsAddr string
	Unmatched   Unmatched
	Headers     Headers
	// CriticalEntry names the descriptor entry that marks a descriptor
	// critical (Config.CriticalEntry; default DefaultCriticalEntry).
	CriticalEntry string
	// Client options of the Limiters: failure policy, timeout, instances.
	Client          []client.Option
	CountUsage      bool
	RefreshInterval time.Duration
	// Registry receives every metric; nil makes a private one.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// Limits bound both listeners; the zero value means
	// startup.DecisionLimits.
	Limits startup.Limits
	// TLS, when its files are set, serves both decision ports over TLS
	// (the metrics listener stays plain). With a client CA, the gRPC port
	// requires a client certificate in the handshake; the HTTP port asks
	// for one and /v1/ refuses a request without it, so that probes
	// (/healthz, /readyz) answer without one.
	TLS startup.TLSFiles
}

// Server is a running decision service: both listeners, the refresh loop
// and the Limiters.
type Server struct {
	Service *Service
	grpc    *grpc.Server
	health  *health.Server
	http    *http.Server
	gln     net.Listener
	hln     net.Listener
	mln     net.Listener
	metrics *http.Server
	pool    *Pool
	cancel  context.CancelFunc
	done    chan struct{}
	errc    chan error
}

// Start loads the tokens and mappings (retrying until ctx ends: the
// schema may still be migrating), then listens. It returns once both
// listeners accept connections.
func Start(ctx context.Context, cfg ServerConfig) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	metrics, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	pool := NewPool(cfg.Redis, LimiterOptions{
		Client:     append([]client.Option{client.WithKeyPrefix(cfg.KeyPrefix)}, cfg.Client...),
		KeyPrefix:  cfg.KeyPrefix,
		Metrics:    reg,
		CountUsage: cfg.CountUsage,
		Logger:     log,
	})
	svc := New(Config{
		Sources: Sources{
			Mappings: descriptors.NewStore(cfg.DB), Tokens: apptokens.NewStore(cfg.DB), Buckets: buckets.NewStore(cfg.DB),
		},
		Acquirers: pool, Unmatched: cfg.Unmatched, Headers: cfg.Headers, CriticalEntry: cfg.CriticalEntry,
		RefreshInterval: cfg.RefreshInterval, Metrics: metrics, Logger: log,
	})
	for {
		err := svc.Refresh(ctx, true)
		if err == nil {
			break
		}
		log.Warn("cannot load decision config yet", "err", err)
		select {
		case <-ctx.Done():
			pool.Close()
			return nil, fmt.Errorf("load decision config: %w", err)
		case <-time.After(time.Second):
		}
	}

	limits := cfg.Limits
	if limits == (startup.Limits{}) {
		limits = startup.DecisionLimits()
	}
	s := &Server{Service: svc, pool: pool, done: make(chan struct{}), errc: make(chan error, 2)}
	if s.gln, err = limits.Listen(cfg.GRPCAddr); err != nil {
		pool.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.GRPCAddr, err)
	}
	if s.hln, err = limits.Listen(cfg.HTTPAddr); err != nil {
		s.gln.Close()
		pool.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	if cfg.MetricsAddr != "" {
		if s.mln, err = startup.ProbeLimits().Listen(cfg.MetricsAddr); err != nil {
			s.closeListeners()
			pool.Close()
			return nil, fmt.Errorf("listen on %s for metrics: %w", cfg.MetricsAddr, err)
		}
		s.metrics = startup.MetricsServer(reg, log)
	}
	gopts := grpcOptions(limits)
	var htls *tls.Config
	if cfg.TLS.Enabled() {
		gtls, err := cfg.TLS.ServerConfig(startup.RequireClientCert, log)
		if err == nil {
			htls, err = cfg.TLS.ServerConfig(startup.VerifyClientCertIfGiven, log)
		}
		if err != nil {
			s.closeListeners()
			pool.Close()
			return nil, err
		}
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(gtls)))
	}
	s.grpc = grpc.NewServer(gopts...)
	RegisterGRPC(s.grpc, svc)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)

	mux := http.NewServeMux()
	var wrap func(http.Handler) http.Handler
	if cfg.TLS.ClientCAFile != "" {
		wrap = requireClientCert
	}
	svc.Routes(mux, wrap)
	startup.Probes(mux, nil, func(ctx context.Context) (any, bool) {
		st := s.readiness(ctx, cfg.Redis)
		return st, st.Ready
	})
	s.http = limits.HTTPServer(mux, log)
	s.http.TLSConfig = htls

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = svc.Run(runCtx)
	}()
	go func() { s.errc <- s.grpc.Serve(s.gln) }()
	go func() {
		if htls != nil {
			s.errc <- s.http.ServeTLS(s.hln, "", "")
		} else {
			s.errc <- s.http.Serve(s.hln)
		}
	}()
	if s.metrics != nil {
		go func() { s.errc <- s.metrics.Serve(s.mln) }()
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	log.Info("decision service listening", "grpc", s.GRPCAddr(), "http", s.HTTPAddr())
	return s, nil
}

// closeListeners closes the listeners opened, when Start fails.
func (s *Server) closeListeners() {
	for _, ln := range []net.Listener{s.gln, s.hln, s.mln} {
		if ln != nil {
			ln.Close()
		}
	}
}

// requireClientCert refuses, under mTLS, a request whose connection
// brought no client certificate (one it brought was verified in the
// handshake).
func requireClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthenticated","message":"a client certificate is required"}}`+"\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// grpcOptions bound the gRPC server by l: streams per connection, message
// size, handshake time, idle and age of connections, and the keepalive
// pings it sends and accepts.
func grpcOptions(l startup.Limits) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: l.MaxConnectionIdle, MaxConnectionAge: l.MaxConnectionAge,
			MaxConnectionAgeGrace: l.MaxConnectionAgeGrace, Time: l.KeepaliveTime, Timeout: l.KeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		// A goroutine per stream starts on a small stack and grows it on
		// every request: a sixth of the service's CPU at 100 streams.
		// Workers keep their grown stacks; a stream finding none idle
		// still gets a goroutine of its own.
		grpc.NumStreamWorkers(streamWorkers()),
	}
	// Zero leaves gRPC's default, which for these is no bound (or 4 MB).
	if l.MaxConcurrentStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(l.MaxConcurrentStreams))
	}
	if l.MaxRecvMsgSize > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(l.MaxRecvMsgSize))
	}
	if l.MaxHeaderBytes > 0 {
		opts = append(opts, grpc.MaxHeaderListSize(uint32(l.MaxHeaderBytes)))
	}
	if l.ConnectionTimeout > 0 {
		opts = append(opts, grpc.ConnectionTimeout(l.ConnectionTimeout))
	}
	return opts
}

// streamWorkers is the gRPC server's worker count: enough for a burst
// of streams read from a connection to find workers idle, while calls
// waiting on Redis overflow to goroutines of their own. An idle worker
// costs its stack only.
func streamWorkers() uint32 { return uint32(32 * runtime.GOMAXPROCS(0)) }

// GRPCAddr and HTTPAddr are the addresses the listeners got.
func (s *Server) GRPCAddr() string { return s.gln.Addr().String() }

// HTTPAddr is the address of the HTTP listener.
func (s *Server) HTTPAddr() string { return s.hln.Addr().String() }

// MetricsAddr is the address of the metrics listener, "" without one.
func (s *Server) MetricsAddr() string {
	if s.mln == nil {
		return ""
	}
	return s.mln.Addr().String()
}

// Err delivers a listener's failure.
func (s *Server) Err() <-chan error { return s.errc }

// Shutdown stops accepting, lets calls in flight finish (until ctx ends,
// then cuts them), stops the refresh loop and closes the Limiters, which
// writes the usage counts left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	herr := s.http.Shutdown(ctx)
	if s.metrics != nil {
		_ = s.metrics.Close() // a scrape is not worth waiting for
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		s.grpc.Stop()
		<-stopped
	}
	s.cancel()
	<-s.done
	if errors.Is(herr, context.DeadlineExceeded) || errors.Is(herr, context.Canceled) {
		_ = s.http.Close()
		herr = nil
	}
	return errors.Join(herr, s.pool.Close())
}

// ReadyState is the body of /readyz.
type ReadyState struct {
	Ready bool   `json:"ready"`
	Redis string `json:"redis"`
	// Revision is the decision revision loaded; RefreshFailing says the
	// last read of a newer one failed (decisions go on with the loaded
	// one; the error is in the log, not here: /readyz answers anyone).
	Revision       int64 `json:"revision"`
	RefreshFailing bool  `json:"refresh_failing,omitempty"`
}

// readiness: ready when the config is loaded and Redis answers. MySQL
// does not decide it: decisions need no MySQL once loaded.
func (s *Server) readiness(ctx context.Context, rdb redis.UniversalClient) ReadyState {
	loaded, rev, lastErr := s.Service.Loaded()
	st := ReadyState{Ready: loaded, Redis: "ok", Revision: rev, RefreshFailing: lastErr != ""}
	if err := rdb.Ping(ctx).Err(); err != nil {
		st.Ready, st.Redis = false, "unreachable"
	}
	return st
}
