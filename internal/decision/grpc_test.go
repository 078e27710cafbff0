package decision

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// envoy is a rate limit client as Envoy is one: it sends RateLimitRequests
// built from go-control-plane's types, with the app token in the
// "authorization" metadata (Envoy's grpc_service initial_metadata).
type envoy struct {
	c     rlsv3.RateLimitServiceClient
	token string
}

func dialEnvoy(t *testing.T, addr, token string) *envoy {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &envoy{c: rlsv3.NewRateLimitServiceClient(conn), token: token}
}

func (e *envoy) ask(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if e.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.token)
	}
	return e.c.ShouldRateLimit(ctx, req)
}

// desc builds a descriptor from key/value pairs, as Envoy's rate limit
// actions produce them (generic_key, remote_address, request_headers...).
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func request(domain string, hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits}
}

func headerOf(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == name {
			return h.GetValue()
		}
	}
	return ""
}

func entries(kv ...string) []descriptors.Entry {
	var out []descriptors.Entry
	for i := 0; i < len(kv); i += 2 {
		out = append(out, descriptors.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// Rates of one per day: no token comes back while a test runs, so the
// bound is exactly the capacity.
var gatewayBuckets = []bucketDef{
	{name: "checkout", owner: "edge", rate: "1/day", capacity: 5},
	{name: "search", owner: "edge", rate: "1/day", capacity: 3},
	{name: "per-ip", owner: "edge", rate: "1/day", capacity: 2, keyed: true},
	{name: "slow", owner: "edge", rate: "0.5/s", capacity: 10},
	{name: "theirs", owner: "other", rate: "1/day", capacity: 5},
}

var gatewayMappings = []descriptors.Mapping{
	{App: "edge", Domain: "edge", Entries: entries("generic_key", "checkout"), Bucket: "checkout"},
	{App: "edge", Domain: "edge", Entries: entries("generic_key", "search"), Bucket: "search"},
	{App: "edge", Domain: "edge", Entries: entries("generic_key", "slow"), Bucket: "slow"},
	{App: "edge", Domain: "edge", Entries: entries("generic_key", "api", "remote_address", ""), Bucket: "per-ip",
		KeyFrom: "remote_address"},
	{App: "other", Domain: "edge", Entries: entries("generic_key", "checkout"), Bucket: "theirs"},
}

func TestEnvoyShapedRequests(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, gatewayBuckets, gatewayMappings)
	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)

	// At the limit exactly: five OK with the remaining counting down, then
	// OVER_LIMIT.
	for i := 1; i <= 6; i++ {
		resp, err := e.ask(request("edge", 0, desc("generic_key", "checkout")))
		if err != nil {
			t.Fatal(err)
		}
		s := resp.GetStatuses()
		if len(s) != 1 {
			t.Fatalf("request %d: %d statuses", i, len(s))
		}
		lim := s[0].GetCurrentLimit()
		if lim.GetName() != "checkout" || lim.GetRequestsPerUnit() != 1 || lim.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY {
			t.Fatalf("request %d: current limit %v", i, lim)
		}
		if s[0].GetDurationUntilReset().AsDuration() <= 0 {
			t.Fatalf("request %d: duration until reset %v", i, s[0].GetDurationUntilReset())
		}
		if got := headerOf(resp, "RateLimit-Limit"); got != "5" {
			t.Fatalf("request %d: RateLimit-Limit %q", i, got)
		}
		if i <= 5 {
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || s[0].GetCode() != rlsv3.RateLimitResponse_OK {
				t.Fatalf("request %d: %v, want OK", i, resp)
			}
			if s[0].GetLimitRemaining() != uint32(5-i) || headerOf(resp, "RateLimit-Remaining") != strconv.Itoa(5-i) {
				t.Fatalf("request %d: remaining %d / %q, want %d", i, s[0].GetLimitRemaining(), headerOf(resp, "RateLimit-Remaining"), 5-i)
			}
			if headerOf(resp, "Retry-After") != "" {
				t.Fatalf("request %d: Retry-After on an allowed request", i)
			}
			continue
		}
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || s[0].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("request %d: %v, want OVER_LIMIT", i, resp)
		}
		// One token a day: the next one is hours away.
		if ra, _ := strconv.Atoi(headerOf(resp, "Retry-After")); ra < 3600 || s[0].GetDurationUntilReset().AsDuration() < time.Hour {
			t.Fatalf("request %d: Retry-After %q, duration %v", i, headerOf(resp, "Retry-After"), s[0].GetDurationUntilReset())
		}
	}

	// Another app, same domain and descriptor: its own mapping and bucket.
	theirs, err := dialEnvoy(t, st.srv.GRPCAddr(), st.other).ask(request("edge", 0, desc("generic_key", "checkout")))
	if err != nil || theirs.GetOverallCode() != rlsv3.RateLimitResponse_OK ||
		theirs.GetStatuses()[0].GetCurrentLimit().GetName() != "theirs" || theirs.GetStatuses()[0].GetLimitRemaining() != 4 {
		t.Fatalf("other app: %v %v", theirs, err)
	}

	// hits_addend: the request's, then a descriptor's own, which wins.
	resp, err := e.ask(request("edge", 2, desc("generic_key", "search")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 1 {
		t.Fatalf("hits_addend 2: %v %v", resp, err)
	}
	d := desc("generic_key", "search")
	d.HitsAddend = wrapperspb.UInt64(2)
	resp, err = e.ask(request("edge", 1, d))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("descriptor hits_addend 2 with 1 left: %v %v", resp, err)
	}
	resp, err = e.ask(request("edge", 1, desc("generic_key", "search")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 0 {
		t.Fatalf("the last token: %v %v", resp, err)
	}

	// Several descriptors: allowed only if all are. An unmatched one is
	// allowed (the default setting) and carries no limit.
	resp, err = e.ask(request("edge", 0, desc("generic_key", "checkout"), desc("generic_key", "nobody")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT ||
		resp.GetStatuses()[0].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT ||
		resp.GetStatuses()[1].GetCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[1].GetCurrentLimit() != nil {
		t.Fatalf("one denied, one unmatched: %v %v", resp, err)
	}
	resp, err = e.ask(request("edge", 0, desc("generic_key", "slow"), desc("generic_key", "nobody")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("one allowed, one unmatched: %v %v", resp, err)
	}
	// 0.5/s is reported exactly, as 30 per minute.
	if lim := resp.GetStatuses()[0].GetCurrentLimit(); lim.GetRequestsPerUnit() != 30 || lim.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("0.5/s as %v", lim)
	}
	// The remote_address entry Envoy adds: its value is the key of the
	// keyed bucket per-ip.
	resp, err = e.ask(request("edge", 0, desc("generic_key", "api", "remote_address", "10.0.0.1")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("keyed descriptor: %v %v", resp, err)
	}
	// Negative hits give tokens back, which a token bucket cannot take:
	// not charged.
	neg := desc("generic_key", "slow")
	neg.IsNegativeHits = true
	resp, err = e.ask(request("edge", 0, neg))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatalf("negative hits: %v %v", resp, err)
	}
	// A domain without mappings: unmatched, allowed; no headers.
	resp, err = e.ask(request("elsewhere", 0, desc("generic_key", "checkout")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetResponseHeadersToAdd()) != 0 {
		t.Fatalf("other domain: %v %v", resp, err)
	}

	// Bad requests are refused with InvalidArgument.
	big := desc("generic_key", "search")
	big.HitsAddend = wrapperspb.UInt64(1 << 40)
	many := request("edge", 0)
	for range MaxDescriptors + 1 {
		many.Descriptors = append(many.Descriptors, desc("generic_key", "nobody"))
	}
	for name, req := range map[string]*rlsv3.RateLimitRequest{
		"no domain":        request("", 0, desc("generic_key", "checkout")),
		"huge hits":        request("edge", 0, big),
		"many descriptors": many,
	} {
		if _, err := e.ask(req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}

	// Redis agrees: the checkout bucket holds less than one token.
	tokens, _, _, err := redisscript.ReadStored(bg, st.rdb, redisscript.Keyspace{Prefix: st.prefix}, "checkout")
	if err != nil || tokens >= 1 {
		t.Fatalf("checkout tokens in redis: %v %v", tokens, err)
	}
}

func TestUnmatchedDeny(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{Unmatched: UnmatchedDeny, Headers: HeadersX}, gatewayBuckets, gatewayMappings)
	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	resp, err := e.ask(request("edge", 0, desc("generic_key", "checkout"), desc("generic_key", "nobody")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT ||
		resp.GetStatuses()[0].GetCode() != rlsv3.RateLimitResponse_OK ||
		resp.GetStatuses()[1].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("unmatched with deny: %v %v", resp, err)
	}
	// HeadersX: the X- names only.
	resp, err = e.ask(request("edge", 0, desc("generic_key", "checkout")))
	if err != nil || headerOf(resp, "X-RateLimit-Remaining") != "3" || headerOf(resp, "RateLimit-Remaining") != "" {
		t.Fatalf("x headers: %v %v", resp, err)
	}
	// A mapping added while running takes effect at the next refresh.
	m := descriptors.Mapping{App: "edge", Domain: "edge", Entries: entries("generic_key", "nobody"), Bucket: "search"}
	if err := st.mappings.Create(bg, alice, &m); err != nil {
		t.Fatal(err)
	}
	st.waitRevision(t)
	resp, err = e.ask(request("edge", 0, desc("generic_key", "nobody")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit().GetName() != "search" {
		t.Fatalf("new mapping: %v %v", resp, err)
	}
}

// A mapping whose bucket Redis does not know, or does not let the app take
// from, is answered as unmatched, as the unmatched policy says, with the
// bucket named: not an error, and not over the limit unless the policy
// denies.
func TestMisconfiguredMappingsAnswerAsUnmatched(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		policy Unmatched
		code   Code
	}{
		{UnmatchedAllow, CodeOK},
		{UnmatchedDeny, CodeOverLimit},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			t.Parallel()
			st := newStack(t, ServerConfig{Unmatched: tt.policy}, gatewayBuckets, gatewayMappings)
			ks := redisscript.Keyspace{Prefix: st.prefix}
			// Redis lost search, and its checkout no longer lists edge.
			if err := st.rdb.Del(bg, ks.Bucket("search")).Err(); err != nil {
				t.Fatal(err)
			}
			if err := st.rdb.HSet(bg, ks.Bucket("checkout"), redisscript.FieldApps, ",other,").Err(); err != nil {
				t.Fatal(err)
			}
			statuses, overall, err := st.srv.Service.ShouldRateLimit(bg, "edge", "edge", []Descriptor{
				{Entries: entries("generic_key", "search"), Hits: 1},
				{Entries: entries("generic_key", "checkout"), Hits: 1},
				{Entries: entries("generic_key", "slow"), Hits: 1},
			})
			if err != nil || len(statuses) != 3 {
				t.Fatalf("ShouldRateLimit: %+v %v", statuses, err)
			}
			for i, want := range []Status{
				{Code: tt.code, Bucket: "search", Note: "unknown_bucket"},
				{Code: tt.code, Bucket: "checkout", Note: "app_not_allowed"},
			} {
				if got := statuses[i]; got.Code != want.Code || got.Bucket != want.Bucket || got.Note != want.Note {
					t.Errorf("descriptor %d: code %v, bucket %q, note %q; want %v, %q, %q",
						i+1, got.Code, got.Bucket, got.Note, want.Code, want.Bucket, want.Note)
				}
			}
			if s := statuses[2]; s.Code != CodeOK || s.Bucket != "slow" || s.Note != "" || !s.Result.Allowed {
				t.Errorf("slow beside them: %+v", s)
			}
			if overall != tt.code {
				t.Errorf("overall %v; want %v", overall, tt.code)
			}
		})
	}
}

// A wrong or missing credential is refused before Redis is touched: a
// private Redis server's own count of commands does not move.
func TestCredentialsBeforeRedis(t *testing.T) {
	t.Parallel()
	private := testenv.StartRedis(t)
	st := newStackOn(t, private.Addr, ServerConfig{CountUsage: true}, gatewayBuckets, gatewayMappings)
	admin := redis.NewClient(&redis.Options{Addr: private.Addr})
	defer admin.Close()
	personal := "slc_" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	revokedSecret, tok, err := st.tokens.Create(bg, alice, "edge", "revoked", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.tokens.Revoke(bg, alice, "edge", tok.ID); err != nil {
		t.Fatal(err)
	}
	st.waitRevision(t)
	// Two INFOs in a row differ by what one INFO counts.
	infoCost := -commandsProcessed(t, admin) + commandsProcessed(t, admin)
	before := commandsProcessed(t, admin)

	bad := []string{"", "sla_wrong", personal, revokedSecret, st.edge + "x", "Basic " + st.edge}
	for _, tok := range bad {
		_, err := dialEnvoy(t, st.srv.GRPCAddr(), "").askWith(tok, request("edge", 0, desc("generic_key", "checkout")))
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("grpc with %q: %v, want Unauthenticated", tok, err)
		}
		for _, method := range []string{"POST", "GET"} {
			code, _, _ := httpAcquire(t, st.srv.HTTPAddr(), method, tok, "checkout", 1)
			if code != 401 {
				t.Errorf("%s with %q: %d, want 401", method, tok, code)
			}
		}
	}
	if n := commandsProcessed(t, admin) - before - infoCost; n != 0 {
		t.Fatalf("refused callers cost %d redis commands, want 0", n)
	}
	before = commandsProcessed(t, admin)
	// The right token does reach Redis (the count works).
	resp, err := dialEnvoy(t, st.srv.GRPCAddr(), st.edge).ask(request("edge", 0, desc("generic_key", "checkout")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("good token: %v %v", resp, err)
	}
	if commandsProcessed(t, admin)-before-infoCost < 1 {
		t.Fatal("an allowed call sent no redis command: the count does not work")
	}
	// Revoking a token in use takes effect at the next refresh.
	toks, _ := st.tokens.List(bg, "edge")
	for _, tok := range toks {
		if tok.Name == "gateway" {
			if err := st.tokens.Revoke(bg, alice, "edge", tok.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.waitRevision(t)
	if _, err := dialEnvoy(t, st.srv.GRPCAddr(), st.edge).ask(request("edge", 0, desc("generic_key", "checkout"))); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("revoked token in use: %v", err)
	}
}

func (e *envoy) askWith(authorization string, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if authorization != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authorization)
	}
	return e.c.ShouldRateLimit(ctx, req)
}

// MySQL going away stops only the learning of changes: decisions go on
// with the last snapshot, and /readyz says that refreshes fail (not why:
// it answers anyone).
func TestDecidesWithoutMySQL(t *testing.T) {
	t.Parallel()
	st := newStack(t, ServerConfig{}, gatewayBuckets, gatewayMappings)
	e := dialEnvoy(t, st.srv.GRPCAddr(), st.edge)
	if err := st.db.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, _, lastErr := st.srv.Service.Loaded(); lastErr != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a refresh without MySQL never failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := e.ask(request("edge", 0, desc("generic_key", "checkout")))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 4 {
		t.Fatalf("decision without MySQL: %v %v", resp, err)
	}
	if _, err := dialEnvoy(t, st.srv.GRPCAddr(), "sla_unknown").ask(request("edge", 0, desc("generic_key", "checkout"))); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unknown token without MySQL: %v", err)
	}
	req, _ := http.NewRequest("GET", "http://"+st.srv.HTTPAddr()+"/readyz", nil)
	code, _, body := send(t, req, "")
	// The failure is said, its text (MySQL's) is not.
	if code != 200 || !strings.Contains(body, `"refresh_failing":true`) || strings.Contains(strings.ToLower(body), "error") {
		t.Fatalf("readyz without MySQL: %d %s", code, body)
	}
}
