package client_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/clientmetrics"
)

// TestMisconfiguredBucketLoggedAndCounted: a route on a bucket that does
// not exist, or that the app may not use, denies every call. Allow and the
// middleware do not hide it: it is logged once a minute per bucket, and
// every such call is counted in the metrics.
func TestMisconfiguredBucketLoggedAndCounted(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "theirs", 10, 1_000_000, 1, "billing")
	reg := prometheus.NewRegistry()
	m, err := clientmetrics.New(reg, "svc")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	l := e.limiter(t, "svc", client.WithObserver(m.Observe), client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	h := client.Middleware(l, func(r *http.Request) string { return r.URL.Path[1:] })(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	ctx := context.Background()
	for range 50 {
		for _, b := range []string{"missing", "theirs", "Not A Name"} {
			if l.Allow(ctx, b) {
				t.Fatalf("%s allowed", b)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/missing", nil))
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("middleware on a missing bucket: %d", rec.Code)
		}
	}
	lines := strings.Count(logs.String(), "cannot serve this app")
	for _, want := range []string{"bucket=missing", "bucket=theirs", `bucket="Not A Name"`, "unknown bucket", "app not allowed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if lines != 3 {
		t.Errorf("%d log lines for 200 refused calls on 3 buckets, want 3:\n%s", lines, logs.String())
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_client_decisions_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var bucket, result string
			for _, lp := range mt.GetLabel() {
				switch lp.GetName() {
				case "bucket":
					bucket = lp.GetValue()
				case "result":
					result = lp.GetValue()
				}
			}
			got[bucket+"/"+result] = mt.GetCounter().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"missing/" + clientmetrics.ResultUnknownBucket:                        100,
		"theirs/" + clientmetrics.ResultAppNotAllowed:                         50,
		clientmetrics.BucketInvalid + "/" + clientmetrics.ResultUnknownBucket: 50,
	} {
		if got[k] != want {
			t.Errorf("decisions %s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
}
