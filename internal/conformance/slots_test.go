package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// The slot step of concurrency limits (docs/protocol.md, "Conformance
// table"): op ("take", "release", "renew") of slot id of limit bucket,
// of key Key when it is given (even empty: a keyed call).
type slotStep struct {
	Bucket string  `json:"bucket"`
	Key    *string `json:"key"`
	App    string  `json:"app"`
	Op     string  `json:"op"`
	ID     string  `json:"id"`
}

// wantSlot is a slot call's wanted answer: its seven fields.
type wantSlot struct {
	Code    string `json:"code"`
	InUse   bound  `json:"in_use"`
	Limit   bound  `json:"limit"`
	RetryUS bound  `json:"retry_us"`
	SlotMS  bound  `json:"slot_ms"`
	Source  string `json:"source"`
	Shadow  bound  `json:"shadow"`
}

func (q *slotStep) String() string {
	if q.Key != nil {
		return fmt.Sprintf("slot %s[%q] %q %s %q", q.Bucket, *q.Key, q.App, q.Op, q.ID)
	}
	return fmt.Sprintf("slot %s %q %s %q", q.Bucket, q.App, q.Op, q.ID)
}

// checkSlot checks a slot answer; fields says what the implementation
// shows: 7 for the script; 5 for a client (no source or shadow flag),
// whose fields 2..5 are shown only for a decision on a slot it took
// (a refusal, or a slot never held, shows its code alone: 1).
func checkSlot(t *testing.T, where string, q *slotStep, want json.RawMessage,
	run func() (a redisscript.SlotAnswer, fields int, err error)) {
	t.Helper()
	where = where + ": " + q.String()
	var w wantSlot
	if err := strictUnmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad want %s: %v", where, want, err)
	}
	code := wantCode(t, where, w.Code)
	got, fields, err := run()
	if err != nil || got.Code != code {
		t.Errorf("%s: code %d %v, want %s (%+v)", where, got.Code, err, w.Code, got)
		return
	}
	check := []struct {
		name string
		got  int64
		want bound
	}{
		{"in_use", got.InUse, w.InUse}, {"limit", got.Limit, w.Limit}, {"retry_us", got.RetryAfterMicros, w.RetryUS},
		{"slot_ms", got.SlotMillis, w.SlotMS}, {"source", int64(got.Source), bound{}}, {"shadow", b2i(got.Shadow), w.Shadow},
	}
	if src, ok := sourceNames[w.Source]; ok {
		check[4].want = bound{int64(src), int64(src)}
	} else {
		t.Fatalf("%s: unknown source %q", where, w.Source)
	}
	for _, f := range check[:fields-1] {
		if !f.want.holds(f.got) {
			t.Errorf("%s: %s = %d, want %v", where, f.name, f.got, f.want)
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// scriptSlot runs the raw slot script (keyed when the step has a key).
func scriptSlot(ctx context.Context, srv server, q *slotStep) (redisscript.SlotAnswer, int, error) {
	keys := srv.ks.SlotKeys(q.Bucket, "")
	args := []any{q.App, q.Op, q.ID}
	if q.Key != nil {
		k := srv.ks.Keyed(q.Bucket, *q.Key)
		keys = []string{k.Config, k.Slots()}
		args = append(args, *q.Key)
	}
	a, err := redisscript.SlotRaw(ctx, srv.rdb, q.Key != nil, keys, args...)
	return a, 7, err
}

// slotHandles runs slot steps through a client.SlotTaker per app (the
// Limiter, memlimit): a take keeps the Slot under the step's id, and a
// release or renew calls that Slot's. A client chooses its own slot ids,
// so it cannot send a take of an id it holds, nor release an id it never
// took: such a step fails (the case must list its implementations).
type slotHandles struct {
	takers func(app string) client.SlotTaker
	held   map[string]*client.Slot
}

func (h *slotHandles) run(ctx context.Context, t *testing.T, where string, q *slotStep) (redisscript.SlotAnswer, int, error) {
	t.Helper()
	if h.held == nil {
		h.held = map[string]*client.Slot{}
	}
	s := h.held[q.ID]
	var res client.SlotResult
	var err error
	switch q.Op {
	case "take":
		if s != nil && s.Allowed {
			t.Fatalf("%s: a client cannot take a slot id it holds; list the case's implementations", where)
		}
		tk := h.takers(q.App)
		if tk == nil {
			return redisscript.SlotAnswer{Code: redisscript.AppNotAllowed}, 1, nil
		}
		if q.Key != nil {
			s, err = tk.TakeSlotKey(ctx, q.Bucket, *q.Key)
		} else {
			s, err = tk.TakeSlot(ctx, q.Bucket)
		}
		h.held[q.ID] = s
		res = s.SlotResult
	case "release", "renew":
		if s == nil {
			t.Fatalf("%s: a client cannot %s a slot it never took; list the case's implementations", where, q.Op)
		}
		if !s.Allowed {
			// Never held: the client answers without a call.
			return redisscript.SlotAnswer{Code: redisscript.Denied}, 1, nil
		}
		if q.Op == "release" {
			res, err = s.Release(ctx)
		} else {
			res, err = s.Renew(ctx)
		}
	default:
		t.Fatalf("%s: a client cannot send the op %q; list the case's implementations", where, q.Op)
	}
	return slotAnswerOf(res, err)
}

// slotAnswerOf is a client's SlotResult in the table's terms.
func slotAnswerOf(res client.SlotResult, err error) (redisscript.SlotAnswer, int, error) {
	a := redisscript.SlotAnswer{InUse: res.InUse, Limit: res.Limit, RetryAfterMicros: res.RetryAfter.Microseconds(),
		SlotMillis: res.Lease.Milliseconds()}
	switch {
	case res.Fallback:
		return a, 0, fmt.Errorf("answered by the failure policy: %v", err)
	case err == nil && res.WouldDeny:
		a.Code = redisscript.WouldDeny
	case err == nil && res.Allowed:
		a.Code = redisscript.Allowed
	case err == nil:
		a.Code = redisscript.Denied
	case errors.Is(err, client.ErrUnknownBucket):
		return redisscript.SlotAnswer{Code: redisscript.UnknownBucket}, 1, nil
	case errors.Is(err, client.ErrAppNotAllowed):
		return redisscript.SlotAnswer{Code: redisscript.AppNotAllowed}, 1, nil
	case errors.Is(err, client.ErrWrongKind):
		return redisscript.SlotAnswer{Code: redisscript.WrongKind}, 1, nil
	case errors.Is(err, client.ErrInvalidKey):
		return redisscript.SlotAnswer{Code: redisscript.InvalidKey}, 1, nil
	default:
		return a, 0, err
	}
	return a, 5, nil
}

// limiterTakers gives a client.Limiter per app on srv, failing closed, or
// nil for an app name the client refuses.
func limiterTakers(t *testing.T, srv server) func(app string) client.SlotTaker {
	limiters := map[string]client.SlotTaker{}
	return func(app string) client.SlotTaker {
		if l, ok := limiters[app]; ok {
			return l
		}
		l, err := client.New(srv.rdb, app, client.WithKeyPrefix(srv.ks.Prefix), client.WithFailurePolicy(client.FailClosed),
			client.WithTimeout(30*time.Second))
		if err != nil {
			return nil
		}
		t.Cleanup(func() { l.Close() })
		limiters[app] = l
		return l
	}
}

// TestReadSlots: the console's read of a concurrency limit's slots, on
// both servers: the slots in use on Redis's clock, every member the set
// keeps, and the first and last expiry; reading purges nothing.
func TestReadSlots(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		cfg := redisscript.Config{Name: "jobs", ID: 1, Version: 1, Capacity: 5, Apps: []string{"svc"},
			Kind: redisscript.KindConcurrency, SlotMillis: 60_000}
		if out := s.apply(t, cfg, false); out != redisscript.Created {
			t.Fatalf("apply: %v", out)
		}
		st, err := redisscript.ReadSlots(ctx, s.rdb, s.ks, "jobs", "")
		if err != nil || st.InUse != 0 || st.Held != 0 || !st.NextExpiry.IsZero() || st.Now.IsZero() {
			t.Fatalf("empty: %+v %v", st, err)
		}
		for _, id := range []string{"a", "b"} {
			if a, err := redisscript.RunSlot(ctx, s.rdb, s.ks, "jobs", "", "svc", redisscript.SlotTake, id); err != nil ||
				a.Code != redisscript.Allowed {
				t.Fatalf("take %s: %+v %v", id, a, err)
			}
		}
		// An expired slot (its holder died) stays a member until a call purges it.
		if err := s.rdb.ZAdd(ctx, s.ks.Slots("jobs"), redis.Z{Score: 1, Member: "dead"}).Err(); err != nil {
			t.Fatal(err)
		}
		st, err = redisscript.ReadSlots(ctx, s.rdb, s.ks, "jobs", "")
		if err != nil || st.InUse != 2 || st.Held != 3 || st.NextExpiry.After(st.LastExpiry) ||
			st.NextExpiry.Sub(st.Now) <= 0 || st.LastExpiry.Sub(st.Now) > time.Minute {
			t.Fatalf("two held, one expired: %+v %v", st, err)
		}
		if st2, _ := redisscript.ReadSlots(ctx, s.rdb, s.ks, "jobs", ""); st2.Held != 3 {
			t.Errorf("reading purged: %+v", st2)
		}
		// A key of a keyed limit.
		cfg.Name, cfg.ID = "per-user", 2
		if _, err := redisscript.ApplyKeyed(ctx, s.rdb, s.ks, cfg, false); err != nil {
			t.Fatal(err)
		}
		if a, err := redisscript.RunSlot(ctx, s.rdb, s.ks, "per-user", "ann", "svc", redisscript.SlotTake, "x"); err != nil ||
			a.Code != redisscript.Allowed {
			t.Fatalf("keyed take: %+v %v", a, err)
		}
		if st, err := redisscript.ReadSlots(ctx, s.rdb, s.ks, "per-user", "ann"); err != nil || st.InUse != 1 {
			t.Errorf("a key's slots: %+v %v", st, err)
		}
		if st, err := redisscript.ReadSlots(ctx, s.rdb, s.ks, "per-user", "bob"); err != nil || st.InUse != 0 {
			t.Errorf("another key's slots: %+v %v", st, err)
		}
	})
}
