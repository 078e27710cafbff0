package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// env is an API server on a fresh database and a private Redis key space,
// with the stores behind it for arranging and checking.
type env struct {
	t        testing.TB
	db       *sqlx.DB
	srv      *httptest.Server
	apps     *apps.Store
	buckets  *buckets.Store
	audit    *audit.Store
	accounts *accounts.Store
	enf      *rbac.Enforcer
	rdb      *redis.Client
	ks       redisscript.Keyspace
}

var setup = audit.Actor{User: "setup", Via: "cli"}

func newEnv(t testing.TB) *env {
	t.Helper()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	return newEnvOn(t, db, rdb, prefix)
}

func newEnvOn(t testing.TB, db *sqlx.DB, rdb *redis.Client, prefix string) *env {
	t.Helper()
	enf, err := rbac.New(context.Background(), db)
	if err != nil {
		t.Fatalf("rbac: %v", err)
	}
	e := &env{
		t: t, db: db, apps: apps.NewStore(db), buckets: buckets.NewStore(db), audit: audit.NewStore(db),
		accounts: accounts.NewStore(db), enf: enf, rdb: rdb, ks: redisscript.Keyspace{Prefix: prefix},
	}
	// Password hashing is not under test here; keep user creation cheap.
	e.accounts.Hash = accounts.HashParams{Time: 1, Memory: 64, Threads: 1}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mcfg := manage.Config{DB: db, Enforcer: enf, Keyspace: e.ks, Accounts: e.accounts, Logger: log}
	if rdb != nil {
		mcfg.Redis = rdb
	}
	svc, err := manage.New(mcfg)
	if err != nil {
		t.Fatalf("manage: %v", err)
	}
	t.Cleanup(svc.Close)
	e.srv = httptest.NewServer(api.New(api.Config{Service: svc, Logger: log}))
	t.Cleanup(e.srv.Close)
	return e
}

// testWriter shows the server's warnings and errors in the test's output.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// user creates a user and an API token "ci" for them, and returns the token.
func (e *env) user(name string) string {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.accounts.CreateUser(ctx, setup, name, "correct horse battery")
	if err != nil {
		e.t.Fatalf("create user %s: %v", name, err)
	}
	token, _, err := e.accounts.CreateToken(ctx, setup, u.ID, "ci", nil)
	if err != nil {
		e.t.Fatalf("create token of %s: %v", name, err)
	}
	return token
}

func (e *env) admin(name string) string {
	e.t.Helper()
	token := e.user(name)
	if err := e.enf.SetAdmin(context.Background(), setup, name, true); err != nil {
		e.t.Fatalf("make %s admin: %v", name, err)
	}
	return token
}

// app registers an app owned by owner.
func (e *env) app(name, owner string) {
	e.t.Helper()
	ctx := context.Background()
	err := e.apps.Create(ctx, setup, &apps.App{Name: name}, func(ctx context.Context, tx *database.Tx) error {
		return e.enf.GrantTx(ctx, tx, owner, name, rbac.RoleOwner)
	})
	if err != nil {
		e.t.Fatalf("create app %s: %v", name, err)
	}
}

func (e *env) grant(user, app string, role rbac.Role) {
	e.t.Helper()
	if err := e.enf.Grant(context.Background(), setup, user, app, role); err != nil {
		e.t.Fatalf("grant %s %s on %s: %v", user, role, app, err)
	}
}

// bucket creates a bucket through the store.
func (e *env) bucket(name, owner string, allowed ...string) *buckets.Bucket {
	e.t.Helper()
	b := &buckets.Bucket{Name: name, OwnerApp: owner, MaxPermits: 10,
		Rate: buckets.Rate{PermitsMicro: 1_000_000, Period: time.Second}, AllowedApps: allowed}
	if err := e.buckets.Create(context.Background(), setup, b); err != nil {
		e.t.Fatalf("create bucket %s: %v", name, err)
	}
	return b
}

// keyedBucket creates a keyed bucket of owner with one override per
// key of prefixes (exact, 5 per second) and returns their ids by key.
func (e *env) keyedBucket(name, owner string, keys ...string) map[string]int64 {
	e.t.Helper()
	b := &buckets.Bucket{Name: name, OwnerApp: owner, MaxPermits: 10, Keyed: true,
		Rate: buckets.Rate{PermitsMicro: 1_000_000, Period: time.Second}}
	if err := e.buckets.Create(context.Background(), setup, b); err != nil {
		e.t.Fatalf("create bucket %s: %v", name, err)
	}
	ids := map[string]int64{}
	for _, k := range keys {
		o := &buckets.Override{Bucket: name, Match: buckets.MatchExact, Key: k, MaxPermits: 5,
			Rate: buckets.Rate{PermitsMicro: 5_000_000, Period: time.Second}}
		if err := e.buckets.CreateOverride(context.Background(), setup, o); err != nil {
			e.t.Fatalf("create override %s: %v", k, err)
		}
		ids[k] = o.ID
	}
	return ids
}

// response is a finished API call.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d is not the expected JSON: %v: %s", r.status, err, r.body)
	}
}

func (r *response) errorBody(t *testing.T) errorBody {
	t.Helper()
	var b errorBody
	r.decode(t, &b)
	if b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("error body without code or message: %s", r.body)
	}
	return b
}

// reasonFor returns the reason given for field in an error body.
func (b errorBody) reasonFor(field string) string {
	for _, f := range b.Error.Fields {
		if f.Field == field {
			return f.Reason
		}
	}
	return ""
}

// call sends a request with token (none when empty). body is JSON-encoded
// unless it is a string or nil; headers come in name, value pairs.
func (e *env) call(token, method, path string, body any, headers ...string) *response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	checkSecurityHeaders(e.t, resp.Header)
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// must calls and fails the test unless the status is want.
func (e *env) must(want int, token, method, path string, body any, headers ...string) *response {
	e.t.Helper()
	r := e.call(token, method, path, body, headers...)
	if r.status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

// auditEntries returns the audit rows matching f, read from the store.
func (e *env) auditEntries(f audit.Filter) []audit.Entry {
	e.t.Helper()
	f.Limit = database.MaxPageSize
	p, err := e.audit.List(context.Background(), f)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Entries
}

// bucketJSON mirrors the API's bucket for decoding in tests.
type bucketJSON struct {
	Name              string   `json:"name"`
	OwnerApp          string   `json:"owner_app"`
	Description       string   `json:"description"`
	MaxPermits        int64    `json:"max_permits"`
	Rate              string   `json:"rate"`
	RatePermits       float64  `json:"rate_permits"`
	RatePeriodSeconds int64    `json:"rate_period_seconds"`
	AllowedApps       []string `json:"allowed_apps"`
	Keyed             bool     `json:"keyed"`
	Shadow            bool     `json:"shadow"`
	LeaseMillis       int64    `json:"lease_ms"`
	Reserve           int64    `json:"reserve"`
	Version           int64    `json:"version"`
	CreatedBy         string   `json:"created_by"`
	UpdatedBy         string   `json:"updated_by"`
}

type overrideJSON struct {
	ID          int64  `json:"id"`
	Bucket      string `json:"bucket"`
	Match       string `json:"match"`
	Key         string `json:"key"`
	Description string `json:"description"`
	MaxPermits  int64  `json:"max_permits"`
	Rate        string `json:"rate"`
	Version     int64  `json:"version"`
}

type bucketList struct {
	Buckets    []bucketJSON `json:"buckets"`
	NextCursor string       `json:"next_cursor"`
	Total      int          `json:"total"`
}
