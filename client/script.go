package client

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Calls other than Acquire (AcquireAll, Refund, Charge, Reserve) are rarer
// and carry their own arguments, so they skip the batching queue: each is
// one EVALSHA on the caller's goroutine, never resent after a failure
// (Redis may have run it), resent with the source only after NOSCRIPT.

// oneShot is a script call go-redis must never resend on its own.
type oneShot struct{ *redis.IntSliceCmd }

// NoRetry tells go-redis not to retry the command.
func (oneShot) NoRetry() bool { return true }

// ErrCrossSlot: on Redis Cluster, the buckets of one AcquireAll are not in
// one hash slot, so no script can take from all of them atomically. Nothing
// was taken. See docs/decisions.md.
var ErrCrossSlot = errors.New("sluice: buckets of one call are in different redis cluster slots")

// runScript runs a script once within the Limiter's timeout. It returns
// ErrUnavailable (after opening the breaker) when Redis did not answer,
// ctx's error when ctx ended first, ErrCrossSlot for a cross-slot call on
// Redis Cluster, and errReply for another error reply about this call.
func (l *Limiter) runScript(ctx context.Context, sha, src string, keys []string, argv []any) ([]int64, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l.open.Load() {
		return nil, ErrUnavailable
	}
	args := make([]any, 0, 3+len(keys)+len(argv))
	args = append(args, "evalsha", sha, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, argv...)
	tctx, cancel := context.WithTimeout(ctx, l.opt.timeout)
	defer cancel()
	reply, err := l.process(tctx, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", src
		reply, err = l.process(tctx, args)
	}
	switch {
	case err == nil:
		l.settle(nil)
		return reply, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case tctx.Err() != nil:
		l.failed()
		return nil, ErrUnavailable
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

// process sends one command and waits for it or for ctx. A blocked read
// cannot be interrupted, so it runs on its own goroutine, which ends when
// go-redis's read timeout does.
func (l *Limiter) process(ctx context.Context, args []any) ([]int64, error) {
	cmd := redis.NewIntSliceCmd(context.Background(), args...)
	done := make(chan struct{})
	go func() {
		_ = l.rdb.Process(context.Background(), oneShot{cmd})
		close(done)
	}()
	select {
	case <-done:
		return cmd.Val(), cmd.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
