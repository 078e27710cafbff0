package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/memlimit"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// The step kinds of refunds and charges, of several buckets at once, and
// of leases (docs/protocol.md, "Conformance table").
type adjustStep struct {
	Bucket string `json:"bucket"`
	App    string `json:"app"`
	Op     string `json:"op"`
	N      string `json:"n"`
}

type acquireAllStep struct {
	App      string `json:"app"`
	Critical bool   `json:"critical"`
	Entries  []struct {
		Bucket string `json:"bucket"`
		Key    string `json:"key"`
		N      string `json:"n"`
	} `json:"entries"`
}

type leaseStep struct {
	Bucket string `json:"bucket"`
	App    string `json:"app"`
	Want   string `json:"want"`
	Back   string `json:"back"`
}

// wantAdjust is an adjust's wanted answer: an acquire's and applied.
type wantAdjust struct {
	wantAnswer
	Applied bound `json:"applied"`
}

// wantAll is an acquire-all's wanted answer: the overall code and each
// entry's answer (entries, empty for a malformed call as a whole).
type wantAll struct {
	Code    string       `json:"code"`
	Entries []wantAnswer `json:"entries"`
}

type wantLease struct {
	Code         string `json:"code"`
	Granted      bound  `json:"granted"`
	Remaining    bound  `json:"remaining"`
	RetryUS      bound  `json:"retry_us"`
	Capacity     bound  `json:"capacity"`
	PermitsMicro bound  `json:"permits_micro"`
	Period       bound  `json:"period"`
	LeaseMS      bound  `json:"lease_ms"`
}

// typedN parses n as a typed client sends it; ok is false for a form an
// int64 cannot be sent as ("1e3", "01"): the step is skipped.
func typedN(n string) (int64, bool) {
	v, err := strconv.ParseInt(n, 10, 64)
	return v, err == nil && strconv.FormatInt(v, 10) == n
}

func checkFields(t *testing.T, where string, fields int, got redisscript.Answer, w wantAnswer) {
	t.Helper()
	check := []struct {
		name string
		got  int64
		want bound
	}{
		{"remaining", got.Remaining, w.Remaining}, {"retry_us", got.RetryAfterMicros, w.RetryUS},
		{"reset_us", got.ResetAfterMicros, w.ResetUS}, {"capacity", got.Capacity, w.Capacity},
		{"permits_micro", got.PermitsMicro, w.PermitsMicro}, {"period", got.PeriodSeconds, w.Period},
	}
	for _, f := range check[:min(fields, 7)-1] {
		if !f.want.holds(f.got) {
			t.Errorf("%s: %s = %d, want %v", where, f.name, f.got, f.want)
		}
	}
}

func wantCode(t *testing.T, where, name string) redisscript.Code {
	t.Helper()
	code, ok := codeNames[name]
	if !ok {
		t.Fatalf("%s: unknown code %q", where, name)
	}
	return code
}

func checkAdjust(t *testing.T, where string, q *adjustStep, want json.RawMessage,
	run func() (redisscript.AdjustAnswer, int, bool, error)) {
	t.Helper()
	where = fmt.Sprintf("%s: adjust %s %s %q n=%q", where, q.Bucket, q.Op, q.App, q.N)
	var w wantAdjust
	if err := strictUnmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad want %s: %v", where, want, err)
	}
	got, fields, skip, err := run()
	if skip {
		return
	}
	code := wantCode(t, where, w.Code)
	if err != nil || got.Code != code {
		t.Errorf("%s: code %d %v, want %s (%+v)", where, got.Code, err, w.Code, got)
		return
	}
	checkFields(t, where, fields, got.Answer, w.wantAnswer)
	if !w.Applied.holds(got.Applied) {
		t.Errorf("%s: applied = %d, want %v", where, got.Applied, w.Applied)
	}
}

// checkAll checks an acquire-all answer. fields is what the
// implementation shows of each entry: 7 for the script; 5 for a client,
// which shows an entry's own code only as would-deny or as the set's when
// it was granted, and no entries of a set that failed.
func checkAll(t *testing.T, where string, q *acquireAllStep, want json.RawMessage,
	run func() (redisscript.AllAnswer, int, bool, error)) {
	t.Helper()
	where = fmt.Sprintf("%s: acquire all %q %v", where, q.App, q.Entries)
	var w wantAll
	if err := strictUnmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad want %s: %v", where, want, err)
	}
	got, fields, skip, err := run()
	if skip {
		return
	}
	code := wantCode(t, where, w.Code)
	if err != nil || got.Code != code {
		t.Errorf("%s: code %d %v, want %s (%+v)", where, got.Code, err, w.Code, got)
		return
	}
	if fields == 0 || (fields < 7 && code != redisscript.Allowed && code != redisscript.Denied) {
		return // a client shows no entries of a set that failed
	}
	if len(got.Entries) != len(w.Entries) {
		t.Errorf("%s: %d entries, want %d", where, len(got.Entries), len(w.Entries))
		return
	}
	for i, e := range got.Entries {
		ew := fmt.Sprintf("%s, entry %d", where, i)
		ec := wantCode(t, ew, w.Entries[i].Code)
		// A client shows an entry's own code only as would deny, or as the
		// set's when the set was granted.
		if (fields == 7 || ec == redisscript.WouldDeny || code == redisscript.Allowed) && e.Code != ec {
			t.Errorf("%s: code %d, want %s (%+v)", ew, e.Code, w.Entries[i].Code, e)
			continue
		}
		checkFields(t, ew, fields, e, w.Entries[i])
	}
}

