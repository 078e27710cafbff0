package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// benchApp is the app the Sluice buckets allow.
const benchApp = "bench"

// sluice is Sluice's client: one atomic script per acquire on Redis's clock.
type sluice struct {
	conn
	names []string
	label string
}

// conn is a Sluice limiter on its own Redis client.
type conn struct {
	rdb *redis.Client
	lim *client.Limiter
}

// newConn connects to Redis, has define write the buckets there, then starts
// a Limiter of benchApp with the workload's key prefix and extra.
func newConn(ctx context.Context, opts *redis.Options, w workload, define func(context.Context, *redis.Client) error,
	extra ...client.Option) (conn, error) {
	rdb := redis.NewClient(opts)
	if err := define(ctx, rdb); err != nil {
		rdb.Close()
		return conn{}, err
	}
	// The fallback measurement makes Redis die on purpose: no warnings.
	base := []client.Option{client.WithKeyPrefix(w.prefix), client.WithLogger(slog.New(slog.DiscardHandler))}
	lim, err := client.New(rdb, benchApp, append(base, extra...)...)
	if err != nil {
		rdb.Close()
		return conn{}, err
	}
	return conn{rdb: rdb, lim: lim}, nil
}

func (c conn) close() error {
	c.lim.Close()
	return c.rdb.Close()
}

// fromRedis is a Sluice answer as the benchmark counts it: one given by
// the failure policy, not by Redis, is an error.
func fromRedis(res client.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	if res.Fallback {
		return res.Allowed, fmt.Errorf("answered by the failure policy, not Redis")
	}
	return res.Allowed, nil
}

// defineBuckets writes the workload's buckets as the sync worker would.
func defineBuckets(ctx context.Context, rdb redis.Scripter, w workload) error {
	ks := redisscript.Keyspace{Prefix: w.prefix}
	for i := range w.buckets {
		cfg := redisscript.Config{Name: w.bucketName(i), ID: int64(i + 1), Version: 1, Capacity: w.capacity,
			PermitsMicro: w.rate * 1_000_000, PeriodSeconds: 1, Apps: []string{benchApp}, LeaseMillis: w.lease}
		if _, err := redisscript.Apply(ctx, rdb, ks, cfg, true); err != nil {
			return err
		}
	}
	return nil
}

func newSluice(ctx context.Context, opts *redis.Options, w workload, extra ...client.Option) (*sluice, error) {
	c, err := newConn(ctx, opts, w, func(ctx context.Context, rdb *redis.Client) error {
		return defineBuckets(ctx, rdb, w)
	}, extra...)
	if err != nil {
		return nil, err
	}
	s := &sluice{conn: c}
	for i := range w.buckets {
		s.names = append(s.names, w.bucketName(i))
	}
	return s, nil
}

func (s *sluice) name() string {
	if s.label != "" {
		return s.label
	}
	return "sluice"
}

func (s *sluice) acquire(ctx context.Context, i int) (bool, error) {
	return fromRedis(s.lim.Acquire(ctx, s.names[i%len(s.names)], 1))
}

// newLimiters returns Sluice plain and keyed (and plain once per sluicePools
// size), and redis_rate and the plain script once per
// pool size (0: go-redis's default, 10 per GOMAXPROCS), so that each peer
// is compared in its best configuration; with leaseMillis, also Sluice on
// one hot bucket in lease mode. Sluice gets timeout, so that a
// scheduling hiccup of this busy machine shows in its latency as it does
// in the others', instead of tripping its breaker into the fallback.
func newLimiters(ctx context.Context, opts *redis.Options, w workload, timeout time.Duration, pools, sluicePools []int,
	leaseMillis int64) ([]limiter, error) {
	s, err := newSluice(ctx, opts, w, client.WithTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("sluice: %w", err)
	}
	k, err := newSluiceKeyed(ctx, opts, w, client.WithTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("sluice keyed: %w", err)
	}
	impls := []limiter{s, k}
	for _, size := range sluicePools {
		// The engine keeps at most one round trip in flight per pooled
		// connection, so the pool size is also its most in flight.
		o := *opts
		o.PoolSize = size
		ps, err := newSluice(ctx, &o, w, client.WithTimeout(timeout))
		if err != nil {
			return nil, fmt.Errorf("sluice pool=%d: %w", size, err)
		}
		ps.label = fmt.Sprintf("sluice pool=%d", size)
		impls = append(impls, ps)
	}
	if leaseMillis > 0 {
		// One hot bucket in lease mode, every caller on it.
		lw := w
		lw.prefix, lw.buckets, lw.lease = w.prefix+"lease:", 1, leaseMillis
		ls, err := newSluice(ctx, opts, lw, client.WithTimeout(timeout))
		if err != nil {
			return nil, fmt.Errorf("sluice lease: %w", err)
		}
		ls.label = "sluice lease"
		impls = append(impls, ls)
	}
	for _, size := range pools {
		o := *opts
		o.PoolSize = size
		suffix := ""
		if size > 0 {
			suffix = fmt.Sprintf(" pool=%d", size)
		}
		impls = append(impls, newRedisRate(&o, w, "redis_rate"+suffix), newPlain(&o, w, "plain"+suffix),
			newUnbatched(ctx, &o, w, "unbatched acquire"+suffix))
	}
	return impls, nil
}

