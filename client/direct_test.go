package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
)

// A lone call sends its script itself, on a connection from the pool. When
// the pool has no connection to give it, the Limiter's timeout must still
// bound the call, not go-redis's PoolTimeout.
func TestLoneCallBoundedWhenPoolExhausted(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "pool", 100, 1_000_000, 1, "svc")
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, PoolTimeout: 10 * time.Second})
	defer rdb.Close()
	hog := rdb.Conn() // takes the only connection of the pool
	defer hog.Close()
	if err := hog.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := client.New(rdb, "svc", client.WithFailurePolicy(client.FailClosed),
		client.WithTimeout(100*time.Millisecond), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	res, err := l.Acquire(ctx, "pool", 1)
	took := time.Since(start)
	if !errors.Is(err, client.ErrUnavailable) || !res.Fallback {
		t.Fatalf("acquire with no free connection: %+v %v, want the policy's ErrUnavailable", res, err)
	}
	// Far above the timeout, for a loaded machine, and far below the pool's.
	if took > 5*time.Second {
		t.Fatalf("acquire took %v with a 100ms timeout: it waited for the pool", took)
	}
}

// A lone caller takes its connection from the pool, whose health check
// notices a connection the server closed meanwhile instead of failing a
// call.
func TestLoneCallAfterServerClosedIdleConnection(t *testing.T) {
	t.Parallel()
	e, _ := privateRedis(t)
	e.define(t, "idle", 100, 1_000_000, 1, "svc")
	ctx := context.Background()
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), quiet())
	if res, err := l.Acquire(ctx, "idle", 1); err != nil || res.Fallback {
		t.Fatalf("first acquire: %+v %v", res, err)
	}
	time.Sleep(400 * time.Millisecond)
	// Close every connection but the one sending this command.
	if err := e.rdb.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := l.Acquire(ctx, "idle", 1)
	if err != nil || res.Fallback || !res.Allowed {
		t.Fatalf("acquire after the server closed idle connections: %+v %v, want an answer from Redis", res, err)
	}
}

// Calls after Close fail with ErrClosed, whichever path they would take.
func TestAcquireAfterClose(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "closed", 100, 1_000_000, 1, "svc")
	l := e.limiter(t, "svc", quiet())
	if _, err := l.Acquire(context.Background(), "closed", 1); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if res, err := l.Acquire(context.Background(), "closed", 1); !errors.Is(err, client.ErrClosed) || res.Allowed {
		t.Fatalf("acquire after Close: %+v %v, want ErrClosed", res, err)
	}
}
