package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	cases := []struct {
		name string
		rdb  redis.UniversalClient
		app  string
		opts []client.Option
	}{
		{"nil client", nil, "svc", nil},
		{"bad app", rdb, "Bad App", nil},
		{"empty app", rdb, "", nil},
		{"policy", rdb, "svc", []client.Option{client.WithFailurePolicy(client.FailurePolicy(9))}},
		{"instances", rdb, "svc", []client.Option{client.WithInstances(0)}},
		{"timeout", rdb, "svc", []client.Option{client.WithTimeout(0)}},
		{"probe", rdb, "svc", []client.Option{client.WithProbeInterval(-time.Second)}},
	}
	for _, c := range cases {
		if l, err := client.New(c.rdb, c.app, c.opts...); err == nil {
			l.Close()
			t.Errorf("%s: New accepted it", c.name)
		}
	}
}

func TestAcquire(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "orders", 10, 1_000_000, 3600, "svc", "abc") // 1 per hour: no refill during the test
	l := e.limiter(t, "svc")
	ab := e.limiter(t, "ab")
	ctx := context.Background()

	res, err := l.Acquire(ctx, "orders", 4)
	if err != nil || !res.Allowed || res.Remaining != 6 || res.Limit != 10 || res.Fallback || res.RetryAfter != 0 {
		t.Fatalf("allowed: %+v %v", res, err)
	}
	if res.ResetAfter < 4*time.Hour-time.Minute || res.ResetAfter > 4*time.Hour {
		t.Errorf("reset after %v, want about 4h", res.ResetAfter)
	}
	res, err = l.Acquire(ctx, "orders", 7)
	if err != nil || res.Allowed || res.Remaining != 6 || res.RetryAfter < 59*time.Minute || res.RetryAfter > time.Hour {
		t.Fatalf("denied: %+v %v", res, err)
	}
	for _, c := range []struct {
		l      *client.Limiter
		bucket string
		n      int64
		want   error
	}{
		{l, "nope", 1, client.ErrUnknownBucket},
		{l, "Not A Name", 1, client.ErrUnknownBucket},
		{l, "", 1, client.ErrUnknownBucket},
		{ab, "orders", 1, client.ErrAppNotAllowed},
		{l, "orders", 11, client.ErrExceedsCapacity},
		{l, "orders", 0, client.ErrInvalidN},
		{l, "orders", -1, client.ErrInvalidN},
		{l, "orders", 1_000_000_001, client.ErrInvalidN},
	} {
		res, err := c.l.Acquire(ctx, c.bucket, c.n)
		if !errors.Is(err, c.want) || res.Allowed || res.Fallback {
			t.Errorf("Acquire(%q, %d) = %+v, %v; want %v", c.bucket, c.n, res, err, c.want)
		}
	}
	if !l.Allow(ctx, "orders") || l.Allow(ctx, "nope") {
		t.Error("Allow")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Acquire(cancelled, "orders", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	l.Close()
	if _, err := l.Acquire(ctx, "orders", 1); !errors.Is(err, client.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestAcquireConcurrent shows batching never over-admits: 100 goroutines
// race for 1000 tokens and get exactly 1000.
func TestAcquireConcurrent(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "race", 1000, 1, 86400, "svc") // a millionth of a permit per day
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			for range 30 {
				res, err := l.Acquire(context.Background(), "race", 1)
				switch {
				case err != nil:
					t.Error(err)
					return
				case res.Allowed:
					allowed.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 1000 || denied.Load() != 2000 {
		t.Fatalf("allowed %d, denied %d; want 1000 and 2000", allowed.Load(), denied.Load())
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "w", 1, 10_000_000, 1, "svc") // 10 per second, capacity 1
	var calls atomic.Int64
	l := e.limiter(t, "svc", client.WithObserver(func(client.Decision) { calls.Add(1) }))
	ctx := context.Background()
	// Each token exists 100 ms after the one before, the first of which
	// was taken after start: a stalled test only waits longer.
	start := time.Now()
	if !l.Allow(ctx, "w") {
		t.Fatal("first token")
	}
	for range 3 {
		if err := l.Wait(ctx, "w", 1); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 280*time.Millisecond {
		t.Errorf("three tokens at 10/s came in %v", d)
	}
	// Sleeping on RetryAfter, not spinning: a handful of calls per token.
	if n := calls.Load(); n > 1+3*4 {
		t.Errorf("%d acquire calls for 3 waits", n)
	}

	// The deadline case uses a bucket that cannot refill during the test:
	// at 10/s a stall of 100 ms would make the token due in time again.
	e.define(t, "slow", 1, 1, 86400, "svc")
	l.Allow(ctx, "slow")
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.Wait(short, "slow", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait past the deadline: %v", err)
	}
	if err := l.Wait(ctx, "nope", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("wait on unknown bucket: %v", err)
	}
	if err := l.Wait(ctx, "w", 2); !errors.Is(err, client.ErrExceedsCapacity) {
		t.Errorf("wait for more than capacity: %v", err)
	}
	cancelled, cancel2 := context.WithCancel(ctx)
	go func() { time.Sleep(30 * time.Millisecond); cancel2() }()
	if err := l.Wait(cancelled, "slow", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
}

func TestObserver(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "obs", 5, 1_000_000, 1, "svc")
	var mu sync.Mutex
	var got []client.Decision
	l := e.limiter(t, "svc", client.WithObserver(func(d client.Decision) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}))
	l.Acquire(context.Background(), "obs", 2)
	l.Acquire(context.Background(), "nope", 1)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Bucket != "obs" || got[0].N != 2 || !got[0].Result.Allowed || got[0].Latency <= 0 ||
		!errors.Is(got[1].Err, client.ErrUnknownBucket) {
		t.Fatalf("decisions: %+v", got)
	}
}

// TestNoscriptResend flushes the script cache, as a restart or failover
// does: acquires must reload it and succeed, none failing or falling back.
// The client may not load functions, so that acquires run as scripts
// (TestFunctionFlushedFallsBack flushes the function).
func TestNoscriptResend(t *testing.T) {
	t.Parallel()
	e := noFunctions(t)
	e.define(t, "ns", 1_000_000, 1_000_000, 1, "svc")
	var logs bytes.Buffer
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(2*time.Second),
		client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := context.Background()
	for round := range 3 {
		if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				res, err := l.Acquire(ctx, "ns", 1)
				if err != nil || !res.Allowed || res.Fallback {
					t.Errorf("round %d: %+v %v", round, res, err)
				}
			})
		}
		wg.Wait()
	}
	if ok, err := e.rdb.ScriptExists(ctx, redisscript.AcquireScript.SHA()).Result(); err != nil || !ok[0] {
		t.Errorf("script not cached after reload: %v %v", ok, err)
	}
	if logs.Len() > 0 {
		t.Errorf("breaker opened: %s", logs.String())
	}
}

// TestNoRetryOfSentAcquire cuts the connection right after Redis ran an
// acquire, before the reply arrives. go-redis retries such failures by
// default; the acquire must not be sent again (the tokens would be taken
// twice). The policy answers instead.
func TestNoRetryOfSentAcquire(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "once", 10, 1, 86400, "svc")
	if err := e.rdb.ScriptLoad(context.Background(), redisscript.AcquireScript.Source()).Err(); err != nil {
		t.Fatal(err) // so that the first EVALSHA runs instead of answering NOSCRIPT
	}
	proxy := newCuttingProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr}) // default MaxRetries: 3
	defer rdb.Close()
	l, err := client.New(rdb, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(2*time.Second),
		client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	res, err := l.Acquire(context.Background(), "once", 1)
	if !errors.Is(err, client.ErrUnavailable) || !res.Fallback {
		t.Fatalf("cut acquire: %+v %v", res, err)
	}
	if proxy.cut.Load() != 1 {
		t.Fatalf("proxy cut %d connections", proxy.cut.Load())
	}
	st, err := redisscript.Read(context.Background(), e.rdb, e.ks(), "once")
	if err != nil {
		t.Fatal(err)
	}
	if st.Stored != 9 {
		t.Fatalf("tokens = %v, want 9: the acquire ran %v times", st.Stored, 10-st.Stored)
	}
}

