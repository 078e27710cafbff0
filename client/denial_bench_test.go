package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// BenchmarkAcquireDenied measures an Acquire of a bucket Redis denied,
// answered by the denial cache (1 token an hour: every call is denied).
func BenchmarkAcquireDenied(b *testing.B) {
	e := sharedRedis(b)
	e.define(b, "dry", 1, slow, 3600, "svc")
	l := e.limiter(b, "svc", client.WithDenialCache(time.Hour))
	ctx := context.Background()
	for range 2 { // the token, then Redis's denial
		if _, err := l.Acquire(ctx, "dry", 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, err := l.Acquire(ctx, "dry", 1); err != nil || res.Allowed {
				b.Errorf("acquire: %+v %v", res, err)
				return
			}
		}
	})
	b.StopTimer()
	if n := l.Stats().CachedDenials; n < uint64(b.N) {
		b.Fatalf("%d of %d calls answered by the cache", n, b.N)
	}
}
