package client_test

import (
	"context"
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
