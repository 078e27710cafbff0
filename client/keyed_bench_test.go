package client_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// BenchmarkAcquireKey measures AcquireKey on the shared test Redis at 1,
// 10 and 100 goroutines over 10,000 keys of one keyed bucket, each
// allowing every call; compare with BenchmarkAcquire (goal: at least 0.9x
// its throughput at 100 goroutines).
func BenchmarkAcquireKey(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	for _, g := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			e := sharedRedis(b)
			e.defineKeyed(b, "bench", 1_000_000_000, 1_000_000, 1, "svc")
			l := e.limiter(b, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
			ctx := context.Background()
			if _, err := l.AcquireKey(ctx, "bench", keys[0], 1); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if g == 1 {
				i := 0
				for b.Loop() {
					i++
					res, err := l.AcquireKey(ctx, "bench", keys[i%len(keys)], 1)
					if err != nil || !res.Allowed || res.Fallback {
						b.Fatalf("acquire: %+v %v", res, err)
					}
				}
				return
			}
			var next atomic.Int64
			b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(997))
				for pb.Next() {
					i++
					res, err := l.AcquireKey(ctx, "bench", keys[i%len(keys)], 1)
					if err != nil || !res.Allowed || res.Fallback {
						b.Errorf("acquire: %+v %v", res, err)
						return
					}
				}
			})
		})
	}
}