func checkLease(t *testing.T, where string, q *leaseStep, want json.RawMessage, run func() (redisscript.LeaseAnswer, error)) {
	t.Helper()
	where = fmt.Sprintf("%s: lease %s %q want=%q back=%q", where, q.Bucket, q.App, q.Want, q.Back)
	var w wantLease
	if err := strictUnmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad want %s: %v", where, want, err)
	}
	got, err := run()
	code := wantCode(t, where, w.Code)
	if err != nil || got.Code != code {
		t.Errorf("%s: code %d %v, want %s (%+v)", where, got.Code, err, w.Code, got)
		return
	}
	for _, f := range []struct {
		name string
		got  int64
		want bound
	}{
		{"granted", got.Granted, w.Granted}, {"remaining", got.Remaining, w.Remaining}, {"retry_us", got.RetryAfterMicros, w.RetryUS},
		{"capacity", got.Capacity, w.Capacity}, {"permits_micro", got.PermitsMicro, w.PermitsMicro},
		{"period", got.PeriodSeconds, w.Period}, {"lease_ms", got.LeaseMillis, w.LeaseMS},
	} {
		if !f.want.holds(f.got) {
			t.Errorf("%s: %s = %d, want %v", where, f.name, f.got, f.want)
		}
	}
}

// The raw scripts, with the arguments as the table gives them.

func scriptAdjust(ctx context.Context, srv server, q *adjustStep) (redisscript.AdjustAnswer, int, bool, error) {
	v, err := redisscript.AdjustScript.Run(ctx, srv.rdb, []string{srv.ks.Bucket(q.Bucket)}, q.App, q.Op, q.N).Int64Slice()
	if err != nil {
		return redisscript.AdjustAnswer{}, 7, false, err
	}
	a, err := redisscript.AdjustAnswerOf(v)
	return a, 7, false, err
}

func scriptAll(ctx context.Context, srv server, q *acquireAllStep) (redisscript.AllAnswer, int, bool, error) {
	var keys []string
	argv := []any{q.App, strconv.Itoa(len(q.Entries))}
	for _, e := range q.Entries {
		if e.Key == "" {
			keys = append(keys, srv.ks.Bucket(e.Bucket))
			argv = append(argv, redisscript.EntryBucket, "", e.N)
			continue
		}
		kk := srv.ks.Keyed(e.Bucket, e.Key)
		keys = append(keys, kk.Config, kk.State)
		argv = append(argv, redisscript.EntryKey, e.Key, e.N)
	}
	if q.Critical {
		argv = append(argv, "1")
	}
	v, err := redisscript.AcquireAllScript.Run(ctx, srv.rdb, keys, argv...).Int64Slice()
	if err != nil {
		return redisscript.AllAnswer{}, 7, false, err
	}
	a, err := redisscript.AllAnswerOf(v, len(q.Entries))
	return a, 7, false, err
}

func scriptLease(ctx context.Context, srv server, q *leaseStep) (redisscript.LeaseAnswer, error) {
	v, err := redisscript.LeaseScript.Run(ctx, srv.rdb, []string{srv.ks.Bucket(q.Bucket)}, q.App, q.Want, q.Back).Int64Slice()
	if err != nil {
		return redisscript.LeaseAnswer{}, err
	}
	return redisscript.LeaseAnswerOf(v)
}

// The clients: client.Limiter and memlimit share these through this
// interface.
type setClient interface {
	AcquireAll(ctx context.Context, reqs []client.Request) (client.Results, error)
	Refund(ctx context.Context, bucket string, n int64) (client.Adjustment, error)
	Charge(ctx context.Context, bucket string, n int64) (client.Adjustment, error)
}

