package startup_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/startup"
)

// At the cap, a new connection closes the one silent the longest, and a
// connection that sent a byte since is kept.
func TestLimitListenerClosesTheLongestSilent(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := startup.NewLimitListener(raw, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() (client, server net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, <-accepted
	}
	c1, s1 := dial()
	c2, s2 := dial()
	// c1 speaks after c2 connected: c2 is now the one silent longest.
	if _, err := c1.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s1, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	_, s3 := dial()
	if n := ln.Open(); n != 2 {
		t.Fatalf("%d connections open, want the cap, 2", n)
	}
	if ln.Evicted() != 1 {
		t.Fatalf("evicted %d, want 1", ln.Evicted())
	}
	// c2's server end was closed: c2 reads EOF (or a reset).
	_ = c2.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("the silent connection is still open")
	}
	if err := s2.Close(); err != net.ErrClosed {
		t.Fatalf("closing the evicted connection again = %v, want net.ErrClosed", err)
	}
	// c1 still works.
	if _, err := c1.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s1, make([]byte, 1)); err != nil {
		t.Fatalf("the active connection was closed: %v", err)
	}
	s3.Close()
	if n := ln.Open(); n != 1 {
		t.Fatalf("%d connections open after one closed, want 1", n)
	}
}

// HTTPServer caps bodies: a handler reading more gets an error.
func TestHTTPServerCapsBodies(t *testing.T) {
	l := startup.ProbeLimits()
	l.MaxBodyBytes = 10
	srv := l.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		}
	}), nil)
	ln, err := l.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	for body, want := range map[string]int{"short": 200, strings.Repeat("x", 100): 413} {
		resp, err := http.Post("http://"+ln.Addr().String()+"/", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = bufio.NewReader(resp.Body).WriteTo(io.Discard)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("body of %d bytes: %d, want %d", len(body), resp.StatusCode, want)
		}
	}
	if srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 || srv.ReadHeaderTimeout == 0 {
		t.Errorf("server without timeouts: %+v", srv)
	}
}
