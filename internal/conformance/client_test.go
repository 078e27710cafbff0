package conformance_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// conformancePath is the table every client of the protocol must pass
// (docs/protocol.md, "Conformance table"); the Python reference client in
// examples/python runs the same file.
const conformancePath = "../../docs/conformance.json"

type conformanceTable struct {
	About string            `json:"about"`
	Cases []conformanceCase `json:"cases"`
}

type conformanceCase struct {
	Name string `json:"name"`
	// Implementations lists the implementations the case applies to
	// (implementations); none listed is all of them.
	Implementations []string          `json:"implementations"`
	Steps           []conformanceStep `json:"steps"`
}

// implementations are the kinds of implementation the table runs on: the
// raw scripts (on redis-server and miniredis here, and in the Python
// client), the clients (client.Limiter, the Python Limiter), the
// in-memory client/memlimit, and the FailLocal fallback's local bucket
// (client/conformance_test.go).
var implementations = []string{"script", "limiter", "memlimit", "fallback"}

// appliesTo reports whether case c applies to implementation impl.
func (c conformanceCase) appliesTo(impl string) bool {
	return len(c.Implementations) == 0 || slices.Contains(c.Implementations, impl)
}

// applyArgs are the arguments of an apply or apply_keyed step.
type applyArgs struct {
	Bucket   string   `json:"bucket"`
	ID       int64    `json:"id"`
	Version  int64    `json:"version"`
	Capacity int64    `json:"capacity"`
	Permits  string   `json:"permits"`
	Period   int64    `json:"period"`
	Apps     []string `json:"apps"`
	Force    bool     `json:"force"`
	Shadow   bool     `json:"shadow"`
	LeaseMS  int64    `json:"lease_ms"`
	// Kind is the limit's kind ("bucket" when empty); SlotMS the slot
	// lease time of a concurrency limit.
	Kind   string `json:"kind"`
	SlotMS int64  `json:"slot_ms"`
	// BoundsS is a quota's table: offsets in seconds from the case's base
	// (Redis's clock, in whole seconds, when the case's first step with a
	// table ran: see caseBase).
	BoundsS []int64 `json:"bounds_s"`
	// Reserve is a token bucket's reserve.
	Reserve int64 `json:"reserve"`
}

// periodsStep asks for count period starts of a quota, from the one
// containing At (RFC 3339) on.
type periodsStep struct {
	Period string `json:"period"`
	Zone   string `json:"zone"`
	At     string `json:"at"`
	Count  int    `json:"count"`
}

// checkPeriods runs a periods step with the Go core (package quota), the
// arithmetic the sync worker writes quota tables with.
func checkPeriods(t *testing.T, where string, q *periodsStep, want json.RawMessage) {
	t.Helper()
	var w []string
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad want %s", where, want)
	}
	p, err := quota.ParsePeriod(q.Period)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	loc, err := quota.LoadZone(q.Zone)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	at, err := time.Parse(time.RFC3339, q.At)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var got []string
	for s := p.Start(at, loc); len(got) < q.Count; s = p.Next(s, loc) {
		got = append(got, s.UTC().Format(time.RFC3339))
	}
	if !slices.Equal(got, w) {
		t.Errorf("%s: periods %+v: %v, want %v", where, *q, got, w)
	}
}

// caseBase is the base of a case's quota tables: the clock's whole
// seconds when first asked for (now reads it), then the same.
type caseBase struct {
	set  bool
	base int64
}

// bounds is the table of a, offsets from the base; nil without one.
func (b *caseBase) bounds(a *applyArgs, now func() int64) []int64 {
	if a.BoundsS == nil {
		return nil
	}
	if !b.set {
		b.base, b.set = now(), true
	}
	out := make([]int64, len(a.BoundsS))
	for i, o := range a.BoundsS {
		out[i] = b.base + o
	}
	return out
}

