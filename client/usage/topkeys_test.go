package usage

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
	readusage "github.com/sluicehq/sluice/internal/usage"
)

// zipf draws n keys of a Zipf workload over a million keys (s = 1.1) and
// returns them with the exact top 10, most first.
func zipf(n int) (draws []uint32, top []counter) {
	const keys = 1_000_000
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, keys-1)
	counts := make([]int64, keys)
	draws = make([]uint32, n)
	for i := range draws {
		k := z.Uint64()
		draws[i] = uint32(k)
		counts[k]++
	}
	all := make([]counter, 0, keys)
	for k, c := range counts {
		if c > 0 {
			all = append(all, counter{key: keyName(uint32(k)), count: c})
		}
	}
	slices.SortFunc(all, func(a, b counter) int { return cmp.Compare(b.count, a.count) })
	return draws, all[:10]
}

func keyName(k uint32) string { return "user:" + strconv.FormatUint(uint64(k), 10) }

// A Space-Saving summary of TopKeyCounters counters finds the exact top
// 10 of a skewed workload over a million keys, each within its error bound.
func TestSummaryZipfTop10(t *testing.T) {
	const n = 1_000_000
	draws, want := zipf(n)
	s := newSummary(TopKeyCounters)
	for _, k := range draws {
		s.add(keyName(k), 1)
	}
	if len(s.heap) > TopKeyCounters {
		t.Fatalf("summary holds %d counters; want at most %d", len(s.heap), TopKeyCounters)
	}
	got := s.top()[:10]
	for i, w := range want {
		g := got[i]
		if g.key != w.key {
			t.Fatalf("rank %d: %s (%d); want %s (%d)\ngot  %v\nwant %v", i+1, g.key, g.count, w.key, w.count, got, want)
		}
		if g.count < w.count || g.count-g.err > w.count || g.err > n/TopKeyCounters {
			t.Fatalf("%s: count %d err %d; true count %d, bound n/k = %d", g.key, g.count, g.err, w.count, n/TopKeyCounters)
		}
	}
}

// The summary keeps every key counted more than n/k times, and a new
// key takes the smallest counter.
func TestSummaryEviction(t *testing.T) {
	s := newSummary(3)
	for _, k := range strings.Split("a a a a b b b c c d", " ") {
		s.add(k, 1)
	}
	got := s.top()
	// d replaced c (count 2): its count 3 carries an error of 2.
	if len(got) != 3 || got[0] != (counter{"a", 4, 0}) || got[1] != (counter{"b", 3, 0}) || got[2] != (counter{"d", 3, 2}) {
		t.Fatalf("top = %v", got)
	}
}

// writeCounter counts, per flush pipeline, the commands on each top-keys
// set.
type writeCounter struct {
	mu     sync.Mutex
	prefix string
	max    int // most commands on one bucket's top-keys sets in one pipeline
}

func (w *writeCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (w *writeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (w *writeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if len(c.Args()) > 1 {
				if k, ok := c.Args()[1].(string); ok && strings.HasPrefix(k, w.prefix) {
					n++
				}
			}
		}
		w.mu.Lock()
		w.max = max(w.max, n)
		w.mu.Unlock()
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*writeCounter)(nil)

// Through a Recorder and its flushes to a real Redis: the console's
// reader gets the exact top 10 denied keys of a Zipf workload over a
// million keys, every flush writes a bounded number of commands per
// bucket whatever the number of keys, and the sets stay trimmed.
func TestTopKeysZipfThroughRedis(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	wc := &writeCounter{prefix: prefix + "{login}:"}
	rdb.AddHook(wc)
	ctx := context.Background()
	rec, err := NewRecorder(rdb, "web", WithKeyPrefix(prefix), WithFlushInterval(time.Hour),
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()

	const n, flushes = 1_000_000, 20
	draws, want := zipf(n)
	now := time.Now()
	for i, k := range draws {
		rec.AddKey("login", keyName(k), now, false, 1)
		if i%7 == 0 {
			rec.AddKey("login", keyName(k), now, true, 1)
		}
		if (i+1)%(n/flushes) == 0 {
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two sets (denied, taken) of one bucket: each flush writes at most
	// TopKeyCounters increments, a trim and an expiry per set.
	if limit := 2 * (TopKeyCounters + 2); wc.max == 0 || wc.max > limit {
		t.Fatalf("a flush wrote %d commands to the bucket's top keys; want 1 to %d", wc.max, limit)
	}
	for _, key := range []string{ks.DeniedKeys("login", now.Unix()/3600), ks.TakenKeys("login", now.Unix()/3600)} {
		if c, err := rdb.ZCard(ctx, key).Result(); err != nil || c == 0 || c > redisscript.TopKeysKept {
			t.Fatalf("%s holds %d keys, %v; want 1 to %d", key, c, err, redisscript.TopKeysKept)
		}
	}
	top, err := readusage.NewReader(rdb, ks).TopKeys(ctx, "login", readusage.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Denied) != 10 {
		t.Fatalf("top denied = %v", top.Denied)
	}
	for i, w := range want {
		g := top.Denied[i]
		// Each flush's summary is off by at most its count / k.
		if g.Key != w.key || g.Count < w.count-n/TopKeyCounters || g.Count > w.count+n/TopKeyCounters {
			t.Fatalf("rank %d: %v; want %s (%d)\ngot  %v\nwant %v", i+1, g, w.key, w.count, top.Denied, want)
		}
	}
	if len(top.Taken) != 10 || top.Taken[0].Key != want[0].key {
		t.Fatalf("top taken = %v; want %s first", top.Taken, want[0].key)
	}
	if _, err := readusage.NewReader(rdb, ks).TopKeys(ctx, "Bad Name", readusage.Hour, 3); err == nil {
		t.Fatal("invalid bucket name accepted")
	}
	if _, err := readusage.NewReader(rdb, ks).TopKeys(ctx, "login", readusage.Week, 3); err == nil {
		t.Fatal("week window accepted")
	}
}
