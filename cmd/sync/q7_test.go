package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// workerProc is a sluice-sync process: this test binary re-executed in
// worker mode.
type workerProc struct {
	t    *testing.T
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan error
}

func (p *workerProc) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-http-addr=", "-log-level=warn")
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start worker: %v", err)
	}
	p.cmd, p.done = cmd, make(chan error, 1)
	go func() { p.done <- cmd.Wait() }()
}

func (p *workerProc) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// stop sends SIGTERM and returns the exit error (nil for exit code 0).
func (p *workerProc) stop() error {
	if p.cmd == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.cmd = nil
		return err
	case <-time.After(15 * time.Second):
		p.kill()
		return errors.New("worker did not stop within 15 s of SIGTERM")
	}
}

// observer samples the Redis side of every bucket name and counts version
// regressions and resurrected deletes as they happen.
type observer struct {
	rdb redis.UniversalClient
	ks  redisscript.Keyspace

	mu          sync.Mutex
	max         map[string][2]int64 // name -> highest (id, version) seen
	deletedAt   map[int64]time.Time // bucket id -> when its delete committed
	nameOf      map[int64]string
	goneSeen    map[int64]bool   // deleted ids already seen gone from Redis
	goneHow     map[int64]string // how: what Redis held then, and the tombstone
	regressions []string
	resurrected []string
	samples     int
}

func (o *observer) deleted(name string, id int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deletedAt[id], o.nameOf[id] = time.Now(), name
}

func (o *observer) sample(ctx context.Context, names []string) error {
	start := time.Now()
	for _, name := range names {
		st, err := redisscript.Read(ctx, o.rdb, o.ks, name)
		if err != nil {
			return err
		}
		o.mu.Lock()
		cur := [2]int64{st.Config.ID, st.Config.Version}
		if st.Exists {
			if m, ok := o.max[name]; ok && (cur[0] < m[0] || (cur[0] == m[0] && cur[1] < m[1])) {
				o.regressions = append(o.regressions, fmt.Sprintf("%s: saw %v after %v", name, cur, m))
			}
			if m := o.max[name]; cur[0] > m[0] || (cur[0] == m[0] && cur[1] > m[1]) {
				o.max[name] = cur
			}
			if o.goneSeen[cur[0]] {
				o.resurrected = append(o.resurrected, fmt.Sprintf("%s id %d v%d (seen gone: %s)", name, cur[0], cur[1], o.goneHow[cur[0]]))
			}
		}
		for id, at := range o.deletedAt {
			if o.nameOf[id] == name && at.Before(start) && (!st.Exists || cur[0] != id) && !o.goneSeen[id] {
				// The tombstone tells a delete that reached Redis from a
				// bucket Redis never had.
				tomb, err := o.rdb.Get(ctx, o.ks.Tombstone(name)).Result()
				if err != nil && !errors.Is(err, redis.Nil) {
					o.mu.Unlock()
					return err
				}
				o.goneSeen[id] = true
				o.goneHow[id] = fmt.Sprintf("hash exists %v id %d, tombstone %q", st.Exists, cur[0], tomb)
			}
		}
		o.mu.Unlock()
	}
	o.mu.Lock()
	o.samples++
	o.mu.Unlock()
	return nil
}

