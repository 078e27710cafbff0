package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// tokensOf reads the stored tokens field of bucket name.
func (e env) tokensOf(t testing.TB, name string) float64 {
	t.Helper()
	tokens, _, ok, err := redisscript.ReadStored(context.Background(), e.rdb, e.ks(), name)
	if err != nil || !ok {
		t.Fatalf("tokens of %s: %v (a state: %v)", name, err, ok)
	}
	return tokens
}

// slow is a refill slow enough that counts stay whole while a test runs:
// a millionth of a permit per hour.
const slow = 1

func TestAcquireAll(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "a", 10, slow, 3600, "svc")
	e.define(t, "b", 3, slow, 3600, "svc")
	e.define(t, "c", 5, slow, 3600, "svc")
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	ctx := context.Background()

	res, err := l.AcquireAll(ctx, []client.Request{{Bucket: "a", N: 4}, {Bucket: "b", N: 2}})
	if err != nil || !res.Allowed || len(res.Each) != 2 || res.Each[0].Remaining != 6 || res.Each[1].Remaining != 1 ||
		res.Each[1].Limit != 3 || !res.Each[0].Allowed {
		t.Fatalf("both granted: %+v %v", res, err)
	}
	// The last bucket denies: nothing is charged anywhere (Q16).
	res, err = l.AcquireAll(ctx, []client.Request{{Bucket: "a", N: 4}, {Bucket: "c", N: 1}, {Bucket: "b", N: 2}})
	if err != nil || res.Allowed || res.Each[0].Allowed || res.Each[2].RetryAfter <= 0 || res.Each[0].RetryAfter != 0 ||
		res.RetryAfter != res.Each[2].RetryAfter {
		t.Fatalf("last denies: %+v %v", res, err)
	}
	for name, want := range map[string]float64{"a": 6, "b": 1, "c": 5} {
		if got := e.tokensOf(t, name); got < want || got > want+0.001 {
			t.Errorf("%s holds %v tokens, want %v: a denied set charged it", name, got, want)
		}
	}
	// Errors name the request.
	_, err = l.AcquireAll(ctx, []client.Request{{Bucket: "a", N: 1}, {Bucket: "missing", N: 1}})
	if !errors.Is(err, client.ErrUnknownBucket) || !contains(err.Error(), `request 1 (bucket "missing")`) {
		t.Errorf("unknown bucket: %v", err)
	}
	if _, err = l.AcquireAll(ctx, []client.Request{{Bucket: "b", N: 2}, {Bucket: "b", N: 2}}); !errors.Is(err, client.ErrExceedsCapacity) {
		t.Errorf("together over capacity: %v", err)
	}
	if _, err = l.AcquireAll(ctx, nil); !errors.Is(err, client.ErrInvalidN) {
		t.Errorf("no requests: %v", err)
	}
	if _, err = l.AcquireAll(ctx, []client.Request{{Bucket: "a", N: 0}}); !errors.Is(err, client.ErrInvalidN) {
		t.Errorf("n = 0: %v", err)
	}
	if got := e.tokensOf(t, "a"); got < 6 || got > 6.001 {
		t.Errorf("a holds %v after failed sets, want 6", got)
	}
	other := e.limiter(t, "billing", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	if _, err = other.AcquireAll(ctx, []client.Request{{Bucket: "a", N: 1}}); !errors.Is(err, client.ErrAppNotAllowed) {
		t.Errorf("other app: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestAcquireAllFailurePolicy(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "a", 10, slow, 3600, "svc")
	open := e.limiter(t, "svc", client.WithFailurePolicy(client.FailOpen), client.WithTimeout(5*time.Second))
	local := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), client.WithTimeout(5*time.Second))
	ctx := context.Background()
	reqs := []client.Request{{Bucket: "a", N: 1}, {Bucket: "a", N: 1}}
	if _, err := local.AcquireAll(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if res, err := open.AcquireAll(ctx, reqs); err != nil || !res.Allowed || !res.Fallback || len(res.Each) != 2 {
		t.Errorf("fail open: %+v %v", res, err)
	}
	if res, err := local.AcquireAll(ctx, reqs); !errors.Is(err, client.ErrUnavailable) || res.Allowed || !res.Fallback {
		t.Errorf("fail local: %+v %v", res, err)
	}
	if _, err := local.Refund(ctx, "a", 1); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("refund while redis is down: %v", err)
	}
}

