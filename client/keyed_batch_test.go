package client_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// Keyed acquires that meet in a round trip go to Redis as one script call:
// Redis runs fewer calls than there were acquires, and every acquire still
// gets its own key's answer (each key allows exactly its capacity).
func TestKeyedAcquiresMerged(t *testing.T) {
	t.Parallel()
	e, _ := privateRedis(t)
	ctx := context.Background()
	e.defineKeyed(t, "api", 3, 1_000_000, 3600, "svc") // 3 per key, 1 an hour
	l := e.limiter(t, "svc", client.WithTimeout(10*time.Second))
	scripts := func() int64 {
		info, err := e.rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for line := range strings.SplitSeq(info, "\n") {
			for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
					v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
					n += v
				}
			}
		}
		return n
	}
	before := scripts()
	const goroutines, keys, each = 40, 200, 5
	allowed := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each * keys / goroutines {
				k := (g + i*goroutines) % keys
				res, err := l.AcquireKey(ctx, "api", "user-"+strconv.Itoa(k), 1)
				if err != nil || res.Fallback {
					t.Errorf("acquire: %+v %v", res, err)
					return
				}
				if res.Allowed {
					allowed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	calls := scripts() - before
	for k := range allowed {
		if got := allowed[k].Load(); got != 3 {
			t.Errorf("key %d: %d allowed of %d acquires, want its capacity 3", k, got, each)
		}
	}
	t.Logf("%d acquires in %d script calls", each*keys, calls)
	if calls >= each*keys {
		t.Errorf("%d script calls for %d acquires: none was merged", calls, each*keys)
	}
}
