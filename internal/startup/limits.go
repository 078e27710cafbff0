package startup

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/settings"
)

// Limits bound what one listener may hold: how many connections, for how
// long, and how much a request may send. Every listener of every binary
// takes its values from here, so a slow or idle client costs at most a
// bounded share of the process. The gRPC fields are read by the decision
// service, the only gRPC server.
type Limits struct {
	// MaxConns caps the open connections of the listener. At the cap, a
	// new connection replaces the one that has gone longest without
	// sending a byte (see LimitListener); 0 means no cap.
	MaxConns int

	// HTTP: ReadHeaderTimeout and ReadTimeout bound reading a request's
	// headers and the whole request, WriteTimeout writing its answer,
	// IdleTimeout a kept-alive connection between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	// MaxBodyBytes caps every request body; 0 leaves it to the handlers.
	MaxBodyBytes int64

	// gRPC: MaxConcurrentStreams per connection; a connection is closed
	// after MaxConnectionIdle without calls and, gracefully (calls in
	// flight get MaxConnectionAgeGrace), after MaxConnectionAge.
	MaxConcurrentStreams                                       uint32
	MaxConnectionIdle, MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// KeepaliveTime is how long a connection may be silent before the
	// server pings it, KeepaliveTimeout how long the ping's answer may
	// take; KeepaliveMinTime is the shortest interval between the
	// client's pings the server accepts (pinging faster closes the
	// connection).
	KeepaliveTime, KeepaliveTimeout, KeepaliveMinTime time.Duration
	// ConnectionTimeout bounds a new connection's handshakes (TLS and
	// HTTP/2 preface).
	ConnectionTimeout time.Duration
	MaxRecvMsgSize    int
}

// DecisionLimits are the decision service's: many gateways and services
// keep connections open to it, each request is small and quick.
func DecisionLimits() Limits {
	return Limits{
		MaxConns:          4096,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 15 * time.Second, IdleTimeout: 90 * time.Second,
		MaxHeaderBytes: 64 << 10, MaxBodyBytes: 64 << 10,
		MaxConcurrentStreams: 1024,
		MaxConnectionIdle:    15 * time.Minute, MaxConnectionAge: time.Hour, MaxConnectionAgeGrace: time.Minute,
		KeepaliveTime: time.Minute, KeepaliveTimeout: 20 * time.Second, KeepaliveMinTime: 10 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		MaxRecvMsgSize:    256 << 10,
	}
}

// ConsoleLimits are the console's and the JSON API's: fewer callers,
// slower pages.
func ConsoleLimits() Limits {
	return Limits{
		MaxConns:          1024,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, MaxBodyBytes: 1 << 20,
	}
}

// ProbeLimits are those of the listeners that serve only /healthz, /readyz
// and /metrics: a few pollers.
func ProbeLimits() Limits {
	return Limits{
		MaxConns:          256,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 16 << 10, MaxBodyBytes: 4 << 10,
	}
}

// BindMaxConns binds -max-conns (SLUICE_MAX_CONNS) to l.MaxConns.
func (l *Limits) BindMaxConns(s *settings.Set) {
	s.Int(&l.MaxConns, "max-conns", "SLUICE_MAX_CONNS",
		"open connections each listener keeps; at the cap a new one replaces the one silent the longest (0: no cap)")
}

// HTTPServer is an http.Server serving h within l; its own errors (TLS
// handshakes, accept failures) go to log at warn level.
func (l Limits) HTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	if l.MaxBodyBytes > 0 {
		h = http.MaxBytesHandler(h, l.MaxBodyBytes)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return srv
}

// Listen listens on the TCP address addr with l's connection cap.
func (l Limits) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if l.MaxConns <= 0 {
		return ln, nil
	}
	return NewLimitListener(ln, l.MaxConns), nil
}

// LimitListener keeps at most max connections of the listener open. At the
// cap it still accepts, and closes instead the connection that has gone
// longest without sending a byte: a client holding connections open
// without using them (idle, or trickling a request) loses them first, while
// health probes, new callers and callers in use keep being answered. Not
// accepting at the cap (golang.org/x/net/netutil's way) would leave
// every new connection, the probe's too, waiting behind the idle ones.
//
// A connection's activity is its last read: an answer in progress does not
// count, so a caller silent for the time the server takes to accept max
// newer connections may lose its connection (and reconnect).
type LimitListener struct {
	net.Listener
	max     int
	epoch   time.Time
	mu      sync.Mutex
	conns   map[*limitConn]struct{}
	evicted atomic.Int64
}

// NewLimitListener caps ln at max open connections.
func NewLimitListener(ln net.Listener, max int) *LimitListener {
	return &LimitListener{Listener: ln, max: max, epoch: time.Now(), conns: make(map[*limitConn]struct{}, max)}
}

// Accept waits for a connection and, at the cap, closes the one silent
// the longest.
func (l *LimitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l}
	lc.touch()
	var victim *limitConn
	l.mu.Lock()
	if len(l.conns) >= l.max {
		oldest := int64(0)
		for o := range l.conns {
			if at := o.last.Load(); victim == nil || at < oldest {
				victim, oldest = o, at
			}
		}
		delete(l.conns, victim)
	}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		_ = victim.Close()
	}
	return lc, nil
}

// Open is the number of connections open now.
func (l *LimitListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Evicted is the number of connections closed to make room.
func (l *LimitListener) Evicted() int64 { return l.evicted.Load() }

type limitConn struct {
	net.Conn
	l     *LimitListener
	last  atomic.Int64 // ns since l.epoch of the last read that got bytes
	close sync.Once
}

func (c *limitConn) touch() { c.last.Store(int64(time.Since(c.l.epoch))) }

func (c *limitConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *limitConn) Close() error {
	err := net.ErrClosed
	c.close.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}