// TestKilledWorkerLosesNothing is BRIEF Q7: 1000 edits at 20/s while the
// worker process is killed with SIGKILL every 3 s and restarted; then the
// edit-to-Redis propagation without kills.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	edits, measured := 1000, 200
	if testing.Short() {
		edits, measured = 200, 100
	}
	dsn := testenv.MySQLDSN(t)
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	db, err := database.Open(ctx, dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := buckets.NewStore(db)
	if err := apps.NewStore(db).Create(ctx, actor, &apps.App{Name: "svc"}); err != nil {
		t.Fatal(err)
	}

	p := &workerProc{t: t, log: filepath.Join(t.TempDir(), "worker.log"), env: []string{
		childEnv + "=1", "SLUICE_MYSQL_DSN=" + dsn, "SLUICE_REDIS_ADDR=" + testenv.RedisAddr(t),
		"SLUICE_KEY_PREFIX=" + prefix, "SLUICE_RECONCILE_INTERVAL=1s", "SLUICE_STARTUP_TIMEOUT=20s",
	}}
	p.start()
	defer p.kill()

	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("q7-%02d", i)
	}
	obs := &observer{rdb: rdb, ks: ks, max: map[string][2]int64{}, deletedAt: map[int64]time.Time{},
		nameOf: map[int64]string{}, goneSeen: map[int64]bool{}, goneHow: map[int64]string{}}
	sctx, stopSampling := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() {
		for sctx.Err() == nil {
			if err := obs.sample(sctx, names); err != nil && sctx.Err() == nil {
				t.Errorf("sample redis: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	// The killer: SIGKILL every 3 s, restart at once.
	kctx, stopKilling := context.WithCancel(ctx)
	kills := 0
	var killer sync.WaitGroup
	killer.Go(func() {
		tick := time.NewTicker(3 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-kctx.Done():
				return
			case <-tick.C:
				p.kill()
				kills++
				p.start()
			}
		}
	})

	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	live := map[string]*buckets.Bucket{}
	rate, _ := buckets.ParseRate("5/s")
	var creates, updates, deletes int
	tick := time.NewTicker(50 * time.Millisecond) // 20 edits per second
	for i := range edits {
		<-tick.C
		name := names[rng.IntN(len(names))]
		b := live[name]
		switch {
		case b == nil:
			b = &buckets.Bucket{Name: name, OwnerApp: "svc", MaxPermits: int64(1 + rng.IntN(1000)), Rate: rate}
			if err := store.Create(ctx, actor, b); err != nil {
				t.Fatalf("edit %d: create %s: %v", i, name, err)
			}
			live[name] = b
			creates++
		case rng.IntN(6) == 0:
			if err := store.Delete(ctx, actor, name, buckets.Expect{Version: b.Version}); err != nil {
				t.Fatalf("edit %d: delete %s: %v", i, name, err)
			}
			obs.deleted(name, b.ID)
			delete(live, name)
			deletes++
		default:
			b.MaxPermits = int64(1 + rng.IntN(1000))
			if err := store.Update(ctx, actor, b); err != nil {
				t.Fatalf("edit %d: update %s: %v", i, name, err)
			}
			updates++
		}
	}
	tick.Stop()
	stopKilling()
	killer.Wait()
	t.Logf("%d edits (%d creates, %d updates, %d deletes) with %d SIGKILLs of the worker", edits, creates, updates, deletes, kills)

	// Every edit arrives once the (last restarted) worker catches up, and
	// the outbox drains: the worker deletes an event after applying it, so
	// Redis can match a moment before the last event is gone.
	var diff []string
	var pending []buckets.Event
	if !eventually(20*time.Second, func() bool {
		if diff = redisDiff(t, store, rdb, ks, names); len(diff) > 0 {
			return false
		}
		pending, err = store.PendingEvents(ctx, 1)
		return err == nil && len(pending) == 0
	}) {
		t.Fatalf("redis does not match mysql (%d differences: %v) or the outbox is not drained (%v, %v)\nworker log:\n%s",
			len(diff), diff, pending, err, tail(p.log))
	}

	// Propagation without kills: from the committed edit to the new version
	// readable in Redis.
	lat := make([]time.Duration, measured)
	var watchers sync.WaitGroup
	liveNames := make([]string, 0, len(live))
	for name := range live {
		liveNames = append(liveNames, name)
	}
	slices.Sort(liveNames)
	tick = time.NewTicker(50 * time.Millisecond)
	for i := range measured {
		<-tick.C
		b := live[liveNames[i%len(liveNames)]]
		b.MaxPermits = int64(1 + rng.IntN(1000))
		if err := store.Update(ctx, actor, b); err != nil {
			t.Fatalf("update %s: %v", b.Name, err)
		}
		committed, id, version, name := time.Now(), b.ID, b.Version, b.Name
		watchers.Go(func() {
			for time.Since(committed) < 10*time.Second {
				st, err := redisscript.Read(ctx, rdb, ks, name)
				if err == nil && st.Exists && (st.Config.ID > id || st.Config.ID == id && st.Config.Version >= version) {
					lat[i] = time.Since(committed)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			lat[i] = time.Hour // never arrived
		})
	}
	tick.Stop()
	watchers.Wait()
	stopSampling()
	bg.Wait()

	slices.Sort(lat)
	median, p99 := lat[len(lat)/2], lat[(len(lat)*99+99)/100-1]
	t.Logf("propagation over %d edits without kills: median %v, p99 %v, max %v",
		measured, median.Round(time.Millisecond), p99.Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	// Every edit arrived (within 10 s). The brief's p99 of 1 s is a figure
	// of a machine left to the test: it is checked in the soak suite
	// (make soak), and logged above otherwise, since other work on the
	// machine stretches it without anything being wrong.
	if lat[len(lat)-1] == time.Hour {
		t.Errorf("%d edits never arrived in redis within 10 s", len(lat)-slices.Index(lat, time.Hour))
	}
	if os.Getenv("SLUICE_SOAK") == "1" && p99 > time.Second {
		t.Errorf("p99 propagation %v > 1s", p99)
	}

	obs.mu.Lock()
	t.Logf("%d samples of all %d names; %d deleted incarnations", obs.samples, len(names), len(obs.deletedAt))
	if len(obs.regressions) > 0 {
		t.Errorf("%d version regressions: %v", len(obs.regressions), obs.regressions)
	}
	if len(obs.resurrected) > 0 {
		t.Errorf("%d resurrected deletes: %v", len(obs.resurrected), obs.resurrected)
	}
	if obs.samples < 10 {
		t.Errorf("only %d samples", obs.samples)
	}
	obs.mu.Unlock()

	if err := p.stop(); err != nil {
		t.Errorf("graceful stop on SIGTERM: %v\n%s", err, tail(p.log))
	}
}

// redisDiff lists how Redis differs from MySQL for names: missing,
// differing, or present although deleted.
func redisDiff(t *testing.T, store *buckets.Store, rdb redis.UniversalClient, ks redisscript.Keyspace, names []string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, name := range names {
		st, err := redisscript.Read(ctx, rdb, ks, name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := store.Definition(ctx, name)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			if st.Exists {
				out = append(out, fmt.Sprintf("%s: deleted in mysql, in redis as id %d v%d", name, st.Config.ID, st.Config.Version))
			}
		case err != nil:
			t.Fatal(err)
		case !st.Exists:
			out = append(out, name+": missing")
		case st.Config.ID != b.ID || st.Config.Version != b.Version || st.Config.Capacity != b.MaxPermits:
			out = append(out, fmt.Sprintf("%s: redis id %d v%d cap %d, mysql id %d v%d cap %d", name,
				st.Config.ID, st.Config.Version, st.Config.Capacity, b.ID, b.Version, b.MaxPermits))
		}
	}
	return out
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
