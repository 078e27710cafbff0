package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

var actor = audit.Actor{User: "tester", Via: "test"}

// Apps every test environment has.
const (
	ownerApp = "owner"
	otherApp = "other"
)

// env is a fresh MySQL database with two apps and a Redis key space.
type env struct {
	db    *sqlx.DB
	store *buckets.Store
	rdb   redis.UniversalClient
	ks    redisscript.Keyspace
}

// newEnv uses the shared Redis under a private prefix, or rdb when given
// (a private server the test may flush).
func newEnv(t testing.TB, rdb redis.UniversalClient) *env {
	t.Helper()
	db := testenv.MySQL(t)
	e := &env{db: db, store: buckets.NewStore(db)}
	if rdb == nil {
		c, prefix := testenv.Redis(t)
		e.rdb, e.ks = c, redisscript.Keyspace{Prefix: prefix}
	} else {
		e.rdb = rdb
	}
	as := apps.NewStore(db)
	for _, name := range []string{ownerApp, otherApp} {
		if err := as.Create(context.Background(), actor, &apps.App{Name: name}); err != nil {
			t.Fatalf("create app %s: %v", name, err)
		}
	}
	return e
}

func privateRedis(t testing.TB) (*testenv.RedisServer, *redis.Client) {
	t.Helper()
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

func (e *env) worker(cfg Config) *Worker {
	cfg.Buckets, cfg.Redis, cfg.Keyspace = e.store, e.rdb, e.ks
	if cfg.Logger == nil && testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return New(cfg)
}

func mustRate(t testing.TB, s string) buckets.Rate {
	t.Helper()
	r, err := buckets.ParseRate(s)
	if err != nil {
		t.Fatalf("parse rate %q: %v", s, err)
	}
	return r
}

func (e *env) create(t testing.TB, name string, capacity int64, rate string, allowed ...string) *buckets.Bucket {
	t.Helper()
	b := &buckets.Bucket{Name: name, OwnerApp: ownerApp, MaxPermits: capacity, Rate: mustRate(t, rate), AllowedApps: allowed}
	if err := e.store.Create(context.Background(), actor, b); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return b
}

func (e *env) update(t testing.TB, b *buckets.Bucket, capacity int64, rate string) {
	t.Helper()
	b.MaxPermits, b.Rate = capacity, mustRate(t, rate)
	if err := e.store.Update(context.Background(), actor, b); err != nil {
		t.Fatalf("update bucket %s: %v", b.Name, err)
	}
}

func (e *env) remove(t testing.TB, name string) {
	t.Helper()
	if err := e.store.Delete(context.Background(), actor, name, buckets.Expect{}); err != nil {
		t.Fatalf("delete bucket %s: %v", name, err)
	}
}

func (e *env) read(t testing.TB, name string) redisscript.State {
	t.Helper()
	st, err := redisscript.Read(context.Background(), e.rdb, e.ks, name)
	if err != nil {
		t.Fatalf("read %s from redis: %v", name, err)
	}
	return st
}

func (e *env) pending(t testing.TB) []buckets.Event {
	t.Helper()
	evs, err := e.store.PendingEvents(context.Background(), buckets.MaxEventLimit)
	if err != nil {
		t.Fatalf("pending events: %v", err)
	}
	return evs
}

// replay writes evs into the outbox again, in the given order, as a
// redelivery or a late commit would.
func (e *env) replay(t testing.TB, evs ...buckets.Event) {
	t.Helper()
	for _, ev := range evs {
		if ev.Override != nil {
			e.replayOverrides(t, ev)
			continue
		}
		if _, err := e.db.Exec(`INSERT INTO bucket_events (bucket_id, bucket_name, op, version, keyed, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, ev.BucketID, ev.Name, string(ev.Op), ev.Version, ev.Keyed, ev.CreatedAt); err != nil {
			t.Fatalf("replay event: %v", err)
		}
	}
}

// seed inserts n buckets named prefix-00000... straight into the tables
// (no events), for tests about the reconcile at scale.
func (e *env) seed(t testing.TB, prefix string, n int) []string {
	t.Helper()
	var owner int64
	if err := e.db.Get(&owner, `SELECT id FROM apps WHERE name = ?`, ownerApp); err != nil {
		t.Fatalf("owner app id: %v", err)
	}
	names := make([]string, n)
	now := time.Now().UTC()
	for start := 0; start < n; start += 500 {
		end := min(start+500, n)
		var sb strings.Builder
		args := make([]any, 0, (end-start)*8)
		sb.WriteString(`INSERT INTO buckets (name, owner_app_id, max_permits, rate_permits, rate_period_seconds,
			version, created_by, created_at, updated_by, updated_at) VALUES `)
		for i := start; i < end; i++ {
			names[i] = fmt.Sprintf("%s-%05d", prefix, i)
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteString("(?, ?, ?, ?, 60, ?, 'seed', ?, 'seed', ?)")
			args = append(args, names[i], owner, 10+i%1000, fmt.Sprintf("%d.5", 1+i%100), 1+i%7, now, now)
		}
		if _, err := e.db.Exec(sb.String(), args...); err != nil {
			t.Fatalf("seed buckets: %v", err)
		}
	}
	if _, err := e.db.Exec(`INSERT INTO bucket_apps (bucket_id, app_id) SELECT id, owner_app_id FROM buckets
		WHERE name LIKE ? AND id NOT IN (SELECT bucket_id FROM bucket_apps)`, prefix+"-%"); err != nil {
		t.Fatalf("seed allowed apps: %v", err)
	}
	return names
}

// diff lists every way Redis differs from MySQL: missing or differing
// hashes and hashes of buckets MySQL does not have. Empty means in sync.
func (e *env) diff(t testing.TB) []string {
	t.Helper()
	ctx := context.Background()
	defs, err := e.store.Definitions(ctx)
	if err != nil {
		t.Fatalf("definitions: %v", err)
	}
	var out []string
	known := map[string]bool{}
	for _, d := range defs {
		if d.Keyed {
			continue // compared by keyedDiff
		}
		known[d.Name] = true
		st := e.read(t, d.Name)
		switch {
		case !st.Exists:
			out = append(out, "missing "+d.Name)
		case !sameConfig(st.Config, ConfigOf(d)):
			out = append(out, fmt.Sprintf("differing %s: redis %+v, mysql %+v", d.Name, st.Config, ConfigOf(d)))
		}
	}
	w := New(Config{Buckets: e.store, Redis: e.rdb, Keyspace: e.ks})
	names, err := w.scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range names {
		if !known[name] {
			out = append(out, "extra "+name)
		}
	}
	slices.Sort(out)
	return out
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func syncOnce(t testing.TB, w *Worker) int {
	t.Helper()
	n, err := w.SyncOnce(context.Background())
	if err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	return n
}
