package decision

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	bg    = context.Background()
	alice = audit.Actor{User: "alice", Via: "test"}
)

// commandsProcessed is the number of commands a Redis server has run,
// from its own statistics.
func commandsProcessed(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(bg, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no total_commands_processed in %q", info)
	return 0
}

// stack is a decision service on the test MySQL and Redis, with apps
// "edge" and "other", and buckets synced to Redis.
type stack struct {
	db       *sqlx.DB
	prefix   string
	rdb      *redis.Client // the service's client
	srv      *Server
	mappings *descriptors.Store
	tokens   *apptokens.Store
	syncer   *syncer.Worker
	edge     string // a token of app edge
	other    string // a token of app other
}

type bucketDef struct {
	name, owner, rate string
	capacity          int64
	allowed           []string
	keyed, shadow     bool
	// kind is the limit's kind (a token bucket when empty); a concurrency
	// limit has no rate and its slot lease time in slotMillis.
	kind       buckets.Kind
	slotMillis int64
	// A quota: kind quota, no rate, its period and zone.
	period  quota.Period
	zone    string
	reserve int64
}

func newStack(t testing.TB, cfg ServerConfig, bs []bucketDef, ms []descriptors.Mapping) *stack {
	t.Helper()
	return newStackOn(t, "", cfg, bs, ms)
}

// newStackOn is newStack on the Redis server at addr ("" for the shared
// one).
func newStackOn(t testing.TB, addr string, cfg ServerConfig, bs []bucketDef, ms []descriptors.Mapping) *stack {
	t.Helper()
	db := testenv.MySQL(t)
	var shared *redis.Client
	prefix := "t:"
	if addr == "" {
		shared, prefix = testenv.Redis(t)
		addr = testenv.RedisAddr(t)
	} else {
		shared = redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { shared.Close() })
	}
	st := &stack{db: db, prefix: prefix,
		mappings: descriptors.NewStore(db), tokens: apptokens.NewStore(db)}
	for _, name := range []string{"edge", "other"} {
		if err := apps.NewStore(db).Create(bg, alice, &apps.App{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bs {
		rate, err := buckets.ParseOptionalRate(b.rate)
		if err != nil {
			t.Fatal(err)
		}
		kind := b.kind
		if b.period != "" {
			kind = buckets.KindQuota
		}
		if err := buckets.NewStore(db).Create(bg, alice, &buckets.Bucket{
			Name: b.name, OwnerApp: b.owner, MaxPermits: b.capacity, Rate: rate, AllowedApps: b.allowed,
			Keyed: b.keyed, Shadow: b.shadow, Kind: kind, SlotMillis: b.slotMillis, QuotaPeriod: b.period, TimeZone: b.zone,
			Reserve: b.reserve,
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		// A copy: ms is shared by tests running in parallel, and Create
		// writes the stored mapping back.
		m.Entries = slices.Clone(m.Entries)
		if err := st.mappings.Create(bg, alice, &m); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if st.edge, _, err = st.tokens.Create(bg, alice, "edge", "gateway", nil); err != nil {
		t.Fatal(err)
	}
	if st.other, _, err = st.tokens.Create(bg, alice, "other", "gateway", nil); err != nil {
		t.Fatal(err)
	}
	st.syncer = syncer.New(syncer.Config{Buckets: buckets.NewStore(db), Redis: shared,
		Keyspace: redisscript.Keyspace{Prefix: prefix}})
	if _, err := st.syncer.SyncOnce(bg); err != nil {
		t.Fatal(err)
	}

	st.rdb = redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { st.rdb.Close() })
	cfg.DB, cfg.Redis, cfg.KeyPrefix = db, st.rdb, prefix
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	// A loaded machine stalls goroutines for longer than the default
	// timeout; a fallback answer would change the counts under test.
	cfg.Client = append([]client.Option{client.WithTimeout(10 * time.Second)}, cfg.Client...)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = 20 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	st.srv, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		if err := st.srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return st
}

// waitRevision waits until the service serves the decision revision of
// the database (or fails the test after a generous deadline).
func (st *stack) waitRevision(t *testing.T) {
	t.Helper()
	want, err := st.mappings.Revision(bg)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, rev, _ := st.srv.Service.Loaded(); rev >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("decision revision %d never loaded", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
