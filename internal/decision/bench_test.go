package decision

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"
)

// The service's own work per request, without a transport, on a bucket
// that is exhausted: the answer most requests get under a demand far above
// the limit (docs/benchmarks.md, the decision service). Run with
// -benchmem; the transports' cost is measured by the harness in bench/.
func BenchmarkDecideDenied(b *testing.B) {
	st := newBenchStack(b)
	b.Run("grpc", func(b *testing.B) {
		r := &rlsServer{s: st.srv.Service}
		ctx := metadata.NewIncomingContext(bg, metadata.Pairs("authorization", "Bearer "+st.edge))
		req := request("edge", 0, desc("generic_key", "checkout"))
		b.ReportAllocs()
		for b.Loop() {
			resp, err := r.ShouldRateLimit(ctx, req)
			if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
				b.Fatalf("%v, %v", resp, err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		h := HTTPHandler(st.srv.Service)
		body := []byte(`{"bucket":"checkout"}`)
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/v1/acquire", bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+st.edge)
			h.ServeHTTP(w, r)
			if w.Code != http.StatusTooManyRequests {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}

// newBenchStack is a service whose bucket checkout is exhausted.
func newBenchStack(b *testing.B) *stack {
	b.Helper()
	st := newStack(b, ServerConfig{}, gatewayBuckets, gatewayMappings)
	r := &rlsServer{s: st.srv.Service}
	ctx := metadata.NewIncomingContext(bg, metadata.Pairs("authorization", "Bearer "+st.edge))
	for range 6 {
		if _, err := r.ShouldRateLimit(ctx, request("edge", 0, desc("generic_key", "checkout"))); err != nil {
			b.Fatal(err)
		}
	}
	return st
}
