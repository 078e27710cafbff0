package decision

import (
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestDeniedRequestChargesNothing: a request whose descriptors all map to
// plain buckets is charged atomically, so when its last descriptor denies,
// the buckets before it keep every token.
func TestDeniedRequestChargesNothing(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, gatewayBuckets, gatewayMappings)
	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	// Empty checkout (5 tokens, 1 a day).
	for i := range 5 {
		if resp, err := e.ask(request("edge", 0, desc("generic_key", "checkout"))); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("checkout %d: %v %v", i, resp, err)
		}
	}
	for i := range 3 {
		resp, err := e.ask(request("edge", 0, desc("generic_key", "search"), desc("generic_key", "checkout")))
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("search+checkout %d: %v %v", i, resp, err)
		}
	}
	// search (3 tokens) was never charged: all three are still there.
	for i := range 3 {
		resp, err := e.ask(request("edge", 0, desc("generic_key", "search")))
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != uint32(2-i) {
			t.Fatalf("search %d after denied pairs: %v %v", i, resp, err)
		}
	}
	// Both allowed: both charged in the one call.
	resp, err := e.ask(request("edge", 0, desc("generic_key", "slow"), desc("generic_key", "slow")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("slow twice: %v %v", resp, err)
	}
	tokens, _, _, err := redisscript.ReadStored(bg, st.rdb, redisscript.Keyspace{Prefix: st.prefix}, "search")
	if err != nil || tokens >= 1 {
		t.Fatalf("search tokens in redis: %v %v", tokens, err)
	}
}

// TestKeyedMappingTakesPerKey: a key_from mapping charges the keyed bucket
// under the descriptor's value, each key with its own tokens.
func TestKeyedMappingTakesPerKey(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, gatewayBuckets, gatewayMappings)
	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	ask := func(ip string) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := e.ask(request("edge", 0, desc("generic_key", "api", "remote_address", ip)))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i := range 2 {
		if r := ask("10.0.0.1"); r.GetOverallCode() != rlsv3.RateLimitResponse_OK || r.GetStatuses()[0].GetLimitRemaining() != uint32(1-i) {
			t.Fatalf("10.0.0.1 request %d: %v", i, r)
		}
	}
	if r := ask("10.0.0.1"); r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("10.0.0.1 third request: %v", r)
	}
	if r := ask("10.0.0.2"); r.GetOverallCode() != rlsv3.RateLimitResponse_OK || r.GetStatuses()[0].GetLimitRemaining() != 1 {
		t.Fatalf("10.0.0.2: %v", r)
	}
}
