package decision

import (
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestDenialsWithoutRedis: once Redis denied a bucket, the decision
// service answers its over-limit requests, over gRPC and HTTP, from its
// Limiter's denial cache, without a Redis command, with a retry-after.
func TestDenialsWithoutRedis(t *testing.T) {
	t.Parallel()
	private := testenv.StartRedis(t)
	// Entries kept an hour: a stalled test must not outlive them.
	st := newStackOn(t, private.Addr, ServerConfig{Client: []client.Option{client.WithDenialCache(time.Hour)}},
		gatewayBuckets, gatewayMappings)
	admin := redis.NewClient(&redis.Options{Addr: private.Addr})
	defer admin.Close()
	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	search := request("edge", 0, desc("generic_key", "search")) // capacity 3, 1 a day
	for i := 1; i <= 4; i++ {
		resp, err := e.ask(search)
		want := rlsv3.RateLimitResponse_OK
		if i == 4 {
			want = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("request %d: %v %v, want %v", i, resp, err, want)
		}
	}
	// Two INFOs in a row differ by what one INFO counts.
	infoCost := -commandsProcessed(t, admin) + commandsProcessed(t, admin)
	before := commandsProcessed(t, admin)
	for i := range 3 {
		resp, err := e.ask(search)
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT ||
			resp.GetStatuses()[0].GetDurationUntilReset().AsDuration() <= 0 {
			t.Fatalf("grpc, cached %d: %v %v", i, resp, err)
		}
		code, h, _ := httpAcquire(t, st.srv.HTTPAddr(), "POST", "Bearer "+st.edge, "search", 1)
		if code != 429 || h.Get("Retry-After") == "" {
			t.Fatalf("http, cached %d: %d %v", i, code, h)
		}
	}
	if n := commandsProcessed(t, admin) - before - infoCost; n != 0 {
		t.Fatalf("denials of a denied bucket cost %d redis commands, want 0", n)
	}
}
