package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/internal/testenv"
)

type stateJSON struct {
	Bucket       string   `json:"bucket"`
	SyncStatus   string   `json:"sync_status"`
	MySQLVersion int64    `json:"mysql_version"`
	InRedis      bool     `json:"in_redis"`
	RedisVersion int64    `json:"redis_version"`
	Capacity     int64    `json:"capacity"`
	Rate         string   `json:"rate"`
	AllowedApps  []string `json:"allowed_apps"`
	Tokens       float64  `json:"tokens"`
	LastRefill   string   `json:"last_refill"`
	RedisTime    string   `json:"redis_time"`
}

// TestVerticalSlice creates a bucket through the API, lets the sync worker
// apply it, and takes its tokens through the client package until it is
// empty; then edits and deletes it through the API and sees Redis follow.
func TestVerticalSlice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	owner := e.user("olivia")
	worker := syncer.New(syncer.Config{Buckets: e.buckets, Redis: e.rdb, Keyspace: e.ks})
	sync := func() {
		t.Helper()
		if _, err := worker.SyncOnce(ctx); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	state := func() stateJSON {
		t.Helper()
		var s stateJSON
		e.must(200, owner, "GET", "/api/v1/buckets/payments/state", nil).decode(t, &s)
		return s
	}

	e.must(201, owner, "POST", "/api/v1/apps", map[string]string{"name": "checkout"})
	e.must(201, owner, "POST", "/api/v1/apps", map[string]string{"name": "reports"})
	e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{
		"name": "payments", "owner_app": "checkout", "max_permits": 3, "rate": "1/h",
	})
	if s := state(); s.InRedis || s.SyncStatus != "pending" || s.MySQLVersion != 1 || s.RedisTime == "" {
		t.Fatalf("before the sync: %+v", s)
	}
	sync()
	if s := state(); !s.InRedis || s.SyncStatus != "in_sync" || s.RedisVersion != 1 || s.Capacity != 3 ||
		s.Rate != "1/h" || s.Tokens != 3 || fmt.Sprint(s.AllowedApps) != "[checkout]" {
		t.Fatalf("after the sync: %+v", s)
	}

	// Without the denial cache, which would answer the drained bucket as
	// denied for up to a second after its delete below.
	lim, err := client.New(e.rdb, "checkout", client.WithKeyPrefix(e.ks.Prefix),
		client.WithFailurePolicy(client.FailClosed), client.WithTimeout(2*time.Second), client.WithDenialCache(0))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for i := range 3 {
		res, err := lim.Acquire(ctx, "payments", 1)
		if err != nil || !res.Allowed || res.Fallback || res.Remaining != int64(2-i) {
			t.Fatalf("acquire %d: %+v, %v", i+1, res, err)
		}
	}
	res, err := lim.Acquire(ctx, "payments", 1)
	if err != nil || res.Allowed || res.RetryAfter <= 0 || res.Fallback {
		t.Fatalf("acquire on an empty bucket: %+v, %v", res, err)
	}
	if s := state(); s.Tokens >= 1 || s.LastRefill == "" {
		t.Errorf("state after draining: %+v", s)
	}

	// Only allowed apps take tokens.
	other, err := client.New(e.rdb, "reports", client.WithKeyPrefix(e.ks.Prefix),
		client.WithFailurePolicy(client.FailClosed), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Acquire(ctx, "payments", 1); !errors.Is(err, client.ErrAppNotAllowed) {
		t.Fatalf("acquire by an app not allowed: %v", err)
	}

	// An edit through the API reaches Redis: reports is now allowed.
	e.must(200, owner, "PATCH", "/api/v1/buckets/payments", map[string]any{
		"max_permits": 5, "allowed_apps": []string{"checkout", "reports"},
	}, "If-Match", `"1"`)
	if s := state(); s.SyncStatus != "pending" || s.MySQLVersion != 2 || s.RedisVersion != 1 {
		t.Errorf("after the edit, before the sync: %+v", s)
	}
	sync()
	if s := state(); s.SyncStatus != "in_sync" || s.Capacity != 5 {
		t.Errorf("after the edit and the sync: %+v", s)
	}
	if _, err := other.Acquire(ctx, "payments", 1); err != nil {
		t.Fatalf("acquire by a newly allowed app: %v", err)
	}

	// A delete through the API removes the bucket from Redis.
	e.must(204, owner, "DELETE", "/api/v1/buckets/payments", nil, "If-Match", `"2"`)
	sync()
	if _, err := lim.Acquire(ctx, "payments", 1); !errors.Is(err, client.ErrUnknownBucket) {
		t.Fatalf("acquire after delete: %v", err)
	}
	e.must(404, owner, "GET", "/api/v1/buckets/payments/state", nil)
}

// TestTokenUseAudited checks the token.use rows: the first request of a
// token is recorded, the following ones in the same minute are not.
func TestTokenUseAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.user("alice")
	bob := e.user("bob")
	for range 3 {
		e.must(200, alice, "GET", "/api/v1/me", nil)
	}
	e.must(200, bob, "GET", "/api/v1/buckets", nil)
	uses := e.auditEntries(audit.Filter{Action: "token.use"})
	byActor := map[string]int{}
	for _, u := range uses {
		byActor[u.Actor]++
		if u.ObjectName != "ci" || u.RemoteAddr != "127.0.0.1" || !strings.HasPrefix(u.Detail, "GET /api/v1/") {
			t.Errorf("token.use row %+v", u)
		}
	}
	if byActor["alice (api token ci)"] != 1 || byActor["bob (api token ci)"] != 1 || len(uses) != 2 {
		t.Errorf("token.use rows by actor: %v", byActor)
	}
	// The token's last-used time is kept by accounts.
	u, err := e.accounts.UserByName(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := e.accounts.Tokens(context.Background(), u.ID)
	if err != nil || len(toks) != 1 || toks[0].LastUsedAt == nil {
		t.Errorf("tokens of alice: %+v, %v", toks, err)
	}
}

