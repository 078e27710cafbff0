package usage_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// BenchmarkAcquire compares parallel Acquire on the shared test Redis with
// usage counting off and on; the goal is on within 10% of off. Run both
// several times in turn (-count) on a quiet machine and compare medians.
func BenchmarkAcquire(b *testing.B) {
	for _, counting := range []bool{false, true} {
		name := "counting=off"
		if counting {
			name = "counting=on"
		}
		b.Run(name, func(b *testing.B) {
			rdb, prefix := testenv.Redis(b)
			ks := redisscript.Keyspace{Prefix: prefix}
			buckets := []string{"b0", "b1", "b2", "b3"}
			for _, n := range buckets {
				define(b, rdb, ks, n, 1_000_000_000, 1_000_000_000_000_000, 1, "svc")
			}
			opts := []client.Option{client.WithKeyPrefix(prefix), client.WithFailurePolicy(client.FailClosed),
				client.WithTimeout(5 * time.Second)}
			var rec *usage.Recorder
			if counting {
				var err error
				rec, err = usage.NewRecorder(rdb, "svc", usage.WithKeyPrefix(prefix))
				if err != nil {
					b.Fatal(err)
				}
				defer rec.Close()
				opts = append(opts, client.WithObserver(rec.Observe))
			}
			lim, err := client.New(rdb, "svc", opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					res, err := lim.Acquire(ctx, buckets[i%len(buckets)], 1)
					if err != nil || !res.Allowed || res.Fallback {
						b.Errorf("acquire: %+v %v", res, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkObserve is the cost Observe adds to each Acquire, alone.
func BenchmarkObserve(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	rec, err := usage.NewRecorder(rdb, "svc", usage.WithKeyPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	d := client.Decision{Bucket: "bench", N: 1, Result: client.Result{Allowed: true}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec.Observe(d)
		}
	})
}
