package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/client"
)

func TestMiddleware(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "api", 2, 1_000_000, 60, "svc") // 2 tokens, 1 per minute
	e.define(t, "others", 5, 1_000_000, 1, "billing")
	l := e.limiter(t, "svc")
	routes := map[string]string{"/limited": "api", "/free": "", "/typo": "nope", "/foreign": "others"}
	h := client.Middleware(l, func(r *http.Request) string { return routes[r.URL.Path] })(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))

	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "1"}, {200, "0"}, {429, "0"}} {
		rec := get("/limited")
		if rec.Code != want.status || rec.Header().Get("RateLimit-Limit") != "2" ||
			rec.Header().Get("RateLimit-Remaining") != want.remaining {
			t.Errorf("request %d: %d %v", i, rec.Code, rec.Header())
		}
		reset, _ := strconv.Atoi(rec.Header().Get("RateLimit-Reset"))
		if reset < 55 || reset > 120 {
			t.Errorf("request %d: RateLimit-Reset %d, want about 60..120 s", i, reset)
		}
		if want.status == 429 {
			if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 55 || ra > 60 {
				t.Errorf("Retry-After %q, want about 60", rec.Header().Get("Retry-After"))
			}
		} else if rec.Header().Get("Retry-After") != "" || rec.Body.String() != "ok" {
			t.Errorf("request %d: allowed but %v %q", i, rec.Header(), rec.Body)
		}
	}
	for range 5 {
		if rec := get("/free"); rec.Code != 200 || rec.Header().Get("RateLimit-Limit") != "" {
			t.Errorf("unlimited route: %d %v", rec.Code, rec.Header())
		}
	}
	if rec := get("/typo"); rec.Code != 500 || rec.Body.String() == "ok" {
		t.Errorf("unknown bucket: %d %q", rec.Code, rec.Body)
	}
	if rec := get("/foreign"); rec.Code != 500 || rec.Body.String() == "ok" {
		t.Errorf("app not allowed: %d %q", rec.Code, rec.Body)
	}
	// A client that went away is not answered.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/limited", nil).WithContext(ctx))
	if rec.Body.String() == "ok" {
		t.Error("a cancelled request reached the handler")
	}
}

func TestStatusAndHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	client.SetHeaders(h, client.Result{Allowed: true, Fallback: true}) // fail open: nothing known
	if len(h) != 0 {
		t.Errorf("fail-open headers: %v", h)
	}
	client.SetHeaders(h, client.Result{Limit: 10, Remaining: 0, RetryAfter: 1500 * 1e6, ResetAfter: 2001 * 1e6})
	if h.Get("Retry-After") != "2" || h.Get("RateLimit-Reset") != "3" || h.Get("RateLimit-Limit") != "10" {
		t.Errorf("headers: %v", h)
	}
	h = http.Header{}
	client.SetHeaders(h, client.Result{Limit: 10, RetryAfter: 1}) // 1 ns rounds up to 1 s
	if h.Get("Retry-After") != "1" {
		t.Errorf("tiny Retry-After: %v", h)
	}
	for _, c := range []struct {
		res  client.Result
		err  error
		want int
	}{
		{client.Result{Allowed: true}, nil, 0},
		{client.Result{}, nil, 429},
		{client.Result{Fallback: true}, client.ErrUnavailable, 503},
		{client.Result{}, client.ErrUnknownBucket, 500},
		{client.Result{}, client.ErrAppNotAllowed, 500},
	} {
		if got := client.Status(c.res, c.err); got != c.want {
			t.Errorf("Status(%+v, %v) = %d, want %d", c.res, c.err, got, c.want)
		}
	}
}
