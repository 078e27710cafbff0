package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// shadow applies a new version of bucket name with the shadow flag on.
func (e env) shadow(t *testing.T, name string, version int64, on bool) {
	t.Helper()
	ctx := context.Background()
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), name)
	if err != nil || !st.Exists {
		t.Fatalf("read %s: %+v %v", name, st, err)
	}
	cfg := st.Config
	cfg.Version, cfg.Shadow = version, on
	if out, err := redisscript.Apply(ctx, e.rdb, e.ks(), cfg, false); err != nil || out != redisscript.Updated {
		t.Fatalf("shadow %s: %v %v", name, out, err)
	}
}

// A bucket in shadow mode drained past empty keeps allowing, says it would
// have denied, and never goes below zero tokens; the middleware lets the
// requests through. A new version without shadow mode denies.
func TestShadowBucket(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "trial", 2, slow, 3600, "svc") // no refill to speak of
	e.shadow(t, "trial", 2, true)
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	ctx := context.Background()

	if res, err := l.Acquire(ctx, "trial", 2); err != nil || !res.Allowed || res.WouldDeny || res.Remaining != 0 {
		t.Fatalf("first acquire: %+v %v", res, err)
	}
	for i := range 5 {
		res, err := l.Acquire(ctx, "trial", 1)
		if err != nil || !res.Allowed || !res.WouldDeny || res.Fallback || res.Remaining != 0 || res.Limit != 2 ||
			res.RetryAfter <= 0 {
			t.Fatalf("acquire %d past empty: %+v %v, want allowed and would deny", i, res, err)
		}
	}
	if !l.Allow(ctx, "trial") {
		t.Fatal("Allow refused a bucket in shadow mode")
	}
	if got := e.tokensOf(t, "trial"); got < 0 || got > 0.001 {
		t.Fatalf("tokens %v, want 0: a would-deny took tokens", got)
	}

	served := 0
	h := client.Middleware(l, func(*http.Request) string { return "trial" })(http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { served++ }))
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		return w
	}
	if w := get(); w.Code != http.StatusOK || served != 1 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("middleware in shadow mode: %d, served %d, headers %v", w.Code, served, w.Header())
	}

	e.shadow(t, "trial", 3, false)
	if res, err := l.Acquire(ctx, "trial", 1); err != nil || res.Allowed || res.WouldDeny {
		t.Fatalf("shadow off: %+v %v, want denied", res, err)
	}
	if w := get(); w.Code != http.StatusTooManyRequests || served != 1 {
		t.Fatalf("middleware without shadow mode: %d, served %d", w.Code, served)
	}
}

// A would-deny answer teaches FailLocal the bucket's config like any
// answer: with Redis gone, the local policy answers the bucket instead of
// refusing it as unknown.
func TestShadowAnswerTeachesFailLocal(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "trial", 2, slow, 3600, "svc")
	e.shadow(t, "trial", 2, true)
	ctx := context.Background()
	drain := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed))
	if res, err := drain.Acquire(ctx, "trial", 2); err != nil || !res.Allowed || res.WouldDeny {
		t.Fatalf("drain: %+v %v", res, err)
	}
	local := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), quiet())
	blind := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), quiet()) // never sees "trial"
	if res, err := local.Acquire(ctx, "trial", 1); err != nil || !res.WouldDeny {
		t.Fatalf("local's only answer: %+v %v, want would deny", res, err)
	}
	srv.Kill()
	waitFallback(t, local, "trial")
	waitFallback(t, blind, "trial")
	if res, err := local.Acquire(ctx, "trial", 1); err != nil || !res.Fallback || res.Limit != 2 {
		t.Fatalf("local after a would-deny: %+v %v, want an answer of the local bucket", res, err)
	}
	if _, err := blind.Acquire(ctx, "trial", 1); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("blind: %v, want unavailable", err)
	}
}

// TestFailLocalHonoursShadow: FailLocal never refuses a bucket in shadow
// mode. The limiter learns the mode from a grant (protocol 2 answers carry
// it), and while Redis is away its local bucket, which starts empty,
// answers would deny where it lacks tokens, as Redis does.
func TestFailLocalHonoursShadow(t *testing.T) {
	t.Parallel()
	e, srv := privateRedis(t)
	e.define(t, "trial", 2, slow, 3600, "svc")
	e.shadow(t, "trial", 2, true)
	ctx := context.Background()
	local := e.limiter(t, "svc", client.WithFailurePolicy(client.FailLocal), quiet())
	if res, err := local.Acquire(ctx, "trial", 1); err != nil || !res.Allowed || res.WouldDeny {
		t.Fatalf("the only answer of Redis: %+v %v, want a plain grant", res, err)
	}
	srv.Kill()
	waitFallback(t, local, "trial")
	wouldDeny := 0
	for i := range 20 {
		res, err := local.Acquire(ctx, "trial", 1)
		if err != nil || !res.Allowed || !res.Fallback {
			t.Fatalf("call %d in fallback: %+v %v, want allowed by the local bucket", i, res, err)
		}
		if res.WouldDeny {
			wouldDeny++
		}
	}
	if wouldDeny == 0 {
		t.Fatal("the local bucket, empty at the outage's start, reported no would-deny")
	}
}
