package decision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/clientmetrics"
	"github.com/sluicehq/sluice/client/usage"
)

// Acquirer takes tokens as one app. *client.Limiter does Acquire; AcquireKey
// is the keyed-bucket call of the client.
type Acquirer interface {
	Acquire(ctx context.Context, bucket string, n int64) (client.Result, error)
	AcquireKey(ctx context.Context, bucket, key string, n int64) (client.Result, error)
}

// Acquirers gives the Acquirer of an app.
type Acquirers interface {
	For(app string) (Acquirer, error)
}

// LimiterOptions configure the client Limiters of a Pool.
type LimiterOptions struct {
	// Client options for every Limiter (failure policy, timeout, instances,
	// key prefix, ...).
	Client []client.Option
	// KeyPrefix of the usage counters; must be the client's.
	KeyPrefix string
	// Metrics, if set, receives the client metrics of every app.
	Metrics prometheus.Registerer
	// CountUsage writes usage counts for the console's charts.
	CountUsage bool
	Logger     *slog.Logger
}

// Pool holds one client Limiter per calling app, made at the app's first
// call, so the decision service behaves exactly like a Go service of that
// app: same script, failure policy, breaker, usage counting and metrics.
// Apps reach it only once authenticated, so its size is bounded by the
// apps that have credentials.
type Pool struct {
	rdb redis.UniversalClient
	opt LimiterOptions

	// ready is read without a lock on every decision; mu serialises the
	// rare writes, which copy it.
	ready  atomic.Pointer[map[string]Acquirer]
	mu     sync.Mutex
	apps   map[string]*appLimiter
	closed bool
}

type appLimiter struct {
	lim *client.Limiter
	rec *usage.Recorder
}

// NewPool returns a Pool taking tokens through rdb.
func NewPool(rdb redis.UniversalClient, opt LimiterOptions) *Pool {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	p := &Pool{rdb: rdb, opt: opt, apps: map[string]*appLimiter{}}
	p.ready.Store(&map[string]Acquirer{})
	return p
}

// For returns app's Acquirer, making its Limiter on first use.
func (p *Pool) For(app string) (Acquirer, error) {
	if a, ok := (*p.ready.Load())[app]; ok {
		return a, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.apps[app]; a != nil {
		return a.lim, nil
	}
	if p.closed {
		return nil, client.ErrClosed
	}
	var observers []func(client.Decision)
	var rec *usage.Recorder
	if p.opt.CountUsage {
		var err error
		rec, err = usage.NewRecorder(p.rdb, app, usage.WithKeyPrefix(p.opt.KeyPrefix), usage.WithLogger(p.opt.Logger))
		if err != nil {
			return nil, fmt.Errorf("usage recorder of %q: %w", app, err)
		}
		observers = append(observers, rec.Observe)
	}
	if p.opt.Metrics != nil {
		m, err := clientmetrics.New(p.opt.Metrics, app)
		if err != nil {
			if rec != nil {
				_ = rec.Close()
			}
			return nil, err
		}
		observers = append(observers, m.Observe)
	}
	opts := append([]client.Option{client.WithLogger(p.opt.Logger)}, p.opt.Client...)
	if len(observers) > 0 {
		opts = append(opts, client.WithObserver(func(d client.Decision) {
			for _, o := range observers {
				o(d)
			}
		}))
	}
	lim, err := client.New(p.rdb, app, opts...)
	if err != nil {
		if rec != nil {
			_ = rec.Close()
		}
		return nil, err
	}
	p.apps[app] = &appLimiter{lim: lim, rec: rec}
	next := make(map[string]Acquirer, len(p.apps))
	for name, a := range p.apps {
		next[name] = a.lim
	}
	p.ready.Store(&next)
	return lim, nil
}

// Close closes every Limiter and writes the usage counts left.
func (p *Pool) Close() error {
	p.mu.Lock()
	apps := p.apps
	p.apps, p.closed = map[string]*appLimiter{}, true
	p.ready.Store(&map[string]Acquirer{})
	p.mu.Unlock()
	var errs []error
	for _, a := range apps {
		errs = append(errs, a.lim.Close())
		if a.rec != nil {
			errs = append(errs, a.rec.Close())
		}
	}
	return errors.Join(errs...)
}
