// Package usage reads the usage counts that clients write to Redis (see
// package client/usage): allowed and denied acquires per bucket, app and
// minute, with hourly rollups, and the calls the clients' failure policy
// answered instead of Redis. The console draws them (package chart) on a
// bucket's page and lists the buckets that denied the most.
package usage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// Window is the span of a Series.
type Window int

// Windows of a Series and their resolution.
const (
	// Hour is the last 60 minutes, one point per minute.
	Hour Window = iota + 1
	// Day is the last 24 clock hours, one point per hour: read from the
	// 24 hour hashes, not 1,440 minute hashes.
	Day
	// Week is the last 7 days, one point per hour.
	Week
)

// windows holds what each Window is: its name, the span it covers and the
// span of one of its points.
var windows = [...]struct {
	name       string
	span, step time.Duration
}{
	Hour: {"hour", time.Hour, time.Minute},
	Day:  {"day", 24 * time.Hour, time.Hour},
	Week: {"week", 7 * 24 * time.Hour, time.Hour},
}

func (w Window) valid() bool { return w >= Hour && int(w) < len(windows) }

// String returns "hour", "day" or "week", the form ParseWindow reads.
func (w Window) String() string {
	if !w.valid() {
		return "Window(" + strconv.Itoa(int(w)) + ")"
	}
	return windows[w].name
}

// ParseWindow reads "hour", "day" or "week"; an empty string is Hour.
// Anything else is an error matching errs.ErrInvalid.
func ParseWindow(s string) (Window, error) {
	if s == "" {
		return Hour, nil
	}
	for w := Hour; w.valid(); w++ {
		if windows[w].name == s {
			return w, nil
		}
	}
	v := &errs.Validation{}
	v.Add("window", "must be hour, day or week")
	return 0, v
}

// Duration is the span the window covers.
func (w Window) Duration() time.Duration {
	if !w.valid() {
		return 0
	}
	return windows[w].span
}

// Step is the span of one point of the window.
func (w Window) Step() time.Duration {
	if !w.valid() {
		return 0
	}
	return windows[w].step
}

// Series is the usage of one bucket over a window, per app.
type Series struct {
	// Bucket is the bucket's name.
	Bucket string
	// Window is the span read; Step the span of each point.
	Window Window
	Step   time.Duration
	// Times holds the start of each point, oldest first, in UTC. The last
	// point is the period in progress, so it is usually partial.
	Times []time.Time
	// Apps holds one entry per app with counts in the window, busiest first.
	Apps []AppSeries
	// Allowed and Denied are the totals of every app over the window.
	Allowed, Denied int64
	// WouldDeny is the part of Allowed that a bucket in shadow mode would
	// have denied, over the window.
	WouldDeny int64
	// FallbackAllowed and FallbackRefused are the calls the clients'
	// failure policy granted and refused while Redis did not answer:
	// no bucket decided them, so they are in neither Allowed nor Denied.
	FallbackAllowed, FallbackRefused int64
	// Read is when the counts were read.
	Read time.Time
}

// AppSeries is the usage of one app of a Series.
type AppSeries struct {
	// App is the app's name.
	App string
	// Allowed and Denied hold one count per point of Series.Times.
	Allowed, Denied []int64
	// WouldDeny holds, per point, the part of Allowed that a bucket in
	// shadow mode would have denied (never more than Allowed).
	WouldDeny []int64
	// FallbackAllowed and FallbackRefused hold, per point, the calls the
	// app's failure policy granted and refused (see Series).
	FallbackAllowed, FallbackRefused []int64
	// TotalAllowed, TotalDenied, TotalWouldDeny, TotalFallbackAllowed and
	// TotalFallbackRefused are their sums.
	TotalAllowed, TotalDenied, TotalWouldDeny  int64
	TotalFallbackAllowed, TotalFallbackRefused int64
}

// Fallbacks is how many of the app's calls its failure policy answered.
func (a AppSeries) Fallbacks() int64 { return a.TotalFallbackAllowed + a.TotalFallbackRefused }

// Fallbacks is how many calls the clients' failure policy answered.
func (s Series) Fallbacks() int64 { return s.FallbackAllowed + s.FallbackRefused }

// Total is the usage of one bucket over a span, all apps together.
type Total struct {
	Bucket          string
	Allowed, Denied int64
}