func TestRefundAndCharge(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "r", 10, slow, 3600, "svc")
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	ctx := context.Background()
	if res, err := l.Acquire(ctx, "r", 8); err != nil || !res.Allowed {
		t.Fatal(res, err)
	}
	// Cheaper than expected: give 5 back.
	if a, err := l.Refund(ctx, "r", 5); err != nil || a.Applied != 5 || a.Remaining != 7 || a.Limit != 10 {
		t.Fatalf("refund: %+v %v", a, err)
	}
	// Never above capacity.
	if a, err := l.Refund(ctx, "r", 50); err != nil || a.Applied != 3 || a.Remaining != 10 {
		t.Fatalf("refund past capacity: %+v %v", a, err)
	}
	// A late charge drives the bucket into debt, bounded by the capacity.
	if a, err := l.Charge(ctx, "r", 13); err != nil || a.Applied != 13 || a.Remaining != -3 {
		t.Fatalf("charge into debt: %+v %v", a, err)
	}
	if res, err := l.Acquire(ctx, "r", 1); err != nil || res.Allowed {
		t.Fatalf("acquire in debt: %+v %v", res, err)
	}
	if a, err := l.Charge(ctx, "r", 1_000_000_000); err != nil || a.Applied != 7 || a.Remaining != -10 {
		t.Fatalf("charge past the bound: %+v %v", a, err)
	}
	if got := e.tokensOf(t, "r"); got < -10 || got > -9.999 {
		t.Fatalf("tokens %v, want -10", got)
	}
	if _, err := l.Charge(ctx, "r", 0); !errors.Is(err, client.ErrInvalidN) {
		t.Errorf("charge 0: %v", err)
	}
	if _, err := l.Refund(ctx, "nope", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("refund to an unknown bucket: %v", err)
	}
}

func TestReserve(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "q", 10, slow, 3600, "svc")
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	ctx := context.Background()
	r, err := l.Reserve(ctx, "q", 4)
	if err != nil || !r.OK() || r.Delay() != 0 || r.Limit() != 10 {
		t.Fatalf("reserve from a full bucket: %+v %v", r, err)
	}
	if err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Into debt: the holder must wait (at this rate, for ages).
	r2, err := l.Reserve(ctx, "q", 10)
	if err != nil || !r2.OK() || r2.Delay() < time.Hour {
		t.Fatalf("reserve into debt: delay %v %v", r2.Delay(), err)
	}
	if got := e.tokensOf(t, "q"); got < -4 || got > -3.999 {
		t.Fatalf("tokens %v, want -4", got)
	}
	// Past the bound: not reserved, nothing taken.
	r3, err := l.Reserve(ctx, "q", 7)
	if err != nil || r3.OK() || r3.RetryAfter() <= 0 {
		t.Fatalf("reserve past the bound: %+v %v", r3, err)
	}
	if err := r3.Wait(ctx); !errors.Is(err, client.ErrNotReserved) {
		t.Errorf("wait on a denied reservation: %v", err)
	}
	// A deadline before the delay: Wait gives up at once and cancels.
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r2.Wait(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v", err)
	}
	if got := e.tokensOf(t, "q"); got < 6 || got > 6.001 {
		t.Fatalf("tokens %v after the cancel, want 6", got)
	}
	// Cancelling twice gives back once.
	if err := r2.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.tokensOf(t, "q"); got < 10 || got > 10.001 {
		t.Fatalf("tokens %v, want 10", got)
	}
	if _, err := l.Reserve(ctx, "q", 11); !errors.Is(err, client.ErrExceedsCapacity) {
		t.Errorf("reserve over capacity: %v", err)
	}
}

// A shadow bucket lets the set through and says it would have denied.
func TestAcquireAllShadow(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "real", 10, slow, 3600, "svc")
	e.define(t, "trial", 1, slow, 3600, "svc")
	if err := e.rdb.HSet(context.Background(), e.ks().Bucket("trial"), redisscript.FieldShadow, "1").Err(); err != nil {
		t.Fatal(err)
	}
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	ctx := context.Background()
	for i := range 2 {
		res, err := l.AcquireAll(ctx, []client.Request{{Bucket: "real", N: 1}, {Bucket: "trial", N: 1}})
		if err != nil || !res.Allowed || res.Each[0].WouldDeny || res.Each[1].WouldDeny != (i == 1) || res.RetryAfter != 0 {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
	}
	if got := e.tokensOf(t, "real"); got < 8 || got > 8.001 {
		t.Errorf("real holds %v, want 8", got)
	}
}
