package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Concurrent acquires share round trips: callers append their call to a
// queue, and a few sender goroutines each take everything queued and send
// it as one pipeline. While a pipeline is in flight the next one fills up,
// so batching adds no delay to a lone caller and grows with load. Each
// acquire is still its own EVALSHA, atomic in Redis.
//
// A caller that finds nothing in flight and nothing queued, after a round
// trip that carried a single call, sends its call itself (a direct round
// trip): handing it to a sender and back would cost two goroutine
// wake-ups, a fifth of a lone call's latency. Only one direct round trip
// runs at a time, and it counts as one of the senders' round trips, so
// that under load calls keep sharing pipelines. A caller blocked in a socket
// read cannot give up on its own, so the direct path needs a client whose
// read and write timeouts are the Limiter's: it is taken only over a
// single-node or Sentinel client (*redis.Client), through a clone made by
// WithTimeout that shares its connection pool.

// senders is the number of round trips in flight at once: pipelines sent
// by the sender goroutines, and a direct call.
const senders = 2

var (
	errAbandoned = errors.New("sluice: caller gave up")
	errTimeout   = errors.New("sluice: redis did not answer in time")
	errOpen      = errors.New("sluice: circuit breaker open")
)

// acquireCmd is a script call go-redis must never resend on its own: after
// a network error Redis may already have run it. (NOSCRIPT, which means it
// did not run, is resent by the queue.)
type acquireCmd struct{ *redis.IntSliceCmd }

// NoRetry tells go-redis not to retry the command.
func (acquireCmd) NoRetry() bool { return true }

// Call states: the caller waits, the sender finished it, or the caller gave up.
const (
	callWaiting int32 = iota
	callDone
	callAbandoned
)

// call is one acquire in the queue. Calls are pooled; whoever owns a call
// last (the caller after it finished, the sender after it was abandoned)
// puts it back.
type call struct {
	// args are the command: "evalsha" sha numkeys keys... argv...; the
	// caller fills args[1:nargs] and src, the queue args[0].
	args  [8]any
	nargs int
	src   any // the script's source, sent with "eval" after NOSCRIPT
	cmd   *redis.IntSliceCmd
	// direct is the command of a direct round trip, kept with the call so
	// that a lone caller allocates none. Its arguments alias args.
	direct *redis.IntSliceCmd
	reply  []int64
	err    error
	state  atomic.Int32
	done   chan struct{}
	timer  *time.Timer
}

var callPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan struct{}, 1), timer: t}
}}

func getCall() *call {
	c := callPool.Get().(*call)
	c.state.Store(callWaiting)
	return c
}

func putCall(c *call) {
	c.cmd, c.reply, c.err = nil, nil, nil
	clear(c.args[1:])
	c.src = nil
	callPool.Put(c)
}

// finish hands the outcome to the caller, or recycles an abandoned call.
func (c *call) finish() {
	if c.state.CompareAndSwap(callWaiting, callDone) {
		c.done <- struct{}{}
		return
	}
	putCall(c)
}

type queue struct {
	l       *Limiter
	mu      sync.Mutex
	pending []*call
	busy    int // round trips in flight: batches being sent and the direct call
	// last is the number of calls the latest round trip carried. Callers
	// go direct only after a round trip of one: under concurrent load a
	// moment with nothing in flight is a gap between batches, and a call
	// sent alone then would hold one of the senders' places for itself.
	last int
	wake chan struct{}
	stop chan struct{}

	direct *redis.Client // nil: every call goes through the senders
	trip   tripCtx       // bounds the direct round trip in flight
	closed bool          // Close was called

	// The direct path keeps a connection of its own while calls keep
	// coming, so that it skips the pool's per-use health check (a system
	// call and three allocations). Only the caller in the direct path uses
	// held and heldUsed; inDirect, under mu, tells close to leave them.
	held       *redis.Conn
	heldUsed   time.Time
	heldOutage uint64 // the Limiter's outage count when held was taken
	inDirect   bool
}

// heldIdle is how long the direct path's connection may stay unused
// before it goes back to the pool: a connection idle for longer may have
// been closed by the server, which the pool's health check detects. After
// any failure the Limiter saw (the breaker opened) it is not used again
// either: the server may have restarted.
const heldIdle = 250 * time.Millisecond

func (q *queue) init(l *Limiter) {
	q.l = l
	q.wake = make(chan struct{}, senders)
	q.stop = make(chan struct{})
	if c, ok := l.rdb.(*redis.Client); ok {
		q.direct = c.WithTimeout(l.opt.timeout)
		q.trip.init()
	}
	for range senders {
		go q.sender()
	}
}

