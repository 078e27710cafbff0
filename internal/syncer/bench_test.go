package syncer

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// BenchmarkReconcile reconciles 10,000 buckets: "in-sync" finds nothing
// to repair (one read per bucket), "after-flush" recreates every hash.
func BenchmarkReconcile(b *testing.B) {
	_, rdb := privateRedis(b)
	e := newEnv(b, rdb)
	const n = 10_000
	e.seed(b, "bench", n)
	w := e.worker(Config{})
	ctx := context.Background()
	if _, err := w.Reconcile(ctx); err != nil {
		b.Fatal(err)
	}

	b.Run("in-sync", func(b *testing.B) {
		for b.Loop() {
			rep, err := w.Reconcile(ctx)
			if err != nil || rep.Repaired() != 0 || rep.Definitions != n {
				b.Fatalf("%+v %v", rep, err)
			}
		}
		b.ReportMetric(float64(n), "buckets/op")
	})
	b.Run("after-flush", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			rep, err := w.Reconcile(ctx)
			if err != nil || rep.Missing != n {
				b.Fatalf("%+v %v", rep, err)
			}
		}
		b.ReportMetric(float64(n), "buckets/op")
	})
}

func TestReconcileCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Redis Cluster")
	}
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb := c.Client(t)
	e := newEnv(t, rdb)
	names := e.seed(t, "cl", 300)
	w := e.worker(Config{})
	ctx := context.Background()
	rep, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != len(names) {
		t.Fatalf("first reconcile: %+v, want %d missing", rep, len(names))
	}
	// The hashes spread over every master, and the scan sees them all.
	perNode := map[string]int64{}
	var mu sync.Mutex
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		perNode[node.Options().Addr] = n
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for addr, n := range perNode {
		if n < 50 {
			t.Fatalf("master %s holds %d keys; want the buckets spread over all masters: %v", addr, n, perNode)
		}
	}
	// Flush one master and plant an extra: one reconcile repairs both.
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		if node.Options().Addr == c.Addrs[0] {
			return node.FlushAll(ctx).Err()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, e.ks.Bucket("stray"), redisscript.FieldID, "1").Err(); err != nil {
		t.Fatal(err)
	}
	// As a worker's write leaves it: named in the registry of bucket hashes.
	if err := rdb.SAdd(ctx, e.ks.BucketRegistry(), "stray").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err = w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing < 50 || rep.Extra != 1 {
		t.Fatalf("after flushing one master: %+v", rep)
	}
	if d := e.diff(t); len(d) > 0 {
		t.Fatalf("cluster differs after reconcile: %v", d[:min(5, len(d))])
	}
}
