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
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/slots"
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
				base := int64(-1) // the case's base of quota tables, in seconds
				buckets := map[string]*bucket{}
				keyed := fallbackKeyed{buckets: map[string]*keyedBucket{}, fresh: map[recentKey]bool{}}
				var local localSlots
				for i, s := range c.Steps {
					where := fmt.Sprintf("%s, step %d", c.Name, i+1)
					switch {
					case fallbackSlotApply(t, where, &local, s, now):
					case s["slot"] != nil:
						fallbackSlot(t, where, &local, s["slot"], s["want"], now)
					case s["apply"] != nil:
						fallbackApply(t, where, buckets, s["apply"], s["want"], now, &base)
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
// limit up to now and clamped to the new one. Of a quota it learns what
// an answer at now would teach: the quota, the length and end of the
// period containing now (its table's offsets count from *base, the
// case's first table's now, in seconds); a changed quota keeps its
// count when its period starts where it did.
func fallbackApply(t *testing.T, where string, buckets map[string]*bucket, step, want json.RawMessage, now int64, base *int64) {
	t.Helper()
	var a struct {
		Bucket   string  `json:"bucket"`
		Capacity int64   `json:"capacity"`
		Permits  string  `json:"permits"`
		Period   int64   `json:"period"`
		Shadow   bool    `json:"shadow"`
		Kind     string  `json:"kind"`
		BoundsS  []int64 `json:"bounds_s"`
		Reserve  int64   `json:"reserve"`
	}
	if err := json.Unmarshal(step, &a); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if a.Kind == redisscript.KindQuota {
		if *base < 0 {
			*base = now / 1_000_000
		}
		table := make([]int64, len(a.BoundsS))
		for i, o := range a.BoundsS {
			table[i] = *base + o
		}
		start, end, ok := quota.Find(table, now)
		if !ok {
			t.Fatalf("%s: the fallback learns a quota from an answer within its table; list the case's implementations", where)
		}
		var w string
		_ = json.Unmarshal(want, &w)
		b := buckets[a.Bucket]
		switch {
		case w == "created" && b == nil:
			b = &bucket{}
			buckets[a.Bucket] = b
		case (w == "updated" || w == "unchanged") && b != nil:
			if b.last != end*1_000_000 && b.qend.Load() != end*1_000_000 && b.last-b.cfg.Load().period*1_000_000 != start*1_000_000 {
				b.tokens, b.last = 0, 0 // another period: the count starts again
			}
		default:
			t.Fatalf("%s: the fallback cannot express the apply outcome %s; list the case's implementations", where, want)
		}
		if b.last != 0 {
			b.last = end * 1_000_000 // the period is the same; its end may have moved
		}
		b.qend.Store(end * 1_000_000)
		b.cfg.Store(&learned{capacity: a.Capacity, period: end - start, shadow: a.Shadow})
		return
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

// fallbackSlotApply learns an apply or keyed apply of a concurrency limit
// as an answer of Redis teaches it (the limit's own limit, lease time and
// shadow mode), and reports whether the step was one.
func fallbackSlotApply(t *testing.T, where string, ls *localSlots, s map[string]json.RawMessage, now int64) bool {
	t.Helper()
	step := s["apply"]
	if step == nil {
		step = s["apply_keyed"]
	}
	if step == nil {
		return false
	}
	var a struct {
		Bucket   string `json:"bucket"`
		Capacity int64  `json:"capacity"`
		Shadow   bool   `json:"shadow"`
		Kind     string `json:"kind"`
		SlotMS   int64  `json:"slot_ms"`
	}
	if err := json.Unmarshal(step, &a); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if a.Kind != "concurrency" {
		return false
	}
	var w string
	if json.Unmarshal(s["want"], &w) != nil || w != "created" {
		t.Fatalf("%s: the fallback cannot express the apply outcome %s; list the case's implementations", where, s["want"])
	}
	ls.learn(a.Bucket, "", redisscript.SlotAnswer{Code: redisscript.Allowed, Limit: a.Capacity, SlotMillis: a.SlotMS,
		Shadow: a.Shadow}, now)
	return true
}

// fallbackSlot runs a slot step through FailLocal's local slots (one
// instance), with the table's slot ids.
func fallbackSlot(t *testing.T, where string, ls *localSlots, step, want json.RawMessage, now int64) {
	t.Helper()
	var q struct {
		Bucket string  `json:"bucket"`
		Key    *string `json:"key"`
		App    string  `json:"app"`
		Op     string  `json:"op"`
		ID     string  `json:"id"`
	}
	if err := json.Unmarshal(step, &q); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	where = fmt.Sprintf("%s: slot %s %s %q", where, q.Bucket, q.Op, q.ID)
	var w struct {
		Code    string          `json:"code"`
		InUse   json.RawMessage `json:"in_use"`
		Limit   json.RawMessage `json:"limit"`
		RetryUS json.RawMessage `json:"retry_us"`
		SlotMS  json.RawMessage `json:"slot_ms"`
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	ref := &slotRef{name: q.Bucket, id: q.ID}
	if q.Key != nil {
		ref.key = *q.Key
	}
	var res SlotResult
	switch q.Op {
	case "take":
		var ok bool
		if res, ok = ls.take(ref, 1, now); !ok {
			t.Fatalf("%s: the fallback refuses a limit it never learned; list the case's implementations", where)
		}
	case "release":
		res = ls.do(ref, slots.Release, 1, now)
	case "renew":
		res = ls.do(ref, slots.Renew, 1, now)
	default:
		t.Fatalf("%s: the fallback cannot send the op %q; list the case's implementations", where, q.Op)
	}
	code := "denied"
	switch {
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
		{"in_use", res.InUse, w.InUse}, {"limit", res.Limit, w.Limit}, {"retry_us", res.RetryAfter.Microseconds(), w.RetryUS},
		{"slot_ms", res.Lease.Milliseconds(), w.SlotMS},
	} {
		lo, hi := wantBounds(t, where, f.want)
		if f.got < lo || f.got > hi {
			t.Errorf("%s: %s = %d, want %s", where, f.name, f.got, f.want)
		}
	}
}