// cuttingProxy forwards to a Redis server but closes the first connection
// that sends an acquire (EVALSHA or FCALL) once the command is through and
// before the reply.
type cuttingProxy struct {
	addr string
	cut  atomic.Int32
}

func newCuttingProxy(t *testing.T, target string) *cuttingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &cuttingProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	return p
}

func (p *cuttingProxy) serve(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{})
	go func() {
		// Replies: held back while a cut is pending.
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				select {
				case <-done:
					return
				default:
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			cutNow := acquires(buf[:n]) > 0 && p.cut.CompareAndSwap(0, 1)
			if cutNow {
				close(done)
			}
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
			if cutNow {
				time.Sleep(50 * time.Millisecond) // let Redis run it
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

// TestErrorReplyKeepsBreakerClosed: an error reply about one call (here a
// bucket key holding a string) is answered by the policy, but the breaker
// stays closed and other buckets are still served by Redis.
func TestErrorReplyKeepsBreakerClosed(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "good", 100, 1_000_000, 1, "svc")
	if err := e.rdb.Set(context.Background(), e.ks().Bucket("broken"), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed),
		client.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	ctx := context.Background()
	for range 3 {
		if res, err := l.Acquire(ctx, "broken", 1); !errors.Is(err, client.ErrUnavailable) || !res.Fallback {
			t.Fatalf("broken bucket: %+v %v", res, err)
		}
		if res, err := l.Acquire(ctx, "good", 1); err != nil || !res.Allowed || res.Fallback {
			t.Fatalf("good bucket after a broken one: %+v %v", res, err)
		}
	}
	if logs.String() != "" {
		t.Errorf("breaker opened: %s", logs.String())
	}
}

// TestQueuedCallsDroppedAfterTimeout stalls Redis while calls queue behind
// the two stuck round trips (a pool of two connections: one round trip in
// flight per connection). The queued calls' callers give up (their
// contexts end); when a sender is free again those calls must not be sent
// (nobody waits for their tokens). Only the two calls already written are
// run. (The breaker stays closed here: it opens only when Redis keeps
// failing calls for a while.)
func TestQueuedCallsDroppedAfterTimeout(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "stall", 1000, 1, 86400, "svc")
	ctx := context.Background()
	if err := e.rdb.ScriptLoad(ctx, redisscript.AcquireScript.Source()).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := newHoldingProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr, ReadTimeout: 10 * time.Second, PoolSize: 2})
	defer rdb.Close()
	// The second stuck call must reach the proxy before the first one
	// times out (the breaker would answer it): the timeout leaves room
	// for a stalled goroutine.
	l, err := client.New(rdb, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(time.Second),
		client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if res, err := l.Acquire(ctx, "stall", 1); err != nil || !res.Allowed {
		t.Fatal(res, err)
	}
	proxy.hold()
	var wg sync.WaitGroup
	fire := func(n int) {
		for range n {
			wg.Go(func() {
				if res, err := l.Acquire(ctx, "stall", 1); !errors.Is(err, client.ErrUnavailable) || !res.Fallback {
					t.Errorf("stalled call: %+v %v", res, err)
				}
			})
		}
	}
	giveUp := func(n int) {
		for range n {
			wg.Go(func() {
				short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				if res, err := l.Acquire(short, "stall", 1); !errors.Is(err, context.DeadlineExceeded) || res.Allowed {
					t.Errorf("queued call: %+v %v", res, err)
				}
			})
		}
	}
	waitSeen := func(n int) {
		eventually(10*time.Second, func() bool { return proxy.seen() >= n })
		if proxy.seen() != n {
			t.Fatalf("proxy saw %d acquires, want %d", proxy.seen(), n)
		}
	}
	fire(1)
	waitSeen(2) // the first acquire above, and this one
	fire(1)
	waitSeen(3)
	giveUp(98) // both round trips are stuck: these queue, and their callers give up
	wg.Wait()
	proxy.release()
	// Wait for the two calls that were written to run, then give queued
	// calls, were any wrongly kept, the time to be sent as well.
	stored := func() int {
		st, err := redisscript.Read(ctx, e.rdb, e.ks(), "stall")
		if err != nil {
			t.Fatal(err)
		}
		return int(st.Stored)
	}
	eventually(10*time.Second, func() bool { return stored() <= 997 })
	time.Sleep(300 * time.Millisecond)
	if st := stored(); st != 997 || proxy.seen() != 3 {
		t.Fatalf("tokens %v (want 997), acquires sent %d (want 3): queued calls were sent after they timed out",
			st, proxy.seen())
	}
}

// holdingProxy forwards to a Redis server; while held, it keeps what the
// client sends with an acquire (EVALSHA or FCALL) in it until release. It
// counts the acquires it received.
type holdingProxy struct {
	addr  string
	mu    sync.Mutex
	held  bool
	cond  *sync.Cond
	calls int
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{addr: ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { ln.Close(); p.release() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				return
			}
			go func() { io.Copy(c, s); c.Close() }()
			go func() {
				defer s.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						k := acquires(buf[:n])
						p.mu.Lock()
						p.calls += k
						for p.held && k > 0 { // connection handshakes pass
							p.cond.Wait()
						}
						p.mu.Unlock()
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *holdingProxy) hold() { p.mu.Lock(); p.held = true; p.mu.Unlock() }

func (p *holdingProxy) release() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *holdingProxy) seen() int { p.mu.Lock(); defer p.mu.Unlock(); return p.calls }

// acquires counts the script and function calls (EVALSHA, FCALL) in what
// a client sent.
func acquires(sent []byte) int {
	s := strings.ToLower(string(sent))
	return strings.Count(s, "evalsha") + strings.Count(s, "fcall")
}
