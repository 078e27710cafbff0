package client

import (
	"context"
	"log/slog"
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

// Wait blocks until n tokens of bucket are granted or ctx ends; see the
// function Wait.
func (l *Limiter) Wait(ctx context.Context, bucket string, n int64) error {
	return Wait(ctx, l, bucket, n)
}

// probeOf is how long Wait sleeps after an answer without a RetryAfter.
func probeOf(a Acquirer) time.Duration {
	if l, ok := a.(*Limiter); ok {
		return l.opt.probe
	}
	return DefaultProbeInterval
}

// logMisconfigured reports a request that a bucket cannot limit as
// configured (unknown bucket, app not allowed): loud, since it is a
// deployment mistake.
func logMisconfigured(a Acquirer, bucket string, err error) {
	log, app := slog.Default(), ""
	if l, ok := a.(*Limiter); ok {
		log, app = l.opt.log, l.app
	}
	log.Error("sluice: request not limited as configured", "bucket", bucket, "app", app, "err", err)
}