// conformanceStep holds exactly one action and, for most, the wanted outcome.
type conformanceStep struct {
	Apply  *applyArgs `json:"apply"`
	Delete *struct {
		Bucket  string `json:"bucket"`
		ID      int64  `json:"id"`
		Version int64  `json:"version"`
	} `json:"delete"`
	Acquire *struct {
		Bucket   string `json:"bucket"`
		App      string `json:"app"`
		N        string `json:"n"`
		Critical bool   `json:"critical"`
	} `json:"acquire"`
	WaitUS  int64 `json:"wait_us"`
	Foreign *struct {
		Bucket string `json:"bucket"`
		Type   string `json:"type"`
	} `json:"foreign"`
	Exists     *string    `json:"exists"`
	ApplyKeyed *applyArgs `json:"apply_keyed"`
	Override   *struct {
		Bucket   string `json:"bucket"`
		BucketID int64  `json:"bucket_id"`
		ID       int64  `json:"id"`
		Version  int64  `json:"version"`
		Match    string `json:"match"`
		Key      string `json:"key"`
		Capacity int64  `json:"capacity"`
		Permits  string `json:"permits"`
		Period   int64  `json:"period"`
		Shadow   bool   `json:"shadow"`
	} `json:"override"`
	AcquireKey *struct {
		Bucket   string `json:"bucket"`
		Key      string `json:"key"`
		App      string `json:"app"`
		N        string `json:"n"`
		Critical bool   `json:"critical"`
	} `json:"acquire_key"`
	Adjust     *adjustStep     `json:"adjust"`
	AcquireAll *acquireAllStep `json:"acquire_all"`
	Lease      *leaseStep      `json:"lease"`
	Slot       *slotStep       `json:"slot"`
	Periods    *periodsStep    `json:"periods"`
	Want       json.RawMessage `json:"want"`
}

func (s conformanceStep) actions() int {
	n := 0
	for _, set := range []bool{s.Apply != nil, s.Delete != nil, s.Acquire != nil, s.WaitUS > 0, s.Foreign != nil, s.Exists != nil,
		s.ApplyKeyed != nil, s.Override != nil, s.AcquireKey != nil, s.Adjust != nil, s.AcquireAll != nil, s.Lease != nil,
		s.Slot != nil, s.Periods != nil} {
		if set {
			n++
		}
	}
	return n
}

// bound is a wanted number: exact, or {"min": a, "max": b} for values that
// depend on how much time passed (which a stalled machine stretches).
type bound struct{ min, max int64 }

func (b *bound) UnmarshalJSON(data []byte) error {
	if v, err := strconv.ParseInt(string(data), 10, 64); err == nil {
		b.min, b.max = v, v
		return nil
	}
	var r struct {
		Min *int64 `json:"min"`
		Max *int64 `json:"max"`
	}
	if err := strictUnmarshal(data, &r); err != nil || r.Min == nil || r.Max == nil || *r.Min > *r.Max {
		return fmt.Errorf("want an integer or {\"min\", \"max\"}, not %s", data)
	}
	b.min, b.max = *r.Min, *r.Max
	return nil
}

func (b bound) holds(v int64) bool { return v >= b.min && v <= b.max }

func (b bound) String() string {
	if b.min == b.max {
		return strconv.FormatInt(b.min, 10)
	}
	return fmt.Sprintf("%d..%d", b.min, b.max)
}

// wantAnswer is the wanted answer of an acquire: the seven fields, or an
// error reply containing Error.
type wantAnswer struct {
	Code         string `json:"code"`
	Remaining    bound  `json:"remaining"`
	RetryUS      bound  `json:"retry_us"`
	ResetUS      bound  `json:"reset_us"`
	Capacity     bound  `json:"capacity"`
	PermitsMicro bound  `json:"permits_micro"`
	Period       bound  `json:"period"`
	// Source, of a keyed acquire only: "bucket", "exact" or "prefix".
	Source string `json:"source"`
	Error  string `json:"error"`
}

var sourceNames = map[string]redisscript.Source{
	"bucket": redisscript.FromBucket, "exact": redisscript.FromExact, "prefix": redisscript.FromPrefix,
}

// wantError is the wanted outcome of an apply that fails.
type wantError struct {
	Error string `json:"error"`
}

var codeNames = map[string]redisscript.Code{
	"allowed": redisscript.Allowed, "denied": redisscript.Denied, "unknown_bucket": redisscript.UnknownBucket,
	"app_not_allowed": redisscript.AppNotAllowed, "exceeds_capacity": redisscript.ExceedsCapacity,
	"invalid_n": redisscript.InvalidN, "would_deny": redisscript.WouldDeny, "invalid_key": redisscript.InvalidKey,
	"wrong_kind": redisscript.WrongKind,
}

