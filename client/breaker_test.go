package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// The breaker's rule on a clock the test controls.
func TestBreakerRule(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	now := func(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

	b := &breaker{minFailures: 3, span: ms(100)}
	// A stalled process: many calls fail at one instant. No suspicion.
	for range 50 {
		if b.failure(ms(950), ms(1000)) {
			t.Fatal("a burst of failures at one instant made the breaker suspect")
		}
	}
	if _, ok := b.fallbackSince(); !ok {
		t.Fatal("failing calls are time in fallback")
	}
	b.success(now(ms(1010)))
	if _, ok := b.fallbackSince(); ok || b.suspect() {
		t.Fatal("an answer ends the streak")
	}
	if n, d := b.stats(ms(2000)); n != 0 || d != ms(60) {
		t.Fatalf("stats: %d openings, %v in fallback; want 0 and 60ms (sent at 950, answered at 1010)", n, d)
	}

	// Failures over 100 ms but only two of them: no suspicion.
	b.failure(ms(1950), ms(2000))
	if b.failure(ms(2050), ms(2100)) {
		t.Fatal("two failures made the breaker suspect")
	}
	// The third, 100 ms after the first: suspect.
	if !b.failure(ms(2050), ms(2100)) || !b.suspect() {
		t.Fatal("three failures over 100 ms did not make the breaker suspect")
	}
	if b.failure(ms(2100), ms(2150)) {
		t.Fatal("suspect twice")
	}
	// The confirming probe got an answer: closed, no opening.
	if b.confirm(true, ms(2200)) || b.suspect() {
		t.Fatal("an answering probe opened the breaker")
	}
	if n, _ := b.stats(ms(2200)); n != 0 {
		t.Fatalf("%d openings", n)
	}

	// A real outage: failures keep coming, the probe fails too.
	b.failure(ms(2950), ms(3000))
	b.failure(ms(3000), ms(3050))
	if !b.failure(ms(3050), ms(3100)) || !b.confirm(false, ms(3300)) {
		t.Fatal("a silent Redis did not open the breaker")
	}
	since, ok := b.fallbackSince()
	if !ok || since != ms(2950) {
		t.Fatalf("fallback since %v %v, want 2.95s", since, ok)
	}
	// A late answer of a call sent before does not close it; the probe does.
	b.success(now(ms(3400)))
	if _, ok := b.fallbackSince(); !ok {
		t.Fatal("a late answer closed the open breaker")
	}
	b.recover(ms(3950))
	if _, ok := b.fallbackSince(); ok || b.suspect() {
		t.Fatal("recover left the breaker open")
	}
	if n, d := b.stats(ms(5000)); n != 1 || d != ms(60)+ms(250)+ms(1000) {
		t.Fatalf("stats: %d openings, %v in fallback; want 1 and 1.31s", n, d)
	}
	// Streak time counts while it runs.
	b.failure(ms(4950), ms(5000))
	if _, d := b.stats(ms(5100)); d != ms(1310)+ms(150) {
		t.Fatalf("running streak: %v in fallback", d)
	}
}

// Wait's queue hands the turn over in arrival order, also when a waiter
// in the middle or at the head gives up.
func TestWaitQueueOrder(t *testing.T) {
	var q waitQueue
	ws := []*waiter{q.join(), q.join(), q.join(), q.join()}
	isTurn := func(w *waiter) bool {
		select {
		case <-w.turn:
			return true
		default:
			return false
		}
	}
	if !isTurn(ws[0]) || isTurn(ws[1]) || isTurn(ws[2]) {
		t.Fatal("only the first has its turn")
	}
	q.leave(ws[2]) // gives up in the middle
	if isTurn(ws[1]) || isTurn(ws[3]) {
		t.Fatal("a waiter in the middle leaving gave someone the turn")
	}
	q.leave(ws[0])
	if !isTurn(ws[1]) || isTurn(ws[3]) {
		t.Fatal("the turn did not pass to the second")
	}
	q.leave(ws[1])
	if !isTurn(ws[3]) {
		t.Fatal("the turn did not pass to the last")
	}
	q.leave(ws[3])
	if w := q.join(); !isTurn(w) {
		t.Fatal("a waiter on an empty queue waits")
	}
}

// Wait's sleep never passes halfway between the tokens and the deadline,
// whatever the jitter: the retry then still has time to get them.
func TestWaitStep(t *testing.T) {
	most := func(n int64) int64 { return n - 1 } // the largest jitter rand can give
	for _, c := range []struct {
		retry, left time.Duration
		deadline    bool
		want        time.Duration
		ok          bool
	}{
		{200 * time.Millisecond, 210 * time.Millisecond, true, 205 * time.Millisecond, true},
		{200 * time.Millisecond, 200 * time.Millisecond, true, 200 * time.Millisecond, true},
		{200 * time.Millisecond, 219 * time.Millisecond, true, 209*time.Millisecond + 500*time.Microsecond, true},
		{200 * time.Millisecond, 199 * time.Millisecond, true, 0, false},
		{200 * time.Millisecond, time.Hour, true, 221 * time.Millisecond, true},
		{200 * time.Millisecond, 0, false, 221 * time.Millisecond, true},
		{0, 0, false, 111 * time.Millisecond, true}, // no retry-after: the probe interval
		{time.Hour, 0, false, maxWaitStep, true},
	} {
		got, ok := waitStep(c.retry, 100*time.Millisecond, c.left, c.deadline, most)
		if got != c.want || ok != c.ok {
			t.Errorf("waitStep(%v, left %v, %v) = %v %v; want %v %v", c.retry, c.left, c.deadline, got, ok, c.want, c.ok)
		}
	}
}

// WithBreaker sets the breaker's rule, and New refuses one that could
// never or always open.
func TestWithBreaker(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	l, err := New(rdb, "svc", WithBreaker(5, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.brk.minFailures != 5 || l.brk.span != 2*time.Second {
		t.Fatalf("breaker %d failures over %v; want 5 over 2s", l.brk.minFailures, l.brk.span)
	}
	for _, o := range []Option{WithBreaker(0, time.Second), WithBreaker(1, -time.Second)} {
		if l, err := New(rdb, "svc", o); err == nil {
			l.Close()
			t.Error("New accepted a breaker with no failures or a negative span")
		}
	}
}

// TestErrorReplyIsAnAnswer: an error reply (here WRONGTYPE, a key of
// another type at the bucket's key) means Redis answered: acquire and
// acquireKey alike end a streak of failures (settle is their one rule).
func TestErrorReplyIsAnAnswer(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	kk := ks.Keyed("wrongk", "alice")
	if err := rdb.Set(ctx, ks.Bucket("wrong"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, kk.Config, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := New(rdb, "svc", WithKeyPrefix(prefix), WithTimeout(5*time.Second), WithFailurePolicy(FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for name, call := range map[string]func() error{
		"acquire":     func() error { _, err := l.Acquire(ctx, "wrong", 1); return err },
		"acquire key": func() error { _, err := l.AcquireKey(ctx, "wrongk", "alice", 1); return err },
		"acquire all": func() error { _, err := l.AcquireAll(ctx, []Request{{Bucket: "wrong", N: 1}}); return err },
	} {
		now := l.now()
		l.brk.failure(now-l.opt.timeout, now)
		if l.brk.streak.Load() == 0 {
			t.Fatalf("%s: no streak to end", name)
		}
		if err := call(); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: %v, want the policy's answer to an error reply", name, err)
		}
		if s := l.brk.streak.Load(); s != 0 {
			t.Errorf("%s: an error reply left a streak of %d failures; it is an answer of Redis", name, s)
		}
	}
}
