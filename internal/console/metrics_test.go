package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/router"
	"github.com/sluicehq/sluice/internal/signin"
	"github.com/sluicehq/sluice/internal/testenv"
)

// newMeteredEnv is a console with metrics on a fresh registry and the JSON
// API mounted, as cmd/admin runs it.
func newMeteredEnv(t *testing.T) (*env, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e := newEnvOn(t, testenv.MySQL(t), func(s *setup) {
		s.metrics = reg
		s.api = true
	})
	return e, reg
}

// requests reads sluice_console_http_requests_total for one label set,
// once it reaches want or after ten seconds. A request is counted when its
// handler returns, which can be just after the client has read the whole
// response.
func requests(t *testing.T, e *env, route, method, code string, want float64) float64 {
	t.Helper()
	return eventually(func() float64 {
		mfs, err := e.reg.Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "sluice_console_http_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if l := labels(m); l["route"] == route && l["method"] == method && l["code"] == code {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}, want)
}

// observations counts the latency samples of route and method.
func observations(t *testing.T, reg *prometheus.Registry, route, method string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_console_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels(m)["route"] == route && labels(m)["method"] == method {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestRequestMetricsUseRouteTemplates(t *testing.T) {
	e, reg := newMeteredEnv(t)
	olga := e.user("olga", false)
	e.app("alpha", "olga")
	e.bucket("alpha-api", "alpha")
	e.bucket("alpha-web", "alpha")
	b := e.browser()
	b.signIn(olga)

	wantStatus(t, "bucket", b.get("/buckets/alpha-api"), http.StatusOK)
	wantStatus(t, "bucket", b.get("/buckets/alpha-web"), http.StatusOK)
	wantStatus(t, "missing bucket", b.get("/buckets/nope"), http.StatusNotFound)
	if got := requests(t, e, "/buckets/:bucket", "GET", "200", 2); got != 2 {
		t.Errorf("GET /buckets/:bucket 200 = %v, want 2", got)
	}
	if got := requests(t, e, "/buckets/:bucket", "GET", "404", 1); got != 1 {
		t.Errorf("GET /buckets/:bucket 404 = %v, want 1", got)
	}
	if got := eventually(func() uint64 { return observations(t, reg, "/buckets/:bucket", "GET") }, 3); got != 3 {
		t.Errorf("latency samples of GET /buckets/:bucket = %d, want 3", got)
	}

	// Unknown paths, unknown methods and cross-origin refusals all land in
	// one series each, whatever the URL.
	for i, p := range []string{"/no/such/page", "/wp-admin.php", "/buckets/a/b/c/d"} {
		wantStatus(t, p, b.get(p), http.StatusNotFound)
		if got := requests(t, e, router.UnmatchedRoute, "GET", "404", float64(i+1)); got != float64(i+1) {
			t.Errorf("after %s: unmatched GET 404 = %v, want %d", p, got, i+1)
		}
	}
	r := b.postWith("/buckets", url.Values{"name": {"x"}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	wantStatus(t, "cross-origin post", r, http.StatusForbidden)
	if got := requests(t, e, router.UnmatchedRoute, "POST", "403", 1); got != 1 {
		t.Errorf("unmatched POST 403 = %v, want 1", got)
	}
	req, _ := http.NewRequest("BREW", e.srv.URL+"/buckets", nil)
	b.do(req)
	if n := countWhere(t, reg, func(map[string]string) bool { return true }); n == 0 {
		t.Fatal("no request series")
	}
	if n := countWhere(t, reg, func(l map[string]string) bool { return l["method"] == "BREW" }); n != 0 {
		t.Errorf("a made-up method became a label value")
	}
	if n := eventually(func() int {
		return countWhere(t, reg, func(l map[string]string) bool { return l["method"] == "other" })
	}, 1); n == 0 {
		t.Errorf("a made-up method was not counted as \"other\"")
	}
	if n := countWhere(t, reg, func(l map[string]string) bool {
		return strings.Contains(l["route"], "alpha") || strings.Contains(l["route"], "wp-admin")
	}); n != 0 {
		t.Errorf("%d series carry a raw URL as the route", n)
	}

	wantStatus(t, "static", b.get("/static/app.css"), http.StatusOK)
	if got := requests(t, e, "/static/*file", "GET", "200", 1); got != 1 {
		t.Errorf("GET /static/*file 200 = %v, want 1", got)
	}
	// The JSON API is labelled by its own route patterns.
	wantStatus(t, "openapi", b.get("/api/v1/openapi.json"), http.StatusOK)
	if got := requests(t, e, "/api/v1/openapi.json", "GET", "200", 1); got != 1 {
		t.Errorf("GET /api/v1/openapi.json 200 = %v, want 1", got)
	}
	wantStatus(t, "api bucket without token", b.get("/api/v1/buckets/alpha-api"), http.StatusUnauthorized)
	if got := requests(t, e, "/api/v1/buckets/{bucket}", "GET", "401", 1); got != 1 {
		t.Errorf("GET /api/v1/buckets/{bucket} 401 = %v, want 1", got)
	}
}

// eventually calls f until it returns at least want, for at most ten seconds,
// and returns its last answer.
func eventually[N int | uint64 | float64](f func() N, want N) N {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := f()
		if got >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countWhere counts the request series whose labels satisfy keep.
func countWhere(t *testing.T, reg *prometheus.Registry, keep func(map[string]string) bool) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "sluice_console_http_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			if keep(labels(m)) {
				n++
			}
		}
	}
	return n
}

func TestSignInMetrics(t *testing.T) {
	e, _ := newMeteredEnv(t)
	e.user("alice", false)
	signins := func(result string) float64 {
		return testutil.ToFloat64(e.s.signins.WithLabelValues(result))
	}
	for _, r := range []string{signinSuccess, signinFailure, signinThrottled} {
		if got := signins(r); got != 0 {
			t.Fatalf("signins{result=%q} starts at %v", r, got)
		}
	}

	r := e.browser().post("/login", url.Values{"username": {"alice"}, "password": {testPassword}})
	wantStatus(t, "sign in", r, http.StatusSeeOther)
	if signins(signinSuccess) != 1 || signins(signinFailure) != 0 {
		t.Fatalf("after one success: success=%v failure=%v", signins(signinSuccess), signins(signinFailure))
	}
	// Five failures spend the user name's allowance; the next attempt is
	// throttled before any password is checked.
	for i := 0; i < signin.DefaultPolicy.User.Failures; i++ {
		r := e.browser().post("/login", url.Values{"username": {"alice"}, "password": {"wrong password!"}})
		wantStatus(t, "wrong password", r, http.StatusUnauthorized)
	}
	r = e.browser().post("/login", url.Values{"username": {"alice"}, "password": {testPassword}})
	wantStatus(t, "throttled", r, http.StatusTooManyRequests)
	if got := []float64{signins(signinSuccess), signins(signinFailure), signins(signinThrottled)}; got[0] != 1 || got[1] != 5 || got[2] != 1 {
		t.Fatalf("success, failure, throttled = %v, want [1 5 1]", got)
	}
	if got := requests(t, e, "/login", "POST", "429", 1); got != 1 {
		t.Errorf("POST /login 429 = %v, want 1", got)
	}
}

func TestMetricsOffByDefault(t *testing.T) {
	e := newEnv(t)
	if e.s.signins != nil {
		t.Fatal("metrics are on without a registerer")
	}
	// Signing in must not touch the absent collectors.
	e.user("alice", false)
	r := e.browser().post("/login", url.Values{"username": {"alice"}, "password": {testPassword}})
	wantStatus(t, "sign in", r, http.StatusSeeOther)
}

func TestTwoConsolesShareOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := newSignins(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSignins(reg)
	if err != nil {
		t.Fatalf("a second console on the same registry: %v", err)
	}
	a.WithLabelValues(signinSuccess).Inc()
	b.WithLabelValues(signinSuccess).Inc()
	if got := testutil.ToFloat64(a.WithLabelValues(signinSuccess)); got != 2 {
		t.Fatalf("shared sign-in counter = %v, want 2", got)
	}
	// A different collector under one of our names is a real conflict.
	clash := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_console_signins_total", Help: "x"})
	other := prometheus.NewRegistry()
	other.MustRegister(clash)
	if _, err := newSignins(other); err == nil {
		t.Fatal("a clashing collector was accepted")
	}
}
