package testenv

import (
	"context"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FreePort returns a loopback TCP port that was free a moment ago and that
// this process has not handed out before. It picks from 20000-32767, below
// the kernel's ephemeral range, so a client connection of a busy test cannot
// take the port between this call and the server's bind. A random pick
// keeps concurrent test binaries apart, and a lock on the port that every
// test process respects (reservePort) keeps a suite running beside this one
// from handing it out too.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 20000 + mathrand.IntN(12768)
		if portsGiven[p] || !reservePort(p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatalf("find free port: none free in 20000-32767")
	return 0
}

// ClosedAddr is a loopback address nothing listens on: port 1, which no
// server here uses and no test may bind. A port that was merely free a
// moment ago can be taken by a concurrent test suite before it is dialed.
const ClosedAddr = "127.0.0.1:1"

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Process is a server process a test started and owns. It can be paused,
// killed and started again on the same port and data directory.
type Process struct {
	t    testing.TB
	name string
	path string
	args []string
	dir  string
	log  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// NewProcess returns a process that runs path with args in dir, logging to
// dir/name.log, not yet started; it is stopped when t ends.
func NewProcess(t testing.TB, name, path, dir string, args []string) *Process {
	p := &Process{t: t, name: name, path: path, args: args, dir: dir, log: filepath.Join(dir, name+".log")}
	t.Cleanup(p.Stop)
	return p
}

// Start starts the process (again).
func (p *Process) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("open %s log: %v", p.name, err)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = p.dir
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	logf.Close()
	p.cmd = cmd
	go func() { _ = cmd.Wait() }()
}

// PID returns the process id of the running process, or 0.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers nothing.
func (p *Process) Pause() { p.signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (p *Process) Resume() { p.signal(syscall.SIGCONT) }

// take hands over the running command, once: later calls get nil.
func (p *Process) take() *exec.Cmd {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := p.cmd
	p.cmd = nil
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	return cmd
}

// Kill ends the process with SIGKILL and waits until it is gone.
func (p *Process) Kill() {
	cmd := p.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	WaitFor(10*time.Second, func() bool { return cmd.Process.Signal(syscall.Signal(0)) != nil })
}

// Stop ends the process with SIGTERM, then SIGKILL after 5 s.
func (p *Process) Stop() {
	cmd := p.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if !WaitFor(5*time.Second, func() bool { return cmd.Process.Signal(syscall.Signal(0)) != nil }) {
		_ = cmd.Process.Kill()
	}
}

// Log returns what the process printed so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// RedisServer is a private redis-server on a loopback port, without persistence.
type RedisServer struct {
	*Process
	Addr string
	Port int
}

// StartRedis starts a private redis-server with extra configuration
// arguments ("--cluster-enabled", "yes", ...), waits until it answers and
// stops it when t ends.
func StartRedis(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	path := LookPath(t, "redis-server")
	port := FreePort(t)
	dir := t.TempDir()
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "no",
	}, extra...)
	s := &RedisServer{Process: NewProcess(t, "redis-"+strconv.Itoa(port), path, dir, args), Port: port,
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.Start()
	return s
}

// Start starts the server (again) and waits until it answers PING.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.Process.Start()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	if !WaitFor(10*time.Second, func() bool { return rdb.Ping(context.Background()).Err() == nil }) {
		s.t.Fatalf("redis-server %s did not start: %s", s.Addr, s.Log())
	}
}
