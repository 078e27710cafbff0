package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestConformanceFallback runs the cases of docs/conformance.json that
// apply to the fallback (the arithmetic and shadow cases; docs/protocol.md,
// "Conformance table") through FailLocal's local bucket: its decision
// (localAt) with one instance, on a clock the table moves; keyed buckets
// through the per-key local buckets keyFallback uses, with the bucket's
// own limit and shadow mode as an answer teaches them. A bucket it
// learned starts full here, as the table's buckets do (the real one starts
// empty at an outage and fills while the policy answers). Subtests are
// named fallback/<case>; a case that applies to the fallback and holds a
// step it cannot run fails.
func TestConformanceFallback(t *testing.T) {
	data, err := os.ReadFile("../docs/conformance.json")
	if err != nil {
		t.Fatal(err)
	}
	var tab struct {
		Cases []struct {
			Name            string                       `json:"name"`
			Implementations []string                     `json:"implementations"`
			Steps           []map[string]json.RawMessage `json:"steps"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &tab); err != nil {
		t.Fatal(err)
	}
	ran := 0
	t.Run("fallback", func(t *testing.T) {
		for _, c := range tab.Cases {
			if len(c.Implementations) > 0 && !slices.Contains(c.Implementations, "fallback") {
				continue
			}
			ran++
			t.Run(c.Name, func(t *testing.T) {
				now := int64(1_000_000)
				buckets := map[string]*bucket{}
				keyed := fallbackKeyed{buckets: map[string]*keyedBucket{}, fresh: map[recentKey]bool{}}
				for i, s := range c.Steps {
					where := fmt.Sprintf("%s, step %d", c.Name, i+1)
					switch {
					case s["apply"] != nil:
						fallbackApply(t, where, buckets, s["apply"], s["want"], now)
					case s["apply_keyed"] != nil:
						keyed.apply(t, where, s["apply_keyed"], s["want"], now)
					case s["acquire_key"] != nil:
						keyed.acquire(t, where, s["acquire_key"], s["want"], now)
					case s["wait_us"] != nil:
						var us int64
						if err := json.Unmarshal(s["wait_us"], &us); err != nil {
							t.Fatalf("%s: %v", where, err)
						}
						now += us
					case s["acquire"] != nil:
						fallbackAcquire(t, where, buckets, s["acquire"], s["want"], now)
					default:
						t.Fatalf("%s: the fallback cannot run this step (%v); list the case's implementations", where, keys(s))
					}
				}
			})
		}
	})
	if ran == 0 {
		t.Fatal("no case of the table applies to the fallback")
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// fallbackApply is what the fallback learns of an apply: the limit and
// shadow mode; a changed bucket keeps its tokens, refilled at the old
// limit up to now and clamped to the new one.
func fallbackApply(t *testing.T, where string, buckets map[string]*bucket, step, want json.RawMessage, now int64) {
	t.Helper()
	var a struct {
		Bucket   string `json:"bucket"`
		Capacity int64  `json:"capacity"`
		Permits  string `json:"permits"`
		Period   int64  `json:"period"`
		Shadow   bool   `json:"shadow"`
		Reserve  int64  `json:"reserve"`
	}
	if err := json.Unmarshal(step, &a); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	pm, err := redisscript.ParsePermits(a.Permits)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var w string
	_ = json.Unmarshal(want, &w)
	b := buckets[a.Bucket]
	switch {
	case w == "created" && b == nil:
		b = &bucket{tokens: float64(a.Capacity), last: now}
		buckets[a.Bucket] = b
	case (w == "updated" || w == "unchanged") && b != nil:
		b.tokens, _ = localShare(b.cfg.Load(), 1).Refill(b.tokens, b.last, now)
		b.last = now
	default:
		t.Fatalf("%s: the fallback cannot express the apply outcome %s; list the case's implementations", where, want)
	}
	b.cfg.Store(&learned{capacity: a.Capacity, permitsMicro: pm, period: a.Period, shadow: a.Shadow, reserve: a.Reserve})
}

func fallbackAcquire(t *testing.T, where string, buckets map[string]*bucket, step, want json.RawMessage, now int64) {
	t.Helper()
	var q struct {
		Bucket   string `json:"bucket"`
		App      string `json:"app"`
		N        string `json:"n"`
		Critical bool   `json:"critical"`
	}
	if err := json.Unmarshal(step, &q); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	where = fmt.Sprintf("%s: acquire %s %q n=%q", where, q.Bucket, q.App, q.N)
	n, err := strconv.ParseInt(q.N, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != q.N {
		return // an int64 cannot be sent as "1e3"
	}
	b := buckets[q.Bucket]
	if b == nil {
		t.Fatalf("%s: the fallback refuses a bucket it never learned; list the case's implementations", where)
	}
	checkFallback(t, where, b, n, q.Critical, want, now)
}

// checkFallback takes n tokens, critical or not, from the local bucket b
// at now and checks the answer against want.
func checkFallback(t *testing.T, where string, b *bucket, n int64, critical bool, want json.RawMessage, now int64) {
	t.Helper()
	var w struct {
		Code      string          `json:"code"`
		Remaining json.RawMessage `json:"remaining"`
		RetryUS   json.RawMessage `json:"retry_us"`
		ResetUS   json.RawMessage `json:"reset_us"`
		Capacity  json.RawMessage `json:"capacity"`
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	// The policy answers from the start of time: the bucket fills all along.
	res, err := b.localAt(b.cfg.Load(), 1, n, now, 0, time.Second, critical)
	code := "denied"
	switch {
	case errors.Is(err, ErrExceedsCapacity):
		code = "exceeds_capacity"
		res = Result{Limit: res.Limit}
	case err != nil:
		t.Fatalf("%s: %v", where, err)
	case res.WouldDeny:
		code = "would_deny"
	case res.Allowed:
		code = "allowed"
	}
	if code != w.Code {
		t.Errorf("%s: %s (%+v), want %s", where, code, res, w.Code)
		return
	}
	for _, f := range []struct {
		name string
		got  int64
		want json.RawMessage
	}{
		{"remaining", res.Remaining, w.Remaining}, {"retry_us", res.RetryAfter.Microseconds(), w.RetryUS},
		{"reset_us", res.ResetAfter.Microseconds(), w.ResetUS}, {"capacity", res.Limit, w.Capacity},
	} {
		lo, hi := wantBounds(t, where, f.want)
		if f.got < lo || f.got > hi {
			t.Errorf("%s: %s = %d, want %s", where, f.name, f.got, f.want)
		}
	}
}

// wantBounds reads a wanted number: exact, or {"min": a, "max": b}.
func wantBounds(t *testing.T, where string, v json.RawMessage) (int64, int64) {
	t.Helper()
	var x int64
	if json.Unmarshal(v, &x) == nil {
		return x, x
	}
	var r struct{ Min, Max *int64 }
	if err := json.Unmarshal(v, &r); err != nil || r.Min == nil || r.Max == nil {
		t.Fatalf("%s: bad number %s", where, v)
	}
	return *r.Min, *r.Max
}

// fallbackKeyed is what the fallback keeps of keyed buckets: the bucket's
// own limit with its shadow mode (keyedBucket.def, what an answer with the
// bucket's limit teaches) and a local bucket per key (recentKeys, as
// keyFallback uses them). A key the table has not used yet starts full
// here, as a key does in Redis.
type fallbackKeyed struct {
	buckets map[string]*keyedBucket
	recent  recentKeys
	fresh   map[recentKey]bool // keys given their full bucket
}

func (f *fallbackKeyed) apply(t *testing.T, where string, step, want json.RawMessage, now int64) {
	t.Helper()
	var a struct {
		Bucket   string `json:"bucket"`
		Capacity int64  `json:"capacity"`
		Permits  string `json:"permits"`
		Period   int64  `json:"period"`
		Shadow   bool   `json:"shadow"`
		Reserve  int64  `json:"reserve"`
	}
	if err := json.Unmarshal(step, &a); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	pm, err := redisscript.ParsePermits(a.Permits)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var w string
	_ = json.Unmarshal(want, &w)
	kb := f.buckets[a.Bucket]
	switch {
	case w == "created" && kb == nil:
		kb = &keyedBucket{}
		f.buckets[a.Bucket] = kb
	case (w == "updated" || w == "unchanged") && kb != nil:
		// Each key's tokens refill at the old limit up to now.
		for k := range f.fresh {
			if k.bucket == a.Bucket {
				b := f.recent.get(nil, k.bucket, k.key, kb.def.Load())
				b.tokens, _ = localShare(b.cfg.Load(), 1).Refill(b.tokens, b.last, now)
				b.last = now
			}
		}
	default:
		t.Fatalf("%s: the fallback cannot express the keyed apply outcome %s; list the case's implementations", where, want)
	}
	kb.def.Store(&learned{capacity: a.Capacity, permitsMicro: pm, period: a.Period, shadow: a.Shadow, reserve: a.Reserve})
}

func (f *fallbackKeyed) acquire(t *testing.T, where string, step, want json.RawMessage, now int64) {
	t.Helper()
	var q struct {
		Bucket   string `json:"bucket"`
		Key      string `json:"key"`
		App      string `json:"app"`
		N        string `json:"n"`
		Critical bool   `json:"critical"`
	}
	if err := json.Unmarshal(step, &q); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	where = fmt.Sprintf("%s: acquire %s[%q] %q n=%q", where, q.Bucket, q.Key, q.App, q.N)
	n, err := strconv.ParseInt(q.N, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != q.N {
		return // an int64 cannot be sent as "1e3"
	}
	kb := f.buckets[q.Bucket]
	if kb == nil {
		t.Fatalf("%s: the fallback refuses a bucket it never learned; list the case's implementations", where)
	}
	b := f.recent.get(nil, q.Bucket, q.Key, kb.def.Load())
	if k := (recentKey{q.Bucket, q.Key}); !f.fresh[k] {
		f.fresh[k] = true
		b.tokens, b.last = float64(b.cfg.Load().capacity), now
	}
	checkFallback(t, where, b, n, q.Critical, want, now)
}