func TestAuditList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.bucket("b1", "alpha")
	for i := range 4 {
		e.must(200, owner, "PATCH", "/api/v1/buckets/b1", map[string]any{"max_permits": 20 + i}, "If-Match", "*")
	}
	type entry struct {
		ID     int64          `json:"id"`
		Actor  string         `json:"actor"`
		Action string         `json:"action"`
		App    string         `json:"app"`
		Before map[string]any `json:"before"`
		After  map[string]any `json:"after"`
	}
	type page struct {
		Entries    []entry `json:"entries"`
		NextCursor string  `json:"next_cursor"`
	}
	var p page
	e.must(200, owner, "GET", "/api/v1/audit?action=bucket.update&object=b1&actor=olivia&limit=3", nil).decode(t, &p)
	if len(p.Entries) != 3 || p.NextCursor == "" {
		t.Fatalf("first page: %+v", p)
	}
	newest := p.Entries[0]
	if newest.Actor != "olivia (api token ci)" || newest.App != "alpha" ||
		newest.Before["max_permits"] != float64(22) || newest.After["max_permits"] != float64(23) {
		t.Errorf("newest entry: %+v", newest)
	}
	var rest page
	e.must(200, owner, "GET", "/api/v1/audit?action=bucket.update&object=b1&actor=olivia&limit=3&cursor="+p.NextCursor, nil).decode(t, &rest)
	if len(rest.Entries) != 1 || rest.NextCursor != "" || rest.Entries[0].ID >= p.Entries[2].ID {
		t.Errorf("second page: %+v", rest)
	}
	var none page
	e.must(200, owner, "GET", "/api/v1/audit?actor=nobody", nil).decode(t, &none)
	if len(none.Entries) != 0 {
		t.Errorf("actor=nobody: %+v", none)
	}
	for _, q := range []string{"limit=501", "cursor=" + "YnVja2V0OmIx", "object=" + strings.Repeat("x", 101)} {
		e.must(400, owner, "GET", "/api/v1/audit?"+q, nil)
	}
}

// TestRedisUnavailable: the live state needs Redis; without it the answer
// is a 503, not a 500 or a hang.
func TestRedisUnavailable(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	dead := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr,
		DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer dead.Close()
	e := newEnvOn(t, db, dead, "t:")
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.bucket("b1", "alpha")
	r := e.must(503, owner, "GET", "/api/v1/buckets/b1/state", nil)
	if b := r.errorBody(t); b.Error.Code != "unavailable" || strings.Contains(b.Error.Message, "127.0.0.1") {
		t.Errorf("error %+v", b.Error)
	}
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a 503")
	}
	// The definitions in MySQL are still served.
	e.must(200, owner, "GET", "/api/v1/buckets/b1", nil)
}

// TestMySQLUnavailable stops the database under the API: requests answer
// 503 with a message, never 500, and an edit acknowledged before the stop
// is there afterwards.
func TestMySQLUnavailable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a private mariadbd")
	}
	srv := testenv.StartMariaDB(t)
	dsn := srv.FreshDatabase(t)
	db, err := database.Open(context.Background(), dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rdb, prefix := testenv.Redis(t)
	e := newEnvOn(t, db, rdb, prefix)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{"name": "kept", "owner_app": "alpha", "max_permits": 9, "rate": "1/s"})

	srv.Stop()
	for _, call := range []struct{ method, path string }{
		{"GET", "/api/v1/buckets"},
		{"GET", "/api/v1/buckets/kept"},
		{"GET", "/api/v1/me"},
	} {
		r := e.must(503, owner, call.method, call.path, nil)
		if b := r.errorBody(t); b.Error.Code != "unavailable" {
			t.Errorf("%s %s: %+v", call.method, call.path, b.Error)
		}
	}
	srv.Start()
	var b bucketJSON
	e.must(200, owner, "GET", "/api/v1/buckets/kept", nil).decode(t, &b)
	if b.MaxPermits != 9 {
		t.Errorf("after the restart: %+v", b)
	}
}

// BenchmarkGetBucket measures one authenticated GET of a bucket through
// the whole stack: token lookup, visibility check, store read, JSON.
func BenchmarkGetBucket(b *testing.B) {
	e := newEnv(b)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.bucket("b1", "alpha")
	b.ResetTimer()
	for b.Loop() {
		if r := e.call(owner, "GET", "/api/v1/buckets/b1", nil); r.status != 200 {
			b.Fatalf("status %d", r.status)
		}
	}
}

// BenchmarkListBuckets measures a page of 50 of 200 visible buckets.
func BenchmarkListBuckets(b *testing.B) {
	e := newEnv(b)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	for i := range 200 {
		e.bucket(fmt.Sprintf("b%03d", i), "alpha")
	}
	b.ResetTimer()
	for b.Loop() {
		if r := e.call(owner, "GET", "/api/v1/buckets?limit=50", nil); r.status != 200 {
			b.Fatalf("status %d", r.status)
		}
	}
}
