package client

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// Close waits for the function load New started: against a paused Redis
// the load is still waiting for its answer when Close is called, and has
// ended (given up, for good) when Close returns; no load starts after.
func TestCloseAwaitsFunctionLoad(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	srv.Pause()
	defer srv.Resume()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	l, err := New(rdb, "svc", WithTimeout(300*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	// The load's connection is made (the kernel accepts it for the paused
	// server): the load now waits for its answer.
	deadline := time.Now().Add(10 * time.Second)
	for rdb.PoolStats().TotalConns == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	l.Close()
	if s := l.fn.state.Load(); s != fnOff {
		t.Fatalf("function state %d after Close, want %d (off): the load outlived Close", s, fnOff)
	}
	l.fn.state.Store(fnOn)
	l.functionMissing()
	l.fn.mu.Lock()
	closed := l.fn.closed
	l.fn.mu.Unlock()
	if !closed {
		t.Fatal("loads not stopped")
	}
}
