package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// BenchmarkAcquire measures Acquire on the shared test Redis at 1, 4, 10 and
// 100 concurrent goroutines (at 4, 10 and 100 when GOMAXPROCS divides them).
// Compare allocs/op with the goal of at most 5.
func BenchmarkAcquire(b *testing.B) {
	for _, g := range []int{1, 4, 10, 100} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			e := sharedRedis(b)
			e.define(b, "bench", 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc")
			l := e.limiter(b, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
			ctx := context.Background()
			if _, err := l.Acquire(ctx, "bench", 1); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if g == 1 {
				// RunParallel starts at least GOMAXPROCS goroutines; a lone
				// caller takes another path (its own round trip), so measure
				// it on this one.
				for b.Loop() {
					res, err := l.Acquire(ctx, "bench", 1)
					if err != nil || !res.Allowed || res.Fallback {
						b.Fatalf("acquire: %+v %v", res, err)
					}
				}
				return
			}
			b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := l.Acquire(ctx, "bench", 1)
					if err != nil || !res.Allowed || res.Fallback {
						b.Errorf("acquire: %+v %v", res, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkAcquireFallback measures an Acquire answered by FailLocal while
// Redis is dead (the breaker is open).
func BenchmarkAcquireFallback(b *testing.B) {
	e, srv := privateRedis(b)
	e.define(b, "bench", 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc")
	l := e.limiter(b, "svc", client.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	if _, err := l.Acquire(ctx, "bench", 1); err != nil {
		b.Fatal(err)
	}
	srv.Kill()
	for {
		if res, _ := l.Acquire(ctx, "bench", 1); res.Fallback {
			break
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := l.Acquire(ctx, "bench", 1)
		if err != nil || !res.Fallback {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// BenchmarkAcquireUnbatched is the baseline the batching is measured
// against: one plain EVALSHA round trip per call from each goroutine.
func BenchmarkAcquireUnbatched(b *testing.B) {
	for _, g := range []int{1, 4, 100} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			e := sharedRedis(b)
			e.define(b, "bench", 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc")
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					a, err := redisscript.Acquire(ctx, e.rdb, e.ks(), "bench", "svc", 1)
					if err != nil || a.Code != redisscript.Allowed {
						b.Errorf("acquire: %+v %v", a, err)
						return
					}
				}
			})
		})
	}
}
