// Package periodic runs the background tasks of the servers and workers
// (reloads, purges, roll-ups) at a fixed interval until their context ends.
package periodic

import (
	"context"
	"time"
)

// Every calls task every interval until ctx ends, the first time one
// interval from now. A call that overruns the interval delays the next
// one; calls never overlap, and none starts after ctx ended.
func Every(ctx context.Context, interval time.Duration, task func(context.Context)) {
	run(ctx, interval, false, task)
}

// NowAndEvery is Every with a first call at once.
func NowAndEvery(ctx context.Context, interval time.Duration, task func(context.Context)) {
	run(ctx, interval, true, task)
}

func run(ctx context.Context, interval time.Duration, now bool, task func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	if now && ctx.Err() == nil {
		task(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return // both were ready
			}
			task(ctx)
		}
	}
}

// Latch follows a repeated task's failures, so that a loop logs when
// they start and when they stop rather than every one.
type Latch struct{ failing bool }

// Changed records the outcome of a call and reports whether it differs
// from the previous one's (failed after working, or the reverse).
func (l *Latch) Changed(err error) bool {
	failing := err != nil
	changed := failing != l.failing
	l.failing = failing
	return changed
}
