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

// senders is the number of pipelines in flight at once.
const senders = 2

var (
	errAbandoned = errors.New("sluice: caller gave up")
	errTimeout   = errors.New("sluice: redis did not answer in time")
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
	args  [6]any // "evalsha" sha 1 key app n
	cmd   *redis.IntSliceCmd
	reply []int64
	err   error
	state atomic.Int32
	done  chan struct{}
	timer *time.Timer
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
	c.args[3], c.args[4], c.args[5] = nil, nil, nil
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
	wake    chan struct{}
	stop    chan struct{}
}

func (q *queue) init(l *Limiter) {
	q.l = l
	q.wake = make(chan struct{}, senders)
	q.stop = make(chan struct{})
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
	q.mu.Unlock()
	for _, c := range left {
		c.err = ErrClosed
		c.finish()
	}
}

// do queues c and waits up to timeout for its reply. It owns c from here:
// the caller must not touch c afterwards.
func (q *queue) do(ctx context.Context, c *call, timeout time.Duration) ([]int64, error) {
	c.args[0], c.args[1], c.args[2] = "evalsha", q.l.shaArg, "1"
	q.mu.Lock()
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
			if len(q.pending) == 0 {
				q.mu.Unlock()
				break
			}
			s.batch = s.batch[:0]
			for _, c := range q.pending {
				// A call whose caller gave up while it queued (Redis was slow)
				// is dropped unsent: nobody waits for its tokens.
				if c.state.Load() == callAbandoned {
					putCall(c)
					continue
				}
				s.batch = append(s.batch, c)
			}
			clear(q.pending)
			q.pending = q.pending[:0]
			q.mu.Unlock()
			if len(s.batch) == 0 {
				continue
			}
			s.resend = s.send(s.batch, s.resend[:0], true)
			if len(s.resend) > 0 {
				// NOSCRIPT: these calls did not run. Send them once more with
				// the full source (EVAL), which also caches the script.
				for _, c := range s.resend {
					c.args[0], c.args[1] = "eval", q.l.srcArg
				}
				s.send(s.resend, nil, false)
			}
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
		c.cmd = redis.NewIntSliceCmd(ctx, c.args[:]...)
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
