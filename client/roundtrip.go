package client

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var errOpen = errors.New("sluice: circuit breaker open")

// acquireCmd is a script call go-redis must never resend on its own: after
// a network error Redis may already have run it. (NOSCRIPT, or "Function
// not found" for an FCALL, which mean it did not run, is resent by send.)
type acquireCmd struct{ *redis.IntSliceCmd }

// NoRetry tells go-redis not to retry the command.
func (acquireCmd) NoRetry() bool { return true }

// sender sends batches of acquire calls to Redis for a Limiter.
type sender struct {
	l *Limiter
	// rdb sends the calls. Over a single-node or Sentinel client it is a
	// clone made by WithTimeout, sharing the pool, whose read and write
	// timeouts are the Limiter's, so that a caller sending its own round
	// trip is never blocked for longer.
	rdb     redis.UniversalClient
	timeout time.Duration
	pipes   sync.Pool // of *pipeline
	// deadline is the context round trips send with, shared by those
	// that start within timeout/deadlineShares of one another.
	deadline atomic.Pointer[sharedDeadline]
}

// deadlineShares: a round trip reuses the current deadline context while
// at least (deadlineShares-1)/deadlineShares of the timeout is left of it.
// A context per round trip cost five of the nine allocations of a lone
// call (its timer, its Done channel); shared, it costs one new context
// every timeout/8 at most, and each round trip still ends within the
// timeout, never later.
const deadlineShares = 8

// sharedDeadline is a context whose deadline is the timeout after start.
// It is never cancelled early: it ends by its own timer, so a round trip
// still using it is never cut short.
type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
}

// roundTripContext returns a context that ends between 7/8 of the
// timeout and the timeout from now.
func (s *sender) roundTripContext() context.Context {
	d := s.deadline.Load()
	if d != nil && time.Since(d.start) < s.timeout/deadlineShares {
		return d.ctx
	}
	d = &sharedDeadline{start: time.Now()}
	d.ctx, d.cancel = context.WithDeadline(context.Background(), d.start.Add(s.timeout))
	s.deadline.Store(d)
	return d.ctx
}

// pipeline is a reusable go-redis pipeline with its command slice.
type pipeline struct {
	pipe     redis.Pipeliner
	cmds     []redis.Cmder
	noscript []*call
}

// inFlight is the most round trips a Limiter has in flight: one per
// connection of rdb's pool, so that a caller that finds one free can send
// at once, alone, as a plain go-redis call would. The pool's size is
// go-redis's (10 per GOMAXPROCS by default): it follows the machine without
// a knob of its own. Fewer are allowed where fewer answer more calls
// (pace.go): then calls go together.
func inFlight(rdb redis.UniversalClient) int {
	var size int
	switch c := rdb.(type) {
	case *redis.Client:
		size = c.Options().PoolSize
	case *redis.ClusterClient:
		size = c.Options().PoolSize // per node: the fewest a call may have
	case *redis.Ring:
		size = c.Options().PoolSize
	}
	if size < 1 {
		size = 10 * runtime.GOMAXPROCS(0)
	}
	return size
}

// newSender returns the Limiter's sender and the batcher that uses it.
// Over a *redis.Client the round trips run on the callers' goroutines;
// over any other client (Cluster) they run detached, since a blocked read
// there is bounded only by the client's own read timeout.
func newSender(l *Limiter) (*sender, *batcher) {
	s := &sender{l: l, rdb: l.rdb, timeout: l.opt.timeout}
	detached := true
	if c, ok := l.rdb.(*redis.Client); ok {
		s.rdb, detached = c.WithTimeout(l.opt.timeout), false
	}
	s.pipes.New = func() any { return &pipeline{pipe: s.rdb.Pipeline()} }
	return s, newBatcher(s.send, inFlight(l.rdb), detached)
}

// send runs calls as one round trip (a pipeline when there are several),
// and resends those answered NOSCRIPT (or "Function not found", which also
// starts a load of the function) once with the script's source. When
// the breaker is open nothing is sent: the policy answers. Each caller
// reports its own outcome to the breaker.
func (s *sender) send(calls []*call) {
	if s.l.open.Load() {
		for _, c := range calls {
			c.err = errOpen
		}
		return
	}
	calls = s.mergeKeyed(calls)
	p := s.pipes.Get().(*pipeline)
	defer s.pipes.Put(p)
	defer splitKeyed(calls)
	// Bounds the wait for a pooled connection or a dial; reads and writes
	// are bounded by rdb's timeouts. Not derived from the Limiter's
	// context: Close need not cut a round trip short, and a child of a
	// shared context would take its lock on every round trip.
	ctx := s.roundTripContext()
	p.noscript = s.roundTrip(ctx, p, calls, p.noscript[:0], true)
	if len(p.noscript) > 0 {
		// NOSCRIPT or no function: these calls did not run. Send them once
		// more with the full source (EVAL), which also caches the script.
		for _, c := range p.noscript {
			c.args[0], c.args[1] = "eval", c.src
			if len(c.xargs) > 0 {
				c.xargs[0], c.xargs[1] = "eval", c.src
			}
		}
		s.roundTrip(ctx, p, p.noscript, nil, false)
		clear(p.noscript)
	}
}

// roundTrip sends calls and sets their outcome, except for those answered
// NOSCRIPT or "Function not found" when resend is set: those are appended
// to noscript.
func (s *sender) roundTrip(ctx context.Context, p *pipeline, calls, noscript []*call, resend bool) []*call {
	for _, c := range calls {
		cmd := c.command()
		p.cmds = append(p.cmds, acquireCmd{cmd})
	}
	if len(p.cmds) == 1 {
		_ = s.rdb.Process(ctx, p.cmds[0])
	} else {
		_ = p.pipe.BatchProcess(ctx, p.cmds...)
		_, _ = p.pipe.Exec(ctx)
	}
	clear(p.cmds)
	p.cmds = p.cmds[:0]
	for _, c := range calls {
		cmd := c.cmd.(*redis.IntSliceCmd)
		err := cmd.Err()
		if err != nil && resend && s.l.notRun(err) {
			noscript = append(noscript, c)
			continue
		}
		if err == nil {
			c.reply = cmd.Val()
		}
		c.err = err
	}
	return noscript
}

// command returns the call's command, reset for sending; its arguments
// are c.args.
func (c *call) command() *redis.IntSliceCmd {
	if len(c.xargs) > 0 {
		cmd := redis.NewIntSliceCmd(context.Background(), c.xargs...)
		c.cmd = cmd
		return cmd
	}
	cmd, _ := c.cmd.(*redis.IntSliceCmd)
	if cmd == nil || len(cmd.Args()) != c.nargs {
		cmd = redis.NewIntSliceCmd(context.Background(), c.args[:c.nargs]...)
		c.cmd = cmd
	}
	cmd.SetErr(nil)
	cmd.SetVal(nil)
	return cmd
}
