package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Batching: callers send their own calls, and only calls that arrive
// while the round trips allowed in flight (the places) are all busy wait
// and go together. A caller that finds a free place sends at once on its
// own goroutine (a lone caller never waits for anyone and wakes no one).
// When a round trip ends and calls are waiting, its sender hands the place
// to one of them, which takes everything queued by then and sends it as
// one pipeline. So there is no sender goroutine to wake, load turns into
// larger pipelines rather than a longer queue, and each call still runs
// as its own atomic script in Redis. How many places there are is pace's
// decision (pace.go): one per pooled connection, fewer where fewer answer
// more calls a second.
//
// The batcher knows nothing of Redis: it groups calls and hands each group
// to its send function, which fills in every call's reply or error.

var (
	errAbandoned = errors.New("sluice: caller gave up")
	errTimeout   = errors.New("sluice: redis did not answer in time")
)

// Call states. A call is waiting in the queue or in a round trip; done
// when its sender filled it in; abandoned when its caller gave up first;
// promoted when it was handed a place in flight and its caller must send
// the queue; sending while its own caller sends it and reads it directly.
const (
	callWaiting int32 = iota
	callDone
	callAbandoned
	callPromoted
	callSending
)

// call is one acquire. Calls are pooled; whoever owns a call last (its
// caller after it finished, the batcher after it was abandoned) puts it
// back.
type call struct {
	// args are the command: "evalsha" sha (or "fcall" function) numkeys
	// keys... argv..., of which the first nargs are sent; src is the
	// script's source, sent with "eval" after NOSCRIPT (or "Function not
	// found").
	args  [10]any
	nargs int
	src   any
	reply []int64
	err   error
	state atomic.Int32
	done  chan struct{}
	timer *time.Timer
	batch []*call // the calls this call's caller sends when it leads
	// flight is how many round trips were in flight, its own included,
	// when this call's caller took its place (for pace).
	flight int
	// cmd is the command object of the call, kept with it so that it is
	// reused; the sender owns it.
	cmd any
	// xargs, when not empty, is the command instead of args: a script
	// call of its own (runScript), or, when merged is set, a call of the
	// keyed batch script answering for the keyed calls in batch.
	xargs  []any
	merged bool
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
	c.reply, c.err, c.flight = nil, nil, 0
	c.args, c.nargs, c.src = [10]any{}, 0, nil
	if len(c.xargs) > 0 {
		// The command's arguments are xargs', which the next user of c
		// overwrites: it must never be reused as an acquire's.
		c.cmd = nil
	}
	c.merged = false
	clear(c.batch)
	c.batch = c.batch[:0]
	clear(c.xargs)
	c.xargs = c.xargs[:0]
	callPool.Put(c)
}

// finish hands a sent call's outcome to its caller, or recycles it if
// the caller gave up.
func (c *call) finish() {
	if c.state.Load() == callSending {
		return // its caller reads it after send returns
	}
	if c.state.CompareAndSwap(callWaiting, callDone) {
		c.done <- struct{}{}
		return
	}
	putCall(c)
}

// batcher lets at most limit round trips be in flight and coalesces the
// calls that arrive while they are.
type batcher struct {
	// send runs calls as one round trip and sets every call's reply or
	// err. It must not call finish.
	send func(calls []*call)
	// full is the most round trips in flight at once while Redis answers:
	// one per connection of the pool.
	full int
	// narrow is set while Redis fails calls: then one round trip at a time
	// is in flight (limit 1), and the calls that arrive meanwhile go
	// together in the next. A failing Redis is not dialled by every
	// caller at once (go-redis stops dialling for a second after as many
	// failed dials as its pool has connections), nor flooded when it
	// comes back.
	narrow atomic.Bool
	// detached runs every round trip on a goroutine of its own, for a
	// transport that cannot bound a blocked read by the caller's timeout:
	// the caller then waits for its call like a queued one.
	detached bool
	// pace decides the places (pace.go).
	pace pace

	mu       sync.Mutex
	paced    int     // the most round trips in flight while Redis answers, as paced (full at first)
	limit    int     // the most round trips in flight now: paced, or 1 while narrow
	inflight int     // round trips being sent, and places handed to promoted calls
	queue    []*call // calls waiting for a place
	closed   bool
}

func newBatcher(send func([]*call), limit int, detached bool) *batcher {
	return &batcher{send: send, full: max(1, limit), paced: max(1, limit), limit: max(1, limit), detached: detached}
}

// failing narrows the batcher to one round trip in flight while Redis
// fails calls (on), and widens it again at Redis's next answer.
func (b *batcher) failing(on bool) {
	if b.narrow.Load() == on {
		return
	}
	b.mu.Lock()
	b.narrow.Store(on)
	b.limit = b.paced
	if on {
		b.limit = 1
	}
	b.mu.Unlock()
}

