package clientmetrics_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/clientmetrics"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// TestMisconfiguredBucketLoggedAndCounted: a route on a bucket that does
// not exist, or that the app may not use, denies every call. Allow and the
// middleware do not hide it: it is logged once a minute per bucket, and
// every such call is counted in the metrics. It lives in this module, not
// the client's, so that the client's module requires no Prometheus.
func TestMisconfiguredBucketLoggedAndCounted(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	cfg := redisscript.Config{Name: "theirs", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1_000_000,
		PeriodSeconds: 1, Apps: []string{"billing"}}
	if out, err := redisscript.Apply(context.Background(), rdb, redisscript.Keyspace{Prefix: prefix}, cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("define theirs: %v %v", out, err)
	}
	reg := prometheus.NewRegistry()
	m, err := clientmetrics.New(reg, "svc")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	// A timeout of 2 s: a call that missed the 50 ms default on a saturated
	// machine would get the policy's answer, not Redis's.
	l, err := client.New(rdb, "svc", client.WithKeyPrefix(prefix), client.WithTimeout(2*time.Second),
		client.WithObserver(m.Observe), client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
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
	for _, c := range []struct {
		bucket, result string
		want           float64
	}{
		{"missing", clientmetrics.ResultUnknownBucket, 100},
		{"theirs", clientmetrics.ResultAppNotAllowed, 50},
		{clientmetrics.BucketInvalid, clientmetrics.ResultUnknownBucket, 50},
	} {
		if got := decisions(t, reg, "svc", c.bucket, c.result); got != c.want {
			t.Errorf("decisions %s/%s = %v, want %v", c.bucket, c.result, got, c.want)
		}
	}
}

// syncBuffer is a log destination the Limiter's goroutines may write to
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
