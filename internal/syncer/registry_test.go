package syncer

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// scanCounter counts SCAN commands, pipelined or not.
type scanCounter struct{ n atomic.Int64 }

func (s *scanCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scanCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "scan") {
			s.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (s *scanCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestReconcileReadsTheRegistry: with many key states of keyed buckets in
// Redis, a reconcile reads the registry of bucket hashes and sends no
// SCAN; it still finds a deleted bucket's hash, and a flushed registry
// is rebuilt by one full scan.
func TestReconcileReadsTheRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})
	for i := range 3 {
		e.create(t, fmt.Sprintf("plain-%d", i), 5, "1/s")
	}
	syncOnce(t, w)
	// Key states of a keyed bucket: keys the reconcile must not walk.
	pipe := e.rdb.Pipeline()
	for i := range 5000 {
		pipe.Set(ctx, e.ks.Keyed("many", fmt.Sprint(i)).State, "1 1", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	sc := &scanCounter{}
	e.rdb.AddHook(sc)
	if _, err := w.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := w.Reconcile(ctx)
	if err != nil || rep.Hashes != 3 || rep.Repaired() != 0 {
		t.Fatalf("reconcile: %+v, %v; want 3 hashes, nothing to repair", rep, err)
	}
	if n := sc.n.Load(); n != 0 {
		t.Fatalf("%d SCAN commands; want none while the registry exists", n)
	}
	// A hash the registry names but MySQL does not have goes.
	extra := redisscript.Config{Name: "gone", ID: 999, Version: 1, Capacity: 1, PermitsMicro: 1, PeriodSeconds: 1, Apps: []string{"x"}}
	if _, err := w.applyConfig(ctx, false, extra, false); err != nil {
		t.Fatal(err)
	}
	if rep, err := w.Reconcile(ctx); err != nil || rep.Extra != 1 {
		t.Fatalf("reconcile with an extra hash: %+v, %v", rep, err)
	}
	if ok, err := e.rdb.SIsMember(ctx, e.ks.BucketRegistry(), "gone").Result(); err != nil || ok {
		t.Fatalf("the deleted hash is still registered: %v %v", ok, err)
	}
	// Without the registry: one full scan, which registers the hashes.
	if err := e.rdb.Del(ctx, e.ks.BucketRegistry()).Err(); err != nil {
		t.Fatal(err)
	}
	if rep, err := w.Reconcile(ctx); err != nil || rep.Hashes != 3 || sc.n.Load() == 0 {
		t.Fatalf("reconcile without a registry: %+v, %v, %d scans", rep, err, sc.n.Load())
	}
	if n, err := e.rdb.SCard(ctx, e.ks.BucketRegistry()).Result(); err != nil || n != 4 { // 3 names and ""
		t.Fatalf("registry rebuilt with %d members, %v; want 4", n, err)
	}
}

// beforePipeline runs a function once, just before the next pipeline is
// sent.
type beforePipeline struct{ fn atomic.Pointer[func()] }

func (h *beforePipeline) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *beforePipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *beforePipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if fn := h.fn.Swap(nil); fn != nil {
			(*fn)()
		}
		return next(ctx, cmds)
	}
}

// TestRegistryKeepsHashesWrittenDuringAnUnregister: the delete of an old
// incarnation unregisters the name once it finds no hash, while a worker
// writes the new incarnation's hash (registered first, written after). An
// unregister that runs between the two must not leave the new hash out of
// the registry, where the reconcile would never find it should it become
// an extra.
func TestRegistryKeepsHashesWrittenDuringAnUnregister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("bucket", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		w := e.worker(Config{})
		e.create(t, "reg", 5, "1/s")
		var fired atomic.Bool
		w.beforeWrite = func(name string) {
			if fired.CompareAndSwap(false, true) {
				if err := w.unregister(ctx, name); err != nil {
					t.Error(err)
				}
			}
		}
		syncOnce(t, w)
		if !fired.Load() || !e.read(t, "reg").Exists {
			t.Fatalf("hook fired %v; the hash was not written", fired.Load())
		}
		if ok, err := e.rdb.SIsMember(ctx, e.ks.BucketRegistry(), "reg").Result(); err != nil || !ok {
			t.Fatalf("the new hash is not registered: %v %v", ok, err)
		}
	})
	t.Run("keyed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nil)
		w := e.worker(Config{})
		e.createKeyed(t, "regk", 5, "1/s")
		other := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		defer other.Close()
		h := &beforePipeline{}
		e.rdb.AddHook(h)
		// The groups' pipeline is the first one the upsert sends, after it
		// registered the name; an old incarnation's delete runs before it.
		var fired atomic.Bool
		fn := func() {
			fired.Store(true)
			if _, err := redisscript.DeleteKeyed(ctx, other, e.ks, "regk", 0, 1); err != nil {
				t.Error(err)
			}
		}
		h.fn.Store(&fn)
		syncOnce(t, w)
		if !fired.Load() || len(e.keyedDiff(t, "regk")) > 0 {
			t.Fatalf("hook fired %v; groups differ: %v", fired.Load(), e.keyedDiff(t, "regk"))
		}
		if ok, err := e.rdb.SIsMember(ctx, e.ks.KeyedRegistry(), "regk").Result(); err != nil || !ok {
			t.Fatalf("the new groups are not registered: %v %v", ok, err)
		}
	})
}
