package client

import (
	"context"
	"time"
)

// Acquirer takes tokens from buckets. *Limiter (Redis) implements it, and
// so does package memlimit's in-memory Limiter, for unit tests of code
// that is rate limited. Middleware and Wait accept any Acquirer.
type Acquirer interface {
	// Acquire takes n tokens from bucket; see Limiter.Acquire for the
	// results and errors.
	Acquire(ctx context.Context, bucket string, n int64) (Result, error)
}

var _ Acquirer = (*Limiter)(nil)

// probeOf is how long Wait sleeps after an answer without a RetryAfter.
func probeOf(a Acquirer) time.Duration {
	if l, ok := a.(*Limiter); ok {
		return l.opt.probe
	}
	return DefaultProbeInterval
}