// unbatched is Sluice's own acquire sent alone, one call per round trip,
// each caller on its own pooled connection as the plain peer does: the
// same work in Redis as Sluice's, without its batching. Set beside
// Sluice, it tells what the engine adds or saves from what the script
// costs. It sends the command the client sends: FCALL of the acquire
// function where the library loads (Redis 7 and later), else EVALSHA.
type unbatched struct {
	rdb   *redis.Client
	label string
	keys  [][]string
	fcall bool
}

func newUnbatched(ctx context.Context, opts *redis.Options, w workload, label string) *unbatched {
	u := &unbatched{rdb: redis.NewClient(opts), label: label}
	ks := redisscript.Keyspace{Prefix: w.prefix}
	for i := range w.buckets {
		u.keys = append(u.keys, []string{ks.Bucket(w.bucketName(i))})
	}
	u.fcall = loadAcquireFunction(ctx, u.rdb)
	return u
}

// loadAcquireFunction loads the function library, as the client does at
// New, and reports whether acquires may FCALL it.
func loadAcquireFunction(ctx context.Context, rdb *redis.Client) bool {
	return redisscript.LoadFunctions(ctx, rdb) == nil
}

// acquireFunction is the name of the acquire's function.
var acquireFunction = redisscript.Functions.Function(redisscript.AcquireScript)

func (u *unbatched) name() string { return u.label }

func (u *unbatched) acquire(ctx context.Context, i int) (bool, error) {
	// The arguments the client sends: app, n and the answer's version.
	keys := u.keys[i%len(u.keys)]
	var v []int64
	var err error
	if u.fcall {
		v, err = u.rdb.FCall(ctx, acquireFunction, keys, benchApp, "1", redisscript.ProtocolReserve).Int64Slice()
	} else {
		v, err = redisscript.AcquireScript.Run(ctx, u.rdb, keys, benchApp, "1", redisscript.ProtocolReserve).Int64Slice()
	}
	if err != nil {
		return false, err
	}
	a, err := redisscript.AnswerOf(v)
	if err != nil {
		return false, err
	}
	return a.Code == redisscript.Allowed, nil
}

func (u *unbatched) close() error { return u.rdb.Close() }

type fallbackResult struct {
	calls                    int
	nsPerCall, allocsPerCall float64
	detect                   time.Duration
}

// measureFallback makes Redis die under a Sluice client with the local
// policy (through a proxy it then kills), waits for the first answer from
// the fallback, and times n acquires made from then on.
func measureFallback(ctx context.Context, addr string, w workload, n int) (*fallbackResult, error) {
	redis.SetLogger(quietLogger{}) // go-redis reports every refused dial otherwise
	px, err := startProxy(addr)
	if err != nil {
		return nil, err
	}
	defer px.kill()
	s, err := newSluice(ctx, &redis.Options{Addr: px.addr()}, w, client.WithFailurePolicy(client.FailLocal))
	if err != nil {
		return nil, err
	}
	defer s.close()
	// The local policy needs the config it last saw: take a token from each bucket.
	for i := range w.buckets {
		if _, err := s.acquire(ctx, i); err != nil {
			return nil, fmt.Errorf("acquire before the kill: %w", err)
		}
	}

	px.kill()
	killed := time.Now()
	var r fallbackResult
	for {
		res, err := s.lim.Acquire(ctx, s.names[0], 1)
		if err == nil && res.Fallback {
			r.detect = time.Since(killed)
			break
		}
		if time.Since(killed) > 10*time.Second {
			return nil, fmt.Errorf("no fallback answer 10 s after the kill (last: %+v, %v)", res, err)
		}
	}
	for i := range n / 10 { // warm the fallback path
		_, _ = s.lim.Acquire(ctx, s.names[i%len(s.names)], 1)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	fallbacks := 0
	for i := range n {
		res, _ := s.lim.Acquire(ctx, s.names[i%len(s.names)], 1)
		if res.Fallback {
			fallbacks++
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if fallbacks != n {
		return nil, fmt.Errorf("%d of %d acquires after the kill were not answered by the fallback", n-fallbacks, n)
	}
	r.calls = n
	r.nsPerCall = float64(elapsed.Nanoseconds()) / float64(n)
	r.allocsPerCall = float64(after.Mallocs-before.Mallocs) / float64(n)
	return &r, nil
}

// quietLogger drops go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