// Reader reads usage counts from Redis. It is safe for concurrent use.
type Reader struct {
	rdb redis.UniversalClient
	ks  redisscript.Keyspace
	now func() time.Time
}

// NewReader returns a Reader of the usage counts under ks, the key prefix
// the clients and the sync worker use.
func NewReader(rdb redis.UniversalClient, ks redisscript.Keyspace) *Reader {
	return &Reader{rdb: rdb, ks: ks, now: time.Now}
}

// maxPipeline bounds the commands sent in one pipeline, and so the
// replies held in memory at once.
const maxPipeline = 10_000

// Series reads the usage of bucket over window w, ending now. Hour reads
// 60 minute hashes, Day 24 and Week 168 hour hashes, in one pipeline. An invalid
// name or window is an error matching errs.ErrInvalid; Redis failing, one
// matching errs.ErrUnavailable.
func (r *Reader) Series(ctx context.Context, bucket string, w Window) (Series, error) {
	if !redisscript.ValidName(bucket) {
		v := &errs.Validation{}
		v.Add("bucket", "is not a valid bucket name")
		return Series{}, v
	}
	step := w.Step()
	if step == 0 {
		v := &errs.Validation{}
		v.Add("window", "must be hour, day or week")
		return Series{}, v
	}
	now := r.now()
	points := int(w.Duration() / step)
	// Points are aligned on multiples of step since the Unix epoch (UTC).
	stepMin := int64(step / time.Minute)
	lastPoint := floorDiv(floorDiv(now.Unix(), 60), stepMin)
	firstPoint := lastPoint - int64(points) + 1

	// keys[i] is read into point at[i].
	var keys []string
	var at []int
	if step == time.Hour {
		for p := firstPoint; p <= lastPoint; p++ {
			keys = append(keys, r.ks.UsageHour(bucket, p))
			at = append(at, int(p-firstPoint))
		}
	} else {
		for m := firstPoint * stepMin; m < (lastPoint+1)*stepMin; m++ {
			keys = append(keys, r.ks.UsageMinute(bucket, m))
			at = append(at, int(m/stepMin-firstPoint))
		}
	}
	hashes, err := r.readAll(ctx, keys)
	if err != nil {
		return Series{}, err
	}

	s := Series{Bucket: bucket, Window: w, Step: step, Read: now, Times: make([]time.Time, points)}
	for i := range s.Times {
		s.Times[i] = time.Unix((firstPoint+int64(i))*stepMin*60, 0).UTC()
	}
	byApp := map[string]*AppSeries{}
	for i, h := range hashes {
		for field, val := range h {
			app, kind, ok := redisscript.ParseUsageCount(field)
			n, err := strconv.ParseInt(val, 10, 64)
			if !ok || err != nil || n <= 0 || kind == redisscript.UsageNearLimit {
				continue // not drawn, not ours, or damaged: skip rather than fail the page
			}
			as := byApp[app]
			if as == nil {
				as = &AppSeries{App: app, Allowed: make([]int64, points), Denied: make([]int64, points),
					WouldDeny: make([]int64, points), FallbackAllowed: make([]int64, points),
					FallbackRefused: make([]int64, points)}
				byApp[app] = as
			}
			switch kind {
			case redisscript.UsageAllowed:
				as.Allowed[at[i]] += n
			case redisscript.UsageDenied:
				as.Denied[at[i]] += n
			case redisscript.UsageWouldDeny:
				as.WouldDeny[at[i]] += n
			case redisscript.UsageFallbackAllowed:
				as.FallbackAllowed[at[i]] += n
			case redisscript.UsageFallbackRefused:
				as.FallbackRefused[at[i]] += n
			}
		}
	}
	for _, as := range byApp {
		// Would-deny counts are a part of the allowed ones: a damaged or
		// half-flushed hash must not show more of them.
		for j := range as.WouldDeny {
			as.WouldDeny[j] = min(as.WouldDeny[j], as.Allowed[j])
			as.TotalAllowed += as.Allowed[j]
			as.TotalDenied += as.Denied[j]
			as.TotalWouldDeny += as.WouldDeny[j]
			as.TotalFallbackAllowed += as.FallbackAllowed[j]
			as.TotalFallbackRefused += as.FallbackRefused[j]
		}
		s.Allowed += as.TotalAllowed
		s.Denied += as.TotalDenied
		s.WouldDeny += as.TotalWouldDeny
		s.FallbackAllowed += as.TotalFallbackAllowed
		s.FallbackRefused += as.TotalFallbackRefused
		if as.TotalAllowed == 0 && as.TotalDenied == 0 && as.Fallbacks() == 0 {
			continue // only near-limit or would-deny fields: nothing to draw
		}
		s.Apps = append(s.Apps, *as)
	}
	slices.SortFunc(s.Apps, func(a, b AppSeries) int {
		if c := cmp.Compare(b.TotalAllowed+b.TotalDenied+b.Fallbacks(), a.TotalAllowed+a.TotalDenied+a.Fallbacks()); c != 0 {
			return c
		}
		return cmp.Compare(a.App, b.App)
	})
	return s, nil
}

