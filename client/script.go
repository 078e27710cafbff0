package client

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Calls other than Acquire (AcquireAll, slots, Refund, Charge, Reserve)
// carry their own arguments, in a call's xargs, and go through the same
// batcher as acquires: a caller that finds a place sends its call at once
// on its own goroutine, and calls that find every place busy go together
// in the next round trip. Each is never resent after a failure (Redis may
// have run it), only with the source after NOSCRIPT.

// ErrCrossSlot: on Redis Cluster, the buckets of one AcquireAll are not in
// one hash slot, so no script can take from all of them atomically. Nothing
// was taken. See docs/decisions.md.
var ErrCrossSlot = errors.New("sluice: buckets of one call are in different redis cluster slots")

// runScript runs a script once within the Limiter's timeout. It returns
// ErrUnavailable (after opening the breaker) when Redis did not answer,
// ctx's error when ctx ended first, ErrCrossSlot for a cross-slot call on
// Redis Cluster, and errReply for another error reply about this call.
func (l *Limiter) runScript(ctx context.Context, s *script, keys []string, argv []any) ([]int64, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l.open.Load() {
		return nil, ErrUnavailable
	}
	c := getCall()
	cmd, first := l.head(s)
	c.xargs = append(c.xargs, cmd, first, len(keys))
	for _, k := range keys {
		c.xargs = append(c.xargs, k)
	}
	c.xargs = append(c.xargs, argv...)
	c.src = s.src
	reply, err := l.batch.do(ctx, c, l.opt.timeout)
	switch {
	case err == nil:
		l.answered()
		return reply, nil
	case errors.Is(err, errAbandoned):
		return nil, ctx.Err()
	case errors.Is(err, ErrClosed):
		return nil, ErrClosed
	case !l.settle(err):
		return nil, ErrUnavailable
	case redis.HasErrorPrefix(err, "CROSSSLOT"):
		return nil, ErrCrossSlot
	}
	l.opt.log.Debug("sluice: script failed", "err", err)
	return nil, errReply{err}
}

// errReply is an error reply of Redis about one call (a key of the wrong
// type, say); the failure policy answers it, the breaker stays closed.
type errReply struct{ error }

func (e errReply) Unwrap() error { return e.error }
