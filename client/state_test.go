package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestLostBucketState: Redis flushed (as after a restart without
// persistence) answers "unknown bucket" for a bucket the Limiter saw a
// moment ago. Until the sync worker restores it, the failure policy
// answers, and the middleware never says 500. A bucket deleted on purpose
// (it leaves a tombstone), one never seen, and one not restored within the
// grace are unknown as before.
func TestLostBucketState(t *testing.T) {
	t.Parallel()
	e, _ := privateRedis(t)
	ctx := context.Background()
	e.define(t, "lost", 100, 1_000_000, 1, "svc")
	e.define(t, "gone", 100, 1_000_000, 1, "svc")
	var logs syncBuffer
	logger := client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	policies := []client.FailurePolicy{client.FailOpen, client.FailClosed, client.FailLocal}
	lims := map[client.FailurePolicy]*client.Limiter{}
	handlers := map[client.FailurePolicy]http.Handler{}
	for _, p := range policies {
		l := e.limiter(t, "svc", client.WithFailurePolicy(p), logger)
		lims[p] = l
		handlers[p] = client.Middleware(l, func(r *http.Request) string { return r.URL.Path[1:] })(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
		for _, b := range []string{"lost", "gone"} {
			if res, err := l.Acquire(ctx, b, 1); err != nil || !res.Allowed {
				t.Fatalf("%v %s: %+v %v", p, b, res, err)
			}
		}
	}
	short := e.limiter(t, "svc", client.WithStateLossGrace(300*time.Millisecond), quiet())
	if res, err := short.Acquire(ctx, "lost", 1); err != nil || !res.Allowed {
		t.Fatalf("short grace: %+v %v", res, err)
	}
	get := func(p client.FailurePolicy, path string) int {
		rec := httptest.NewRecorder()
		handlers[p].ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}

	if err := e.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if res, err := lims[client.FailOpen].Acquire(ctx, "lost", 1); err != nil || !res.Allowed || !res.Fallback {
			t.Fatalf("fail open, bucket lost: %+v %v", res, err)
		}
		if res, err := lims[client.FailClosed].Acquire(ctx, "lost", 1); !errors.Is(err, client.ErrUnavailable) || !res.Fallback {
			t.Fatalf("fail closed, bucket lost: %+v %v", res, err)
		}
		// The local bucket starts empty: a denial by the policy, no error.
		if res, err := lims[client.FailLocal].Acquire(ctx, "lost", 1); err != nil || !res.Fallback || res.Limit != 100 {
			t.Fatalf("local, bucket lost: %+v %v", res, err)
		}
		for _, p := range policies {
			if code := get(p, "/lost"); code == http.StatusInternalServerError {
				t.Fatalf("%v: the middleware answered 500 for a lost bucket", p)
			}
		}
	}
	if code := get(client.FailOpen, "/lost"); code != http.StatusOK {
		t.Errorf("fail open, lost bucket: %d", code)
	}
	if code := get(client.FailClosed, "/lost"); code != http.StatusServiceUnavailable {
		t.Errorf("fail closed, lost bucket: %d", code)
	}
	// Never seen: a configuration mistake, loud.
	if _, err := lims[client.FailOpen].Acquire(ctx, "never", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("never seen bucket: %v", err)
	}
	if code := get(client.FailOpen, "/never"); code != http.StatusInternalServerError {
		t.Errorf("never seen bucket: %d", code)
	}
	// Past the grace it is a configuration problem after all.
	time.Sleep(400 * time.Millisecond)
	if _, err := short.Acquire(ctx, "lost", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Errorf("lost bucket past the grace: %v", err)
	}
	// The sync worker restores it: Redis answers again, full.
	e.define(t, "lost", 100, 1_000_000, 1, "svc")
	for _, p := range policies {
		if res, err := lims[p].Acquire(ctx, "lost", 1); err != nil || !res.Allowed || res.Fallback {
			t.Errorf("%v after restore: %+v %v", p, res, err)
		}
	}
	if res, err := short.Acquire(ctx, "lost", 1); err != nil || !res.Allowed || res.Fallback {
		t.Errorf("short grace after restore: %+v %v", res, err)
	}

	// Deleted on purpose: the tombstone says so, and it is unknown at once.
	e.define(t, "gone", 100, 1_000_000, 1, "svc")
	for _, p := range policies {
		if _, err := lims[p].Acquire(ctx, "gone", 1); err != nil {
			t.Fatal(err)
		}
	}
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), "gone")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redisscript.Delete(ctx, e.rdb, e.ks(), "gone", st.Config.ID, st.Config.Version+1); err != nil {
		t.Fatal(err)
	}
	for _, p := range policies {
		if res, err := lims[p].Acquire(ctx, "gone", 1); !errors.Is(err, client.ErrUnknownBucket) || res.Allowed {
			t.Errorf("%v, deleted bucket: %+v %v", p, res, err)
		}
	}
	if !strings.Contains(logs.String(), "redis lost the bucket") || !strings.Contains(logs.String(), "bucket restored") {
		t.Errorf("loss and restore not logged:\n%s", logs.String())
	}
}
