// Package devstack runs the whole of Sluice's storage in one process for
// `admin -dev`: an in-memory MySQL-compatible engine and an in-memory Redis,
// both listening on loopback so that real clients can connect, the schema,
// the sync loop, a seeded admin and a demo app with a demo bucket.
//
// Nothing survives the process. It is for trying Sluice and for tests, not
// for production.
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/internal/usage"
	"github.com/sluicehq/sluice/migrations"
)

// Demo names seeded into a new stack.
const (
	AdminUser  = "admin"
	DemoApp    = "demo"
	DemoBucket = "demo-api"
	// DemoHTTPBucket is the bucket the README takes from over the decision
	// service's HTTP API: apart from DemoBucket, so that each of its two
	// loops starts from a full bucket.
	DemoHTTPBucket = "demo-http"
)

// Options tune a Stack. The zero value is ready to use.
type Options struct {
	// AdminPassword is the seeded admin's password; empty means a random one.
	AdminPassword string
	// ReconcileInterval of the embedded sync loop; 0 means 30 s.
	ReconcileInterval time.Duration
	// DecideClient holds client options of the decision service's
	// Limiters, such as a longer timeout for tests on a loaded machine.
	DecideClient []client.Option
	Logger       *slog.Logger
}

// Stack is a running development stack. Close it to stop everything.
type Stack struct {
	// DSN reaches the embedded MySQL-compatible engine.
	DSN string
	// RedisAddr is the embedded Redis's loopback address, for clients.
	RedisAddr string
	// AdminPassword of AdminUser, to print once.
	AdminPassword string

	DB       *sqlx.DB
	Redis    *redis.Client
	Keyspace redisscript.Keyspace
	Syncer   *syncer.Worker
	// Roller rolls usage up for the console's bucket list and overview.
	Roller *usage.Roller
	// Decide is the decision service (gRPC and HTTP) and a token to call it.
	Decide Decide

	stopDB func()
	mini   *miniredis.Miniredis
	cancel context.CancelFunc
	done   chan error

	rollDone chan struct{}
}

// Start brings a stack up and starts its sync loop.
func Start(ctx context.Context, opts Options) (st *Stack, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	st = &Stack{done: make(chan error, 1)}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()

	dsn, stop, err := devdb.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("start embedded mysql: %w", err)
	}
	st.DSN, st.stopDB = dsn, stop
	// Migrations run on a pool of their own, closed before the application
	// pool opens: the engine must only ever see one open connection.
	if err := migrations.Up(dsn); err != nil {
		return nil, err
	}
	st.DB, err = database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	if err != nil {
		return nil, err
	}

	st.mini = miniredis.NewMiniRedis()
	if err := st.mini.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	st.RedisAddr = st.mini.Addr()
	st.Redis = redis.NewClient(&redis.Options{Addr: st.RedisAddr})

	st.AdminPassword = opts.AdminPassword
	if st.AdminPassword == "" {
		st.AdminPassword = randomPassword()
	}
	if err := seed(ctx, st.DB, st.AdminPassword); err != nil {
		return nil, fmt.Errorf("seed demo data: %w", err)
	}

	st.Syncer = syncer.New(syncer.Config{
		Buckets:           buckets.NewStore(st.DB),
		Redis:             st.Redis,
		Keyspace:          st.Keyspace,
		ReconcileInterval: opts.ReconcileInterval,
		Logger:            log.With("component", "sync"),
	})
	if _, err := st.Syncer.SyncOnce(ctx); err != nil {
		return nil, fmt.Errorf("first sync: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st.cancel = cancel
	go func() { st.done <- st.Syncer.Run(runCtx) }()
	st.Roller = usage.NewRoller(usage.RollerConfig{DB: st.DB, Redis: st.Redis, Keyspace: st.Keyspace,
		Logger: log.With("component", "usage")})
	st.rollDone = make(chan struct{})
	go func() { defer close(st.rollDone); _ = st.Roller.Run(runCtx) }()
	if err := st.startDecide(ctx, log, opts.DecideClient); err != nil {
		return nil, err
	}
	return st, nil
}

// Close stops the decision service, the sync loop and both stores.
func (st *Stack) Close() error {
	var errsOut []error
	if err := st.stopDecide(); err != nil {
		errsOut = append(errsOut, err)
	}
	if st.cancel != nil {
		st.cancel()
		if err := <-st.done; err != nil && !errors.Is(err, context.Canceled) {
			errsOut = append(errsOut, err)
		}
		<-st.rollDone
		st.cancel = nil
	}
	if st.Redis != nil {
		st.Redis.Close()
	}
	if st.mini != nil {
		st.mini.Close()
	}
	if st.DB != nil {
		st.DB.Close()
	}
	if st.stopDB != nil {
		st.stopDB()
	}
	return errors.Join(errsOut...)
}

func seed(ctx context.Context, db *sqlx.DB, password string) error {
	actor := audit.Actor{User: "system", Via: "dev"}
	acc := accounts.NewStore(db)
	if _, err := acc.CreateUser(ctx, actor, AdminUser, password); err != nil {
		return err
	}
	enf, err := rbac.New(ctx, db)
	if err != nil {
		return err
	}
	if err := enf.SetAdmin(ctx, actor, AdminUser, true); err != nil {
		return err
	}
	app := &apps.App{Name: DemoApp, Description: "Demo service seeded by -dev"}
	grant := func(ctx context.Context, tx *database.Tx) error {
		return rbac.GrantTx(ctx, tx, AdminUser, DemoApp, rbac.RoleOwner)
	}
	if err := apps.NewStore(db).Create(ctx, audit.Actor{User: AdminUser, Via: "dev"}, app, grant); err != nil {
		return err
	}
	rate, err := buckets.ParseRate("5/s")
	if err != nil {
		return err
	}
	store := buckets.NewStore(db)
	if err := store.Create(ctx, audit.Actor{User: AdminUser, Via: "dev"}, &buckets.Bucket{
		Name:        DemoBucket,
		OwnerApp:    DemoApp,
		Description: "Guards the example service's /checkout route",
		MaxPermits:  10,
		Rate:        rate,
		AllowedApps: []string{DemoApp},
	}); err != nil {
		return err
	}
	return store.Create(ctx, audit.Actor{User: AdminUser, Via: "dev"}, &buckets.Bucket{
		Name:        DemoHTTPBucket,
		OwnerApp:    DemoApp,
		Description: "Taken from over the decision service's HTTP API",
		MaxPermits:  10,
		Rate:        rate,
		AllowedApps: []string{DemoApp},
	})
}

func randomPassword() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
