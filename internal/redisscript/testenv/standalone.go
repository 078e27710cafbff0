package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Standalone is a private redis-server for code that has no testing.TB,
// such as a package's examples. It listens on a unix socket in a new
// temporary directory only, so there is no port to race a concurrent test
// suite for, and it holds nothing but what its user writes, so examples
// may use the default key prefix.
type Standalone struct {
	dir  string
	sock string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartStandalone starts a Standalone server and waits until it answers
// PING. An example cannot be skipped, so a missing redis-server is an
// error here rather than a skip.
func StartStandalone() (*Standalone, error) {
	path, ok := lookPath("redis-server")
	if !ok {
		return nil, fmt.Errorf("redis-server is not installed; `make test` needs it too")
	}
	dir, err := os.MkdirTemp("", "sluice-redis-")
	if err != nil {
		return nil, err
	}
	s := &Standalone{dir: dir, sock: filepath.Join(dir, "redis.sock"), done: make(chan struct{})}
	s.cmd = exec.Command(path, "--port", "0", "--unixsocket", s.sock, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	rdb := redis.NewClient(s.Options())
	defer rdb.Close()
	if !WaitFor(10*time.Second, func() bool { return rdb.Ping(context.Background()).Err() == nil }) {
		s.Stop()
		return nil, fmt.Errorf("redis-server on %s did not answer PING", s.sock)
	}
	return s, nil
}

// Options returns client options that reach s.
func (s *Standalone) Options() *redis.Options {
	return &redis.Options{Network: "unix", Addr: s.sock}
}

// Stop ends the server (SIGTERM, SIGKILL after 5 s) and removes its
// directory. Clients of it get connection errors from then on, as from a
// Redis that went away.
func (s *Standalone) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}