// close stops the senders without waiting for one stuck on a dead server
// (its call ends with go-redis's own timeout) and fails what is queued.
func (q *queue) close() {
	close(q.stop)
	q.mu.Lock()
	left := q.pending
	q.pending = nil
	q.closed = true
	if !q.inDirect {
		q.release()
	}
	q.mu.Unlock()
	for _, c := range left {
		c.err = ErrClosed
		c.finish()
	}
}

// do queues c and waits up to timeout for its reply. It owns c from here:
// the caller must not touch c afterwards.
func (q *queue) do(ctx context.Context, c *call, timeout time.Duration) ([]int64, error) {
	c.args[0] = "evalsha"
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		putCall(c)
		return nil, ErrClosed
	}
	if q.direct != nil && q.busy == 0 && len(q.pending) == 0 && q.last <= 1 {
		q.busy++
		q.last = 1
		q.inDirect = true
		q.mu.Unlock()
		return q.roundTrip(ctx, c, timeout)
	}
	q.pending = append(q.pending, c)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}

	c.timer.Reset(timeout)
	select {
	case <-c.done:
		c.timer.Stop()
	case <-c.timer.C:
		if c.state.CompareAndSwap(callWaiting, callAbandoned) {
			return nil, errTimeout // the sender recycles c
		}
		<-c.done
	case <-ctx.Done():
		c.timer.Stop()
		if c.state.CompareAndSwap(callWaiting, callAbandoned) {
			return nil, errAbandoned
		}
		<-c.done
	}
	reply, err := c.reply, c.err
	putCall(c)
	return reply, err
}

// sender is one goroutine sending batches; its slices are reused.
type sender struct {
	q      *queue
	pipe   redis.Pipeliner
	batch  []*call
	resend []*call
	cmds   []redis.Cmder
}

func (q *queue) sender() {
	s := &sender{q: q, pipe: q.l.rdb.Pipeline()}
	for {
		select {
		case <-q.stop:
			return
		case <-q.wake:
		}
		for {
			q.mu.Lock()
			// At most senders round trips in flight, counting a direct one:
			// the round trip that ends next wakes a sender again.
			if len(q.pending) == 0 || q.busy >= senders {
				q.mu.Unlock()
				break
			}
			s.batch = s.batch[:0]
			open := q.l.open.Load()
			for _, c := range q.pending {
				// A call whose caller gave up while it queued (Redis was slow)
				// is dropped unsent: nobody waits for its tokens.
				if c.state.Load() == callAbandoned {
					putCall(c)
					continue
				}
				// The breaker opened while it queued: the policy answers.
				if open {
					c.err = errOpen
					c.finish()
					continue
				}
				s.batch = append(s.batch, c)
			}
			clear(q.pending)
			q.pending = q.pending[:0]
			if len(s.batch) == 0 {
				q.mu.Unlock()
				continue
			}
			q.busy++
			q.last = len(s.batch)
			q.mu.Unlock()
			s.resend = s.send(s.batch, s.resend[:0], true)
			if len(s.resend) > 0 {
				// NOSCRIPT: these calls did not run. Send them once more with
				// the full source (EVAL), which also caches the script.
				for _, c := range s.resend {
					c.args[0], c.args[1] = "eval", c.src
				}
				s.send(s.resend, nil, false)
			}
			// Only now, after the callers were woken: one that calls again
			// at once still sees this batch in flight and queues behind it.
			q.mu.Lock()
			q.busy--
			q.mu.Unlock()
			clear(s.batch)
			clear(s.resend)
		}
	}
}

// send runs calls as one round trip and finishes every call, except those
// that got NOSCRIPT when resend is set: those are appended to noscript.
func (s *sender) send(calls []*call, noscript []*call, resend bool) []*call {
	ctx := s.q.l.ctx
	s.cmds = s.cmds[:0]
	for _, c := range calls {
		c.cmd = redis.NewIntSliceCmd(ctx, c.args[:c.nargs]...)
		s.cmds = append(s.cmds, acquireCmd{c.cmd})
	}
	if len(s.cmds) == 1 {
		_ = s.q.l.rdb.Process(ctx, s.cmds[0])
	} else {
		_ = s.pipe.BatchProcess(ctx, s.cmds...)
		_, _ = s.pipe.Exec(ctx)
	}
	clear(s.cmds)
	for _, c := range calls {
		err := c.cmd.Err()
		if err != nil && resend && redis.HasErrorPrefix(err, "NOSCRIPT") {
			noscript = append(noscript, c)
			continue
		}
		if err == nil {
			c.reply = c.cmd.Val()
		}
		c.err = err
		c.finish()
	}
	return noscript
}

