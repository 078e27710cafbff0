// Package startup helps the binaries wait for their stores at start-up.
package startup

import (
	"context"
	"log/slog"
	"time"
)

// Wait calls open until it succeeds, ctx ends or timeout passes, so that a
// store still starting next to the binary does not fail it, while a wrong
// address still ends with a clear error (the last one open returned). Each
// attempt is bounded by 5 s; waits between attempts grow from 200 ms to 2 s.
func Wait[T any](ctx context.Context, timeout time.Duration, log *slog.Logger, what string,
	open func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 200 * time.Millisecond
	for {
		actx, acancel := context.WithTimeout(ctx, min(5*time.Second, timeout))
		v, err := open(actx)
		acancel()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return v, err
		}
		log.Warn("waiting for "+what, "err", err, "retry_in", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(wait*2, 2*time.Second)
	}
}
