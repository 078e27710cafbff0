package client_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// BenchmarkAcquireAll measures one AcquireAll of three buckets on the
// shared test Redis, from one goroutine.
func BenchmarkAcquireAll(b *testing.B) {
	e := sharedRedis(b)
	for _, name := range []string{"x", "y", "z"} {
		e.define(b, name, 1_000_000_000, 1_000_000_000*1_000_000, 1, "svc")
	}
	l := e.limiter(b, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	ctx := context.Background()
	reqs := []client.Request{{Bucket: "x", N: 1}, {Bucket: "y", N: 2}, {Bucket: "z", N: 3}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := l.AcquireAll(ctx, reqs)
		if err != nil || !res.Allowed {
			b.Fatalf("acquire all: %+v %v", res, err)
		}
	}
}

// BenchmarkSlot measures a TakeSlot and its Release on the shared test
// Redis, from 1 goroutine and from 10: two script calls per iteration,
// through the same batcher as acquires.
func BenchmarkSlot(b *testing.B) {
	for _, g := range []int{1, 10} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			e := sharedRedis(b)
			e.defineSlots(b, "bench-slots", 1_000_000, time.Minute, "svc")
			l := e.limiter(b, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
			ctx := context.Background()
			pair := func() error {
				s, err := l.TakeSlot(ctx, "bench-slots")
				if err != nil || !s.Allowed || s.Fallback {
					return fmt.Errorf("take: %+v %v", s.SlotResult, err)
				}
				if res, err := s.Release(ctx); err != nil || !res.Allowed {
					return fmt.Errorf("release: %+v %v", res, err)
				}
				return nil
			}
			b.ReportAllocs()
			if g == 1 {
				for b.Loop() {
					if err := pair(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := pair(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