// limiterFor returns a client.Limiter of app on srv, failing closed, or
// nil for an app name the client refuses.
func limiterFor(t *testing.T, srv server, app string) setClient {
	// Without the denial cache: see the runner in client_test.go.
	l, err := client.New(srv.rdb, app, client.WithKeyPrefix(srv.ks.Prefix), client.WithFailurePolicy(client.FailClosed),
		client.WithTimeout(30*time.Second), client.WithDenialCache(0))
	if err != nil {
		return nil
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func clientAdjust(ctx context.Context, c setClient, q *adjustStep) (redisscript.AdjustAnswer, int, bool, error) {
	n, ok := typedN(q.N)
	if !ok {
		return redisscript.AdjustAnswer{}, 0, true, nil
	}
	if c == nil {
		return redisscript.AdjustAnswer{Answer: redisscript.Answer{Code: redisscript.AppNotAllowed}}, 1, false, nil
	}
	var adj client.Adjustment
	var err error
	switch q.Op {
	case "refund":
		adj, err = c.Refund(ctx, q.Bucket, n)
	case "charge":
		adj, err = c.Charge(ctx, q.Bucket, n)
	default:
		return redisscript.AdjustAnswer{}, 0, true, nil
	}
	a, _, _, err := answerOfResult(client.Result{Allowed: true, Remaining: adj.Remaining, Limit: adj.Limit,
		ResetAfter: adj.ResetAfter}, err)
	// An Adjustment shows remaining, reset and capacity; no wait (0, as
	// the script's for a refund or charge).
	return redisscript.AdjustAnswer{Answer: a, Applied: adj.Applied}, 5, false, err
}

func clientAll(ctx context.Context, c setClient, q *acquireAllStep) (redisscript.AllAnswer, int, bool, error) {
	reqs := make([]client.Request, len(q.Entries))
	for i, e := range q.Entries {
		n, ok := typedN(e.N)
		if !ok {
			return redisscript.AllAnswer{}, 0, true, nil
		}
		reqs[i] = client.Request{Bucket: e.Bucket, Key: e.Key, N: n}
	}
	if c == nil {
		return redisscript.AllAnswer{Code: redisscript.AppNotAllowed}, 0, false, nil
	}
	res, err := c.AcquireAll(ctx, reqs)
	set, _, _, err := answerOfResult(client.Result{Allowed: res.Allowed, Fallback: res.Fallback}, err)
	if err != nil {
		return redisscript.AllAnswer{}, 0, false, err
	}
	out := redisscript.AllAnswer{Code: set.Code}
	for _, e := range res.Each {
		a, _, _, _ := answerOfResult(e, nil)
		out.Entries = append(out.Entries, a)
	}
	return out, 5, false, nil
}

// TestConformanceMemlimit runs docs/conformance.json through
// client/memlimit, each case that applies to it, on a clock that moves
// only with the table's waits. Subtests are named memlimit/<case>.
func TestConformanceMemlimit(t *testing.T) {
	t.Parallel()
	tab := loadConformance(t)
	t.Run("memlimit", func(t *testing.T) {
		for _, c := range tab.Cases {
			if c.appliesTo("memlimit") {
				t.Run(c.Name, func(t *testing.T) { runMemCase(t, c) })
			}
		}
	})
}

func runMemCase(t *testing.T, c conformanceCase) {
	ctx := context.Background()
	clock := memlimit.NewManualClock(time.Unix(1_700_000_000, 0))
	root := memlimit.New("svc", memlimit.WithClock(clock))
	as := func(app string) *memlimit.Limiter { return root.As(app) }
	handles := &slotHandles{takers: func(app string) client.SlotTaker { return as(app) }}
	defined := map[string]bool{}
	var base caseBase
	clockNow := func() int64 { return clock.Now().Unix() }
	perOf := func(where string, permits string, period int64) (float64, time.Duration) {
		pm, err := redisscript.ParsePermits(permits)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		return float64(pm) / 1e6, time.Duration(period) * time.Second
	}
	// existing says how a definition's want reads without versions:
	// created for a new bucket, updated or unchanged for one that exists.
	existing := func(where, name string, want json.RawMessage, was bool) {
		var got string
		if json.Unmarshal(want, &got) != nil {
			t.Fatalf("%s: memlimit cannot express the want %s; list the case's implementations", where, want)
		}
		switch {
		case got == "created" && !was, (got == "updated" || got == "unchanged" || got == "written") && was,
			got == "written" && !was:
		default:
			t.Fatalf("%s: memlimit cannot express %q (bucket existed: %v); list the case's implementations", where, got, was)
		}
	}
	for i, s := range c.Steps {
		where := fmt.Sprintf("%s, step %d", c.Name, i+1)
		if s.actions() != 1 {
			t.Fatalf("%s: a step has exactly one action", where)
		}
		switch {
		case s.Apply != nil, s.ApplyKeyed != nil:
			a, keyed := s.Apply, false
			if a == nil {
				a, keyed = s.ApplyKeyed, true
			}
			existing(where, a.Bucket, s.Want, defined[a.Bucket])
			def := memlimit.Bucket{Capacity: a.Capacity, Apps: a.Apps, Shadow: a.Shadow, Keyed: keyed, Reserve: a.Reserve}
			switch a.Kind {
			case "", "bucket":
				def.Permits, def.Per = perOf(where, a.Permits, a.Period)
			case "concurrency":
				def.Permits, def.Per = perOf(where, a.Permits, a.Period)
				def.SlotLease = time.Duration(a.SlotMS) * time.Millisecond
			case redisscript.KindQuota:
				for _, b := range base.bounds(a, clockNow) {
					def.Boundaries = append(def.Boundaries, time.Unix(b, 0))
				}
			default:
				t.Fatalf("%s: memlimit cannot define a limit of kind %q; list the case's implementations", where, a.Kind)
			}
			if err := root.Define(a.Bucket, def); err != nil {
				t.Fatalf("%s: define: %v", where, err)
			}
			defined[a.Bucket] = true
		case s.Override != nil:
			o := s.Override
			existing(where, o.Bucket, s.Want, true)
			var permits float64
			var per time.Duration
			if o.Permits != "0" || o.Period != 0 {
				permits, per = perOf(where, o.Permits, o.Period)
			}
			if err := root.Override(o.Bucket, memlimit.Override{Key: o.Key, Prefix: o.Match == "prefix", Capacity: o.Capacity,
				Permits: permits, Per: per, Shadow: o.Shadow}); err != nil {
				t.Fatalf("%s: override: %v", where, err)
			}
		case s.WaitUS > 0:
			clock.Advance(time.Duration(s.WaitUS) * time.Microsecond)
		case s.Periods != nil:
			checkPeriods(t, where, s.Periods, s.Want)
		case s.Acquire != nil, s.AcquireKey != nil:
			bucket, key, app, n, critical := "", "", "", "", false
			if q := s.Acquire; q != nil {
				bucket, app, n, critical = q.Bucket, q.App, q.N, q.Critical
			} else {
				q := s.AcquireKey
				bucket, key, app, n, critical = q.Bucket, q.Key, q.App, q.N, q.Critical
			}
			ctx := criticalIf(ctx, critical)
			checkAcquire(t, fmt.Sprintf("%s: acquire %s[%q] %q n=%q", where, bucket, key, app, n), s.Want,
				func() (redisscript.KeyedAnswer, int, bool, error) {
					v, ok := typedN(n)
					if !ok {
						return redisscript.KeyedAnswer{}, 0, true, nil
					}
					var res client.Result
					var err error
					if s.AcquireKey != nil {
						res, err = as(app).AcquireKey(ctx, bucket, key, v)
					} else {
						res, err = as(app).Acquire(ctx, bucket, v)
					}
					a, fields, skip, err := answerOfResult(res, err)
					return redisscript.KeyedAnswer{Answer: a}, fields, skip, err
				})
		case s.Adjust != nil:
			checkAdjust(t, where, s.Adjust, s.Want, func() (redisscript.AdjustAnswer, int, bool, error) {
				return clientAdjust(ctx, as(s.Adjust.App), s.Adjust)
			})
		case s.AcquireAll != nil:
			checkAll(t, where, s.AcquireAll, s.Want, func() (redisscript.AllAnswer, int, bool, error) {
				return clientAll(criticalIf(ctx, s.AcquireAll.Critical), as(s.AcquireAll.App), s.AcquireAll)
			})
		case s.Slot != nil:
			checkSlot(t, where, s.Slot, s.Want, func() (redisscript.SlotAnswer, int, error) {
				return handles.run(ctx, t, where, s.Slot)
			})
		default:
			t.Fatalf("%s: memlimit cannot run a %s step; list the case's implementations", where, s.kind())
		}
	}
}

// kind names a step's action as the table does.
func (s conformanceStep) kind() string {
	for name, set := range map[string]bool{"apply": s.Apply != nil, "delete": s.Delete != nil, "acquire": s.Acquire != nil,
		"wait_us": s.WaitUS > 0, "foreign": s.Foreign != nil, "exists": s.Exists != nil, "apply_keyed": s.ApplyKeyed != nil,
		"override": s.Override != nil, "acquire_key": s.AcquireKey != nil, "adjust": s.Adjust != nil,
		"acquire_all": s.AcquireAll != nil, "lease": s.Lease != nil, "slot": s.Slot != nil, "periods": s.Periods != nil} {
		if set {
			return name
		}
	}
	return "empty"
}