// do sends c, alone or with others, and waits up to timeout for its reply
// (a round trip the caller sends itself is bounded by the transport).
// It owns c from here: the caller must not touch c afterwards.
func (b *batcher) do(ctx context.Context, c *call, timeout time.Duration) ([]int64, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		putCall(c)
		return nil, ErrClosed
	}
	if b.inflight < b.limit {
		// A free place: c goes now, with any calls still queued (the
		// places were just raised).
		b.inflight++
		c.flight = b.inflight
		c.batch = append(c.batch, c)
		if len(b.queue) > 0 {
			b.appendQueue(c)
		}
		b.mu.Unlock()
		return b.start(ctx, c, timeout)
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	return b.wait(ctx, c, timeout)
}

// start sends c.batch, which holds c (c holds a place), and returns c's
// outcome.
func (b *batcher) start(ctx context.Context, c *call, timeout time.Duration) ([]int64, error) {
	if b.detached {
		b.runDetached(c)
		return b.wait(ctx, c, timeout)
	}
	return b.lead(c)
}

// lead sends c.batch, which holds c, on the caller's goroutine.
func (b *batcher) lead(c *call) ([]int64, error) {
	c.state.Store(callSending)
	b.run(c.batch, c.flight)
	reply, err := c.reply, c.err
	putCall(c)
	return reply, err
}

// run sends one round trip, which took its place with flight round trips
// in flight, hands out its outcomes, tells pace and passes its place on.
func (b *batcher) run(calls []*call, flight int) {
	b.send(calls)
	answered := true
	for _, c := range calls {
		if c.err != nil {
			answered = false
		}
	}
	n := len(calls)
	for _, c := range calls {
		c.finish()
	}
	if answered {
		if places := b.pace.roundTrip(n, flight, nanotime(), b.full); places > 0 {
			b.mu.Lock()
			b.paced = places
			if !b.narrow.Load() {
				b.limit = places
			}
			b.mu.Unlock()
		}
	}
	b.release()
}

// runDetached sends c.batch on a goroutine of its own. The batch is
// copied: c may be finished and recycled before the others are.
func (b *batcher) runDetached(c *call) {
	calls, flight := slices.Clone(c.batch), c.flight
	clear(c.batch)
	c.batch = c.batch[:0]
	go b.run(calls, flight)
}

// wait waits for a queued call, which may be promoted to send the queue.
func (b *batcher) wait(ctx context.Context, c *call, timeout time.Duration) ([]int64, error) {
	c.timer.Reset(timeout)
	var gaveUp error
	select {
	case <-c.done:
		c.timer.Stop()
	case <-c.timer.C:
		gaveUp = errTimeout
	case <-ctx.Done():
		c.timer.Stop()
		gaveUp = errAbandoned
	}
	if gaveUp != nil {
		if c.state.CompareAndSwap(callWaiting, callAbandoned) {
			return nil, gaveUp // whoever holds c recycles it
		}
		<-c.done // finished or promoted meanwhile
	}
	if c.state.Load() == callPromoted {
		if gaveUp != nil {
			// Too late to send: pass the place on.
			putCall(c)
			b.release()
			return nil, gaveUp
		}
		c.batch = append(c.batch, c)
		b.takeQueue(c)
		if b.detached {
			c.state.Store(callWaiting)
		}
		return b.start(ctx, c, timeout)
	}
	reply, err := c.reply, c.err
	putCall(c)
	return reply, err
}

// takeQueue puts every call still waiting in the queue into c.batch.
func (b *batcher) takeQueue(c *call) {
	b.mu.Lock()
	b.appendQueue(c)
	b.mu.Unlock()
}

// appendQueue moves every call still waiting in the queue into c.batch.
// b.mu is held.
func (b *batcher) appendQueue(c *call) {
	for _, q := range b.queue {
		if q.state.Load() == callAbandoned {
			putCall(q) // its caller gave up while it queued: nobody waits for it
			continue
		}
		c.batch = append(c.batch, q)
	}
	clear(b.queue)
	b.queue = b.queue[:0]
}

// release ends a round trip's hold on its place: the place goes to a
// queued call, if one still waits, or becomes free.
func (b *batcher) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	// More in flight than the limit (it was just narrowed): the place ends.
	for len(b.queue) > 0 && b.inflight <= b.limit {
		last := len(b.queue) - 1
		c := b.queue[last]
		b.queue[last] = nil
		b.queue = b.queue[:last]
		if c.state.CompareAndSwap(callWaiting, callPromoted) {
			c.flight = b.inflight
			c.done <- struct{}{}
			return
		}
		putCall(c) // abandoned
	}
	b.inflight--
}

// close fails every queued call with ErrClosed; later calls get it at
// once. Round trips in flight end on their own.
func (b *batcher) close() {
	b.mu.Lock()
	left := b.queue
	b.queue = nil
	b.closed = true
	b.mu.Unlock()
	for _, c := range left {
		c.err = ErrClosed
		c.finish()
	}
}