var applyNames = map[string]redisscript.ApplyOutcome{
	"created": redisscript.Created, "updated": redisscript.Updated, "unchanged": redisscript.Unchanged,
	"stale": redisscript.Stale, "tombstoned": redisscript.Tombstoned,
}

func strictUnmarshal(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func loadConformance(t *testing.T) conformanceTable {
	t.Helper()
	data, err := os.ReadFile(conformancePath)
	if err != nil {
		t.Fatal(err)
	}
	var tab conformanceTable
	if err := strictUnmarshal(data, &tab); err != nil {
		t.Fatalf("%s: %v", conformancePath, err)
	}
	if len(tab.Cases) == 0 {
		t.Fatalf("%s has no cases", conformancePath)
	}
	for _, c := range tab.Cases {
		for _, impl := range c.Implementations {
			if !slices.Contains(implementations, impl) {
				t.Fatalf("%s: case %q lists implementation %q; there are %v", conformancePath, c.Name, impl, implementations)
			}
		}
	}
	return tab
}

// acquirer takes tokens the way one kind of client does, and reports the
// answer in the table's terms. fields says which of the seven fields it
// can see; skip, that the step cannot be expressed through it.
// A keyed acquire passes its key; a plain one passes key "" (no valid key
// is empty). A keyed answer carries its source as the eighth field. A
// critical acquire comes with a ctx marked client.Critical.
type acquirer func(ctx context.Context, bucket, key, app, n string) (a redisscript.KeyedAnswer, fields int, skip bool, err error)

// TestConformance runs docs/conformance.json through the acquire script as
// any client sends it (raw arguments, on redis-server and on miniredis) and
// through the client package's Limiter, each case that applies to them;
// TestConformanceMemlimit runs it through client/memlimit. The subtests
// are named <server>/<implementation>/<case>.
func TestConformance(t *testing.T) {
	t.Parallel()
	tab := loadConformance(t)
	for srv, start := range servers(t) {
		for _, mode := range []string{"script", "limiter"} {
			t.Run(srv+"/"+mode, func(t *testing.T) {
				t.Parallel()
				for i, c := range tab.Cases {
					if !c.appliesTo(mode) {
						continue
					}
					t.Run(c.Name, func(t *testing.T) {
						s := start(t)
						s.ks.Prefix = cmp.Or(s.ks.Prefix, redisscript.DefaultPrefix) + fmt.Sprintf("c%d:", i)
						var acq acquirer
						if mode == "script" {
							acq = scriptAcquirer(s)
						} else {
							acq = limiterAcquirer(t, s)
						}
						runConformanceCase(t, s, c, acq, mode)
					})
				}
			})
		}
	}
}

// scriptAcquirer sends the arguments as the table gives them; a critical
// acquire adds the protocol argument of the first version ("1") and the
// critical flag ("1"), so its answer has the first version's integers.
func scriptAcquirer(s server) acquirer {
	return func(ctx context.Context, bucket, key, app, n string) (redisscript.KeyedAnswer, int, bool, error) {
		var extra []any
		if client.IsCritical(ctx) {
			extra = []any{"1", "1"}
		}
		if key != "" {
			v, err := redisscript.KeyedAcquireScript.Run(ctx, s.rdb, []string{s.ks.Keyed(bucket, key).Config,
				s.ks.Keyed(bucket, key).State}, append([]any{app, n, key}, extra...)...).Int64Slice()
			if err != nil {
				return redisscript.KeyedAnswer{}, 8, false, err
			}
			a, err := redisscript.KeyedAnswerOf(v)
			if err == nil && len(v) != 8 {
				err = fmt.Errorf("%d integers, want 8", len(v))
			}
			return a, 8, false, err
		}
		v, err := redisscript.AcquireScript.Run(ctx, s.rdb, []string{s.ks.Bucket(bucket)},
			append([]any{app, n}, extra...)...).Int64Slice()
		if err != nil {
			return redisscript.KeyedAnswer{}, 7, false, err
		}
		a, err := redisscript.AnswerOf(v)
		if err == nil && len(v) != 7 {
			err = fmt.Errorf("%d integers, want 7", len(v))
		}
		return redisscript.KeyedAnswer{Answer: a}, 7, false, err
	}
}

// limiterAcquirer answers through a client.Limiter per app, failing closed
// so that no answer of a failure policy can pass for one of Redis. Its
// Result shows code, remaining, retry, reset and capacity (as Limit).
func limiterAcquirer(t *testing.T, s server) acquirer {
	limiterAnswer := limiterAnswerer(t, s)
	return func(ctx context.Context, bucket, key, app, n string) (redisscript.KeyedAnswer, int, bool, error) {
		a, fields, skip, err := limiterAnswer(ctx, bucket, key, app, n)
		return redisscript.KeyedAnswer{Answer: a}, fields, skip, err
	}
}

func limiterAnswerer(t *testing.T, s server) func(ctx context.Context, bucket, key, app, n string) (redisscript.Answer, int, bool, error) {
	limiters := map[string]*client.Limiter{}
	return func(ctx context.Context, bucket, key, app, n string) (redisscript.Answer, int, bool, error) {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != n {
			return redisscript.Answer{}, 0, true, nil // an int64 cannot be sent as "1e3" or "01"
		}
		l, ok := limiters[app]
		if !ok {
			// The table sets state and config between calls behind the
			// Limiter's back; its denial cache sees such changes up to a
			// second late by design (client/denial.go, tested there), so
			// the table runs each call against Redis.
			l, err = client.New(s.rdb, app, client.WithKeyPrefix(s.ks.Prefix), client.WithFailurePolicy(client.FailClosed),
				client.WithTimeout(30*time.Second), client.WithDenialCache(0))
			if err != nil {
				// An app name the client refuses can never take tokens: the
				// table must not want it to.
				return redisscript.Answer{Code: redisscript.AppNotAllowed}, 1, false, nil
			}
			t.Cleanup(func() { l.Close() })
			limiters[app] = l
		}
		var res client.Result
		if key != "" {
			res, err = l.AcquireKey(ctx, bucket, key, v)
		} else {
			res, err = l.Acquire(ctx, bucket, v)
		}
		return answerOfResult(res, err)
	}
}

// answerOfResult turns a client's answer (client.Limiter or memlimit) into
// the table's terms; it shows code, remaining, retry, reset and capacity
// (as Limit).
func answerOfResult(res client.Result, err error) (redisscript.Answer, int, bool, error) {
	a := redisscript.Answer{Remaining: res.Remaining, RetryAfterMicros: res.RetryAfter.Microseconds(),
		ResetAfterMicros: res.ResetAfter.Microseconds(), Capacity: res.Limit}
	switch {
	case errors.Is(err, client.ErrUnavailable):
		// FailClosed answered: Redis gave an error reply. The reply
		// itself is not in the Result; the script mode checks its text.
		return redisscript.Answer{}, 0, false, err
	case res.Fallback:
		return a, 0, false, fmt.Errorf("answered by the failure policy: %w", err)
	case err == nil && res.Allowed && res.WouldDeny:
		a.Code = redisscript.WouldDeny
	case err == nil && res.Allowed:
		a.Code = redisscript.Allowed
	case err == nil:
		a.Code = redisscript.Denied
	case errors.Is(err, client.ErrUnknownBucket):
		a.Code = redisscript.UnknownBucket
	case errors.Is(err, client.ErrAppNotAllowed):
		a.Code = redisscript.AppNotAllowed
	case errors.Is(err, client.ErrExceedsCapacity):
		a.Code = redisscript.ExceedsCapacity
	case errors.Is(err, client.ErrInvalidN):
		a.Code = redisscript.InvalidN
	case errors.Is(err, client.ErrInvalidKey):
		a.Code = redisscript.InvalidKey
	default:
		return a, 0, false, err
	}
	return a, 5, false, nil
}

func runConformanceCase(t *testing.T, srv server, c conformanceCase, acquire acquirer, mode string) {
	t.Helper()
	ctx := context.Background()
	handles := &slotHandles{takers: limiterTakers(t, srv)}
	var base caseBase
	redisNow := func() int64 {
		tm, err := srv.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return tm.Unix()
	}
	for i, s := range c.Steps {
		where := fmt.Sprintf("%s, step %d", c.Name, i+1)
		if s.actions() != 1 {
			t.Fatalf("%s: a step has exactly one action", where)
		}
		switch {
		case s.Periods != nil:
			if mode != "script" {
				t.Fatalf("%s: a periods step runs in the script mode only; the case must list its implementations", where)
			}
			checkPeriods(t, where, s.Periods, s.Want)
		case s.Apply != nil:
			a := s.Apply
			pm, err := redisscript.ParsePermits(a.Permits)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			out, err := redisscript.Apply(ctx, srv.rdb, srv.ks, redisscript.Config{Name: a.Bucket, ID: a.ID, Version: a.Version,
				Capacity: a.Capacity, PermitsMicro: pm, PeriodSeconds: a.Period, Apps: a.Apps, Shadow: a.Shadow,
				LeaseMillis: a.LeaseMS, Kind: a.Kind, SlotMillis: a.SlotMS, Bounds: base.bounds(a, redisNow), Reserve: a.Reserve}, a.Force)
			var name string
			if json.Unmarshal(s.Want, &name) == nil {
				if want, ok := applyNames[name]; !ok || err != nil || out != want {
					t.Errorf("%s: apply: %v %v, want %s", where, out, err, s.Want)
				}
				continue
			}
			var we wantError
			if err := strictUnmarshal(s.Want, &we); err != nil || we.Error == "" {
				t.Fatalf("%s: bad want %s", where, s.Want)
			}
			if err == nil || !strings.Contains(err.Error(), we.Error) {
				t.Errorf("%s: apply: %v %v, want an error containing %q", where, out, err, we.Error)
			}
		case s.Delete != nil:
			var want bool
			if err := json.Unmarshal(s.Want, &want); err != nil {
				t.Fatalf("%s: bad want %s", where, s.Want)
			}
			got, err := redisscript.Delete(ctx, srv.rdb, srv.ks, s.Delete.Bucket, s.Delete.ID, s.Delete.Version)
			if err != nil || got != want {
				t.Errorf("%s: delete: %v %v, want %v", where, got, err, want)
			}
		case s.WaitUS > 0:
			// Sleeping longer only refills more; the table allows for that.
			time.Sleep(time.Duration(s.WaitUS)*time.Microsecond + 2*time.Millisecond)
		case s.Foreign != nil:
			key := srv.ks.Bucket(s.Foreign.Bucket)
			var err error
			switch s.Foreign.Type {
			case "string":
				err = srv.rdb.Set(ctx, key, "x", 0).Err()
			case "list":
				err = srv.rdb.RPush(ctx, key, "x").Err()
			case "hash":
				err = srv.rdb.HSet(ctx, key, "note", "x").Err()
			default:
				t.Fatalf("%s: foreign type %q", where, s.Foreign.Type)
			}
			if err != nil {
				t.Fatal(err)
			}
		case s.Exists != nil:
			var want bool
			if err := json.Unmarshal(s.Want, &want); err != nil {
				t.Fatalf("%s: bad want %s", where, s.Want)
			}
			n, err := srv.rdb.Exists(ctx, srv.ks.Bucket(*s.Exists)).Result()
			if err != nil || (n == 1) != want {
				t.Errorf("%s: exists %s = %d %v, want %v", where, *s.Exists, n, err, want)
			}
		case s.Acquire != nil:
			q := s.Acquire
			checkAcquire(t, fmt.Sprintf("%s: acquire %s %q n=%q critical=%v", where, q.Bucket, q.App, q.N, q.Critical), s.Want,
				func() (redisscript.KeyedAnswer, int, bool, error) {
					return acquire(criticalIf(ctx, q.Critical), q.Bucket, "", q.App, q.N)
				})
		case s.AcquireKey != nil:
			q := s.AcquireKey
			checkAcquire(t, fmt.Sprintf("%s: acquire %s[%q] %q n=%q critical=%v", where, q.Bucket, q.Key, q.App, q.N,
				q.Critical), s.Want,
				func() (redisscript.KeyedAnswer, int, bool, error) {
					return acquire(criticalIf(ctx, q.Critical), q.Bucket, q.Key, q.App, q.N)
				})
		case s.ApplyKeyed != nil:
			a := s.ApplyKeyed
			pm, err := redisscript.ParsePermits(a.Permits)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			out, err := redisscript.ApplyKeyed(ctx, srv.rdb, srv.ks, redisscript.Config{Name: a.Bucket, ID: a.ID, Version: a.Version,
				Capacity: a.Capacity, PermitsMicro: pm, PeriodSeconds: a.Period, Apps: a.Apps, Shadow: a.Shadow, Kind: a.Kind,
				SlotMillis: a.SlotMS, Bounds: base.bounds(a, redisNow), Reserve: a.Reserve}, a.Force)
			var name string
			if json.Unmarshal(s.Want, &name) != nil {
				t.Fatalf("%s: bad want %s", where, s.Want)
			}
			if want, ok := applyNames[name]; !ok || err != nil || out != want {
				t.Errorf("%s: apply keyed: %v %v, want %s", where, out, err, s.Want)
			}
		case s.Override != nil:
			o := s.Override
			pm, err := redisscript.ParsePermits(o.Permits)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			match := map[string]string{"exact": redisscript.MatchExact, "prefix": redisscript.MatchPrefix}[o.Match]
			out, err := redisscript.ApplyOverride(ctx, srv.rdb, srv.ks, redisscript.Override{Bucket: o.Bucket, BucketID: o.BucketID,
				ID: o.ID, Version: o.Version, Match: match, Key: o.Key, Capacity: o.Capacity, PermitsMicro: pm,
				PeriodSeconds: o.Period, Shadow: o.Shadow}, false)
			var name string
			if json.Unmarshal(s.Want, &name) != nil {
				t.Fatalf("%s: bad want %s", where, s.Want)
			}
			if err != nil || out.String() != name {
				t.Errorf("%s: override: %v %v, want %s", where, out, err, s.Want)
			}
		case s.Adjust != nil:
			checkAdjust(t, where, s.Adjust, s.Want, func() (redisscript.AdjustAnswer, int, bool, error) {
				if mode == "script" {
					return scriptAdjust(ctx, srv, s.Adjust)
				}
				return clientAdjust(ctx, limiterFor(t, srv, s.Adjust.App), s.Adjust)
			})
		case s.AcquireAll != nil:
			checkAll(t, where, s.AcquireAll, s.Want, func() (redisscript.AllAnswer, int, bool, error) {
				if mode == "script" {
					return scriptAll(ctx, srv, s.AcquireAll)
				}
				return clientAll(criticalIf(ctx, s.AcquireAll.Critical), limiterFor(t, srv, s.AcquireAll.App), s.AcquireAll)
			})
		case s.Lease != nil:
			if mode != "script" {
				t.Fatalf("%s: a lease step runs on the scripts only; the case must list its implementations", where)
			}
			checkLease(t, where, s.Lease, s.Want, func() (redisscript.LeaseAnswer, error) { return scriptLease(ctx, srv, s.Lease) })
		case s.Slot != nil:
			checkSlot(t, where, s.Slot, s.Want, func() (redisscript.SlotAnswer, int, error) {
				if mode == "script" {
					return scriptSlot(ctx, srv, s.Slot)
				}
				return handles.run(ctx, t, where, s.Slot)
			})
		}
	}
}

// criticalIf marks ctx critical when the step says so.
func criticalIf(ctx context.Context, critical bool) context.Context {
	if critical {
		return client.Critical(ctx)
	}
	return ctx
}

func checkAcquire(t *testing.T, where string, want json.RawMessage, acquire func() (redisscript.KeyedAnswer, int, bool, error)) {
	t.Helper()
	var w wantAnswer
	if err := strictUnmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad want %s: %v", where, want, err)
	}
	got, fields, skip, err := acquire()
	if skip {
		return
	}
	if w.Error != "" {
		if err == nil {
			t.Errorf("%s: got %+v, want an error containing %q", where, got, w.Error)
		} else if fields == 7 && !strings.Contains(err.Error(), w.Error) {
			t.Errorf("%s: got %v, want an error containing %q", where, err, w.Error)
		}
		return
	}
	code, ok := codeNames[w.Code]
	if !ok {
		t.Fatalf("%s: unknown code %q", where, w.Code)
	}
	if err != nil {
		t.Errorf("%s: %v, want %s", where, err, w.Code)
		return
	}
	if got.Code != code {
		t.Errorf("%s: code %d, want %s (%+v)", where, got.Code, w.Code, got)
		return
	}
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
	if fields == 8 {
		if src, ok := sourceNames[w.Source]; !ok || got.Source != src {
			t.Errorf("%s: source %d, want %q", where, got.Source, w.Source)
		}
	}
}