// MaxSince is the longest span TopDenied reads: the retention of the counts.
const MaxSince = 7 * 24 * time.Hour

// TopDenied returns, of the buckets names, those that denied acquires in
// the span since ago until now, the most denials first (ties: most
// allowed, then by name), at most limit of them (all when limit <= 0).
// The span is since rounded up to whole minutes, the current minute
// included. Whole hours of it are read from the hour hashes (the current
// hour counts as whole: its later minutes are still empty), the minutes
// before the first whole hour from the minute hashes: at most 59 + 168
// reads per bucket, about 30 for the last hour, in pipelines of 10,000. since
// must be from a minute to MaxSince, and every name valid, or the error
// matches errs.ErrInvalid; Redis failing gives one matching
// errs.ErrUnavailable.
func (r *Reader) TopDenied(ctx context.Context, names []string, since time.Duration, limit int) ([]Total, error) {
	if since < time.Minute || since > MaxSince {
		v := &errs.Validation{}
		v.Add("since", "must be from a minute to 7 days")
		return nil, v
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)

	last := floorDiv(r.now().Unix(), 60)
	first := last - int64((since+time.Minute-1)/time.Minute) + 1
	firstHour := floorDiv(first+59, 60) // the first hour wholly in the span
	lastHour := floorDiv(last, 60)
	spanKeys := func(keys []string, name string) []string {
		for m := first; m < firstHour*60 && m <= last; m++ {
			keys = append(keys, r.ks.UsageMinute(name, m))
		}
		for h := firstHour; h <= lastHour; h++ {
			keys = append(keys, r.ks.UsageHour(name, h))
		}
		return keys
	}

	totals := make([]Total, len(names))
	var keys []string
	var owner []int // owner[i]: index in totals of keys[i]
	flush := func() error {
		hashes, err := r.readAll(ctx, keys)
		if err != nil {
			return err
		}
		for i, h := range hashes {
			t := &totals[owner[i]]
			for field, val := range h {
				_, allowed, ok := redisscript.ParseUsageField(field)
				n, err := strconv.ParseInt(val, 10, 64)
				if !ok || err != nil || n <= 0 {
					continue
				}
				if allowed {
					t.Allowed += n
				} else {
					t.Denied += n
				}
			}
		}
		keys, owner = keys[:0], owner[:0]
		return nil
	}
	for bi, name := range names {
		totals[bi].Bucket = name
		n := len(keys)
		keys = spanKeys(keys, name)
		for range len(keys) - n {
			owner = append(owner, bi)
		}
		if len(keys) >= maxPipeline {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}

	return mostDenied(totals, limit, func(t Total) (int64, int64, string) { return t.Denied, t.Allowed, t.Bucket }), nil
}

// readAll reads the hashes at keys in one pipeline; a missing key reads
// as an empty hash.
func (r *Reader) readAll(ctx context.Context, keys []string) ([]map[string]string, error) {
	return readAll(ctx, r.rdb, keys)
}

func readAll(ctx context.Context, rdb redis.UniversalClient, keys []string) ([]map[string]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	pipe := rdb.Pipeline()
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, fmt.Errorf("usage: read counts: %w", err)
		}
		return nil, fmt.Errorf("usage: read counts: %w: %w", errs.ErrUnavailable, err)
	}
	out := make([]map[string]string, len(keys))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// checkNames refuses names holding an invalid bucket name.
func checkNames(names []string) error {
	for _, n := range names {
		if !redisscript.ValidName(n) {
			return errs.Invalid("names", fmt.Sprintf("%.80q is not a valid bucket name", n))
		}
	}
	return nil
}