// roundTrip sends c on the caller's goroutine through the direct client,
// whose read and write timeouts are the Limiter's timeout; q.trip bounds
// the wait for a pooled connection or a dial by the same timeout (or ctx's
// deadline, if sooner). ctx is checked by the caller before and is not
// watched during the round trip, which ends within about the timeout.
func (q *queue) roundTrip(ctx context.Context, c *call, timeout time.Duration) ([]int64, error) {
	cmd := c.direct
	if cmd == nil || len(cmd.Args()) != c.nargs {
		cmd = redis.NewIntSliceCmd(context.Background(), c.args[:c.nargs]...)
		c.direct = cmd
	}
	cmd.SetErr(nil)
	cmd.SetVal(nil)
	now := time.Now()
	outages := q.l.outages.Load()
	if q.held != nil && (now.Sub(q.heldUsed) > heldIdle || q.heldOutage != outages) {
		q.release()
	}
	if q.held == nil {
		// Its first command takes a connection from the pool, checked.
		q.held, q.heldOutage = q.direct.Conn(), outages
	}
	t := &q.trip
	t.arm(ctx, now, timeout)
	_ = q.held.Process(t, acquireCmd{cmd})
	err := cmd.Err()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The script did not run: send it once more with its source
		// (the command's arguments are c.args).
		c.args[0], c.args[1] = "eval", c.src
		cmd.SetErr(nil)
		_ = q.held.Process(t, acquireCmd{cmd})
		err = cmd.Err()
	}
	expired := t.disarm()
	if err != nil {
		// After a network error or a timeout the connection may hold a late
		// reply or be dead (the pool then closes it); after an error reply
		// (READONLY after a failover, say) the next call had better take a
		// fresh one.
		q.release()
	} else {
		q.heldUsed = time.Now()
	}
	var reply []int64
	switch {
	case err == nil:
		reply = cmd.Val()
	case ctx.Err() != nil:
		err = errAbandoned // the caller's deadline, not a failure of Redis
	case expired && errors.Is(err, context.DeadlineExceeded):
		err = errTimeout
	}
	if err != nil && err != errAbandoned && unavailable(err) {
		// Open the breaker before giving up this call's place, so that the
		// calls queued behind it get the policy's answer, not a round trip
		// to a server that just failed.
		q.l.trip(err)
	}
	q.mu.Lock()
	q.busy--
	q.inDirect = false
	if q.closed {
		q.release()
	}
	queued := len(q.pending) > 0
	q.mu.Unlock()
	if queued {
		// Calls queued while both senders were busy, one of them with
		// this call's place.
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	putCall(c)
	return reply, err
}

// release gives the direct path's connection back to the pool, which
// closes it if it failed.
func (q *queue) release() {
	if q.held != nil {
		_ = q.held.Close()
		q.held = nil
	}
}

// tripCtx is the context of the direct round trip in flight (there is at
// most one per Limiter, so one value is reused). go-redis watches its Done
// channel while waiting for a pooled connection or a dial; its deadline
// reaches the socket when the client has ContextTimeoutEnabled. It carries
// no values: like a batch, a direct call runs detached from its caller's
// context.
//
// Resetting and stopping a timer for every call would cost more than the
// rest of the client's own work, so the timer is lazy: it is started when
// none is pending, and when it fires during a later round trip than the
// one it was started for, it is set again for that one's deadline. The
// Done channel is closed when a deadline passes and replaced only then.
type tripCtx struct {
	timer    *time.Timer
	mu       sync.Mutex
	pending  bool // the timer is set
	armed    bool // a round trip is in flight
	deadline time.Time
	done     chan struct{}
	err      error
}

var _ context.Context = (*tripCtx)(nil)

func (t *tripCtx) init() {
	t.done = make(chan struct{})
	t.timer = time.AfterFunc(time.Hour, t.expire)
	t.timer.Stop()
}

// arm starts the deadline of one round trip: timeout from now, or ctx's
// deadline if sooner.
func (t *tripCtx) arm(ctx context.Context, now time.Time, timeout time.Duration) {
	deadline := now.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	t.mu.Lock()
	t.armed, t.deadline = true, deadline
	start := !t.pending
	t.pending = true
	t.mu.Unlock()
	if start {
		t.timer.Reset(time.Until(deadline))
	}
}

// expire runs on the timer.
func (t *tripCtx) expire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.armed {
		t.pending = false
		return
	}
	if d := time.Until(t.deadline); d > 0 {
		t.timer.Reset(d) // set for an earlier round trip
		return
	}
	t.pending = false
	if t.err == nil {
		t.err = context.DeadlineExceeded
		close(t.done)
	}
}

// disarm ends the round trip and reports whether its deadline had passed.
func (t *tripCtx) disarm() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = false
	if t.err == nil {
		return false
	}
	t.err, t.done = nil, make(chan struct{})
	return true
}

// Deadline returns the deadline of the round trip.
func (t *tripCtx) Deadline() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline, true
}

// Done is closed when the deadline passes.
func (t *tripCtx) Done() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// Err is context.DeadlineExceeded once the deadline passed, else nil.
func (t *tripCtx) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Value returns nil: no values are carried.
func (t *tripCtx) Value(any) any { return nil }
