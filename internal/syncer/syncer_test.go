package syncer

import (
	"context"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

func TestCreateUpdateDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})

	b := e.create(t, "api", 10, "1/min", ownerApp, otherApp)
	if n := syncOnce(t, w); n != 1 {
		t.Fatalf("SyncOnce applied %d events, want 1", n)
	}
	st := e.read(t, "api")
	want := redisscript.Config{Name: "api", ID: b.ID, Version: 1, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 60,
		Apps: []string{otherApp, ownerApp}}
	if !st.Exists || !sameConfig(st.Config, want) {
		t.Fatalf("after create: %+v, want %+v", st.Config, want)
	}
	if st.Tokens != 10 {
		t.Fatalf("a new bucket starts full: tokens %v, want 10", st.Tokens)
	}
	if got := e.pending(t); len(got) != 0 {
		t.Fatalf("%d events left in the outbox after SyncOnce", len(got))
	}

	// Take 4 of 10 tokens; a slower rate and a larger capacity keep them.
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "api", ownerApp, 4); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v, %v", a, err)
	}
	e.update(t, b, 20, "1/day")
	syncOnce(t, w)
	st = e.read(t, "api")
	if st.Config.Version != 2 || st.Config.Capacity != 20 || st.Config.PeriodSeconds != 86400 {
		t.Fatalf("after update: %+v", st.Config)
	}
	// 6 left, plus at most a few ms of refill at 1/min before the update.
	if st.Tokens < 6 || st.Tokens > 6.1 {
		t.Fatalf("update must keep the tokens: %v, want about 6", st.Tokens)
	}

	// A capacity below the current tokens clamps them.
	e.update(t, b, 3, "1/day")
	syncOnce(t, w)
	if st = e.read(t, "api"); st.Config.Capacity != 3 || st.Tokens != 3 {
		t.Fatalf("after shrinking: capacity %d tokens %v, want 3 and 3", st.Config.Capacity, st.Tokens)
	}

	e.remove(t, "api")
	syncOnce(t, w)
	if st = e.read(t, "api"); st.Exists {
		t.Fatalf("deleted bucket still in redis: %+v", st.Config)
	}
	if a, _ := redisscript.Acquire(ctx, e.rdb, e.ks, "api", ownerApp, 1); a.Code != redisscript.UnknownBucket {
		t.Fatalf("acquire on a deleted bucket: %+v", a)
	}
	if got := e.pending(t); len(got) != 0 {
		t.Fatalf("%d events left in the outbox", len(got))
	}
}

// The shadow flag of a bucket reaches Redis with its events, and the
// reconcile repairs a hash whose flag differs from MySQL's.
func TestShadowSynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})

	b := &buckets.Bucket{Name: "trial", OwnerApp: ownerApp, MaxPermits: 2, Rate: mustRate(t, "1/day"), Shadow: true}
	if err := e.store.Create(ctx, actor, b); err != nil {
		t.Fatal(err)
	}
	syncOnce(t, w)
	if st := e.read(t, "trial"); !st.Config.Shadow {
		t.Fatalf("after create: %+v, want shadow", st.Config)
	}
	// Drained past empty: allowed, would deny, never below zero tokens.
	for i, want := range []redisscript.Code{redisscript.Allowed, redisscript.Allowed, redisscript.WouldDeny, redisscript.WouldDeny} {
		if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "trial", ownerApp, 1); err != nil || a.Code != want {
			t.Fatalf("acquire %d: %+v %v, want code %d", i, a, err, want)
		}
	}
	if st := e.read(t, "trial"); st.Stored < 0 || st.Tokens > 0.01 {
		t.Fatalf("tokens %v (stored %v), want about 0", st.Tokens, st.Stored)
	}

	// Shadow mode off, a new version: the bucket denies.
	b.Shadow = false
	if err := e.store.Update(ctx, actor, b); err != nil {
		t.Fatal(err)
	}
	syncOnce(t, w)
	if st := e.read(t, "trial"); st.Config.Shadow || st.Config.Version != b.Version {
		t.Fatalf("after update: %+v", st.Config)
	}
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "trial", ownerApp, 1); err != nil || a.Code != redisscript.Denied {
		t.Fatalf("shadow off: %+v %v, want denied", a, err)
	}

	// A hash whose flag differs from MySQL is repaired by the reconcile.
	if err := e.rdb.HSet(ctx, e.ks.Bucket("trial"), redisscript.FieldShadow, "1").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := w.Reconcile(ctx)
	if err != nil || rep.Differing != 1 {
		t.Fatalf("reconcile: %+v %v, want 1 differing", rep, err)
	}
	if st := e.read(t, "trial"); st.Config.Shadow {
		t.Fatalf("after reconcile: %+v, want shadow off", st.Config)
	}
}

func TestReorderedAndDuplicateEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	w := e.worker(Config{BatchSize: 2}) // several batches, each in order
	b := e.create(t, "orders", 5, "1/s")
	e.update(t, b, 6, "1/s")
	e.update(t, b, 7, "2/s")
	evs := e.pending(t)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3", len(evs))
	}
	syncOnce(t, w)

	// Late commits and redeliveries: the same events again, newest first,
	// each twice.
	rev := slices.Clone(evs)
	slices.Reverse(rev)
	for _, ev := range rev {
		e.replay(t, ev, ev)
	}
	if n := syncOnce(t, w); n != 6 {
		t.Fatalf("applied %d replayed events, want 6", n)
	}
	st := e.read(t, "orders")
	if st.Config.Version != 3 || st.Config.Capacity != 7 || st.Config.PermitsMicro != 2_000_000 {
		t.Fatalf("older events overwrote a newer config: %+v", st.Config)
	}
	if d := e.diff(t); len(d) > 0 {
		t.Fatalf("redis differs from mysql: %v", d)
	}

	// The same on a worker that never saw the newest event first: oldest
	// last, so only version guards keep the result right.
	e2 := newEnv(t, nil)
	w2 := e2.worker(Config{})
	b2 := e2.create(t, "orders", 5, "1/s")
	e2.update(t, b2, 9, "1/s")
	evs2 := e2.pending(t)
	if _, err := e2.db.Exec(`DELETE FROM bucket_events`); err != nil {
		t.Fatal(err)
	}
	e2.replay(t, evs2[1], evs2[0], evs2[1])
	syncOnce(t, w2)
	if st := e2.read(t, "orders"); st.Config.Version != 2 || st.Config.Capacity != 9 {
		t.Fatalf("reordered events left %+v, want version 2 capacity 9", st.Config)
	}
}

func TestStaleEventAfterDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	w := e.worker(Config{})
	b := e.create(t, "gone", 5, "1/s")
	e.update(t, b, 6, "1/s")
	upserts := e.pending(t)
	e.remove(t, "gone")
	syncOnce(t, w)
	if e.read(t, "gone").Exists {
		t.Fatal("bucket still in redis after delete")
	}

	// Every upsert of the deleted incarnation arrives again, late.
	e.replay(t, upserts...)
	syncOnce(t, w)
	if st := e.read(t, "gone"); st.Exists {
		t.Fatalf("a stale event resurrected a deleted bucket: %+v", st.Config)
	}
	if rep, err := w.Reconcile(context.Background()); err != nil || rep.Repaired() != 0 {
		t.Fatalf("reconcile after the stale events: %+v, %v", rep, err)
	}

	// A new bucket under the same name is a new incarnation: it is applied
	// and starts full, and the old events still cannot touch it.
	nb := e.create(t, "gone", 3, "1/h")
	syncOnce(t, w)
	st := e.read(t, "gone")
	if !st.Exists || st.Config.ID != nb.ID || st.Config.ID == b.ID || st.Tokens != 3 {
		t.Fatalf("re-created bucket: exists %v config %+v tokens %v", st.Exists, st.Config, st.Tokens)
	}
	e.replay(t, upserts...)
	syncOnce(t, w)
	if st := e.read(t, "gone"); st.Config.ID != nb.ID || st.Config.Capacity != 3 {
		t.Fatalf("old incarnation's events overwrote the new one: %+v", st.Config)
	}
}

func TestTwoWorkersAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		w := e.worker(Config{PollInterval: 5 * time.Millisecond, ReconcileInterval: 200 * time.Millisecond, BatchSize: 7, Metrics: reg})
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	// 150 edits on 10 names: updates, deletes and re-creations.
	live := map[string]*buckets.Bucket{}
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	for i := range 150 {
		name := names[i%len(names)]
		switch b := live[name]; {
		case b == nil:
			live[name] = e.create(t, name, int64(1+i), "1/s")
		case i%7 == 0:
			e.remove(t, name)
			delete(live, name)
		default:
			e.update(t, b, int64(1+i), "3/min")
		}
	}
	ok := eventually(15*time.Second, func() bool { return len(e.pending(t)) == 0 && len(e.diff(t)) == 0 })
	cancel()
	wg.Wait()
	if !ok {
		t.Fatalf("two workers did not converge: %d events pending, diff %v", len(e.pending(t)), e.diff(t))
	}
	// Both workers share the registry, and each event was counted.
	if n := testutil.CollectAndCount(reg, "sluice_sync_events_applied_total"); n == 0 {
		t.Fatal("no events_applied_total series")
	}
	total := 0.0
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_sync_events_applied_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	if total < 150 {
		t.Fatalf("events_applied_total = %v, want at least 150", total)
	}
}

func TestReconcileRepairs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})
	e.create(t, "missing", 5, "1/s")
	e.create(t, "differing", 5, "1/s")
	e.create(t, "live", 100, "1/day")
	syncOnce(t, w)

	// The live bucket is in use: its tokens and refill time must survive.
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "live", ownerApp, 40); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	before := e.read(t, "live")

	if err := e.rdb.Del(ctx, e.ks.Bucket("missing")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, e.ks.Bucket("differing"), redisscript.FieldCapacity, "999").Err(); err != nil {
		t.Fatal(err)
	}
	extra := redisscript.Config{Name: "extra", ID: 4242, Version: 3, Capacity: 1, PermitsMicro: 1, PeriodSeconds: 1, Apps: []string{"x"}}
	if _, err := redisscript.Apply(ctx, e.rdb, e.ks, extra, false); err != nil {
		t.Fatal(err)
	}
	// A hash without a usable config is garbage too.
	if err := e.rdb.HSet(ctx, e.ks.Bucket("junk"), "tokens", "1").Err(); err != nil {
		t.Fatal(err)
	}
	// Both as a worker's write left them: in the registry of bucket hashes
	// (the reconcile reads it instead of scanning the keyspace).
	if err := e.rdb.SAdd(ctx, e.ks.BucketRegistry(), "extra", "junk").Err(); err != nil {
		t.Fatal(err)
	}

	rep, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 1 || rep.Differing != 1 || rep.Extra != 2 || rep.Forced != 0 || rep.Definitions != 3 {
		t.Fatalf("report %+v, want 1 missing, 1 differing, 2 extra", rep)
	}
	if d := e.diff(t); len(d) > 0 {
		t.Fatalf("still differs after reconcile: %v", d)
	}
	after := e.read(t, "live")
	if after.Stored != before.Stored || !after.Refilled.Equal(before.Refilled) {
		t.Fatalf("reconcile touched a correct bucket's state: before %v@%v, after %v@%v",
			before.Stored, before.Refilled, after.Stored, after.Refilled)
	}
	if rep, err := w.Reconcile(ctx); err != nil || rep.Repaired() != 0 || rep.Hashes != 3 {
		t.Fatalf("second reconcile: %+v, %v; want nothing to repair", rep, err)
	}
	if v := testutil.ToFloat64(w.m.repairs.WithLabelValues(repairExtra)); v != 2 {
		t.Fatalf("repairs{kind=extra} = %v, want 2", v)
	}
}

func TestReconcileForcesMySQLTruth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})
	ahead := e.create(t, "ahead", 5, "1/s")
	tomb := e.create(t, "tomb", 5, "1/s")
	syncOnce(t, w)

	// Redis claims a version MySQL never had (MySQL restored from a backup).
	cfg := ConfigOf(ahead)
	cfg.Version, cfg.Capacity = 50, 77
	if out, err := redisscript.Apply(ctx, e.rdb, e.ks, cfg, false); err != nil || out != redisscript.Updated {
		t.Fatalf("plant newer version: %v %v", out, err)
	}
	// And a tombstone for an id MySQL still has.
	if _, err := redisscript.Delete(ctx, e.rdb, e.ks, "tomb", tomb.ID, 9); err != nil {
		t.Fatal(err)
	}

	rep, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Forced != 2 {
		t.Fatalf("report %+v, want 2 forced", rep)
	}
	if d := e.diff(t); len(d) > 0 {
		t.Fatalf("mysql did not win: %v", d)
	}
}

func TestRemoveExtraRechecksMySQL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})
	// "late" was created after a reconcile's snapshot, and is in Redis: it
	// looks extra to that reconcile, which must not delete it.
	late := e.create(t, "late", 5, "1/s")
	syncOnce(t, w)
	tl := &tally{m: w.m}
	if err := w.removeExtra(ctx, tl, "late"); err != nil {
		t.Fatal(err)
	}
	if st := e.read(t, "late"); !st.Exists || st.Config.ID != late.ID || tl.rep.Repaired() != 0 {
		t.Fatalf("a bucket created after the snapshot was removed: %+v, report %+v", st, tl.rep)
	}

	// A newer incarnation written between the read and the delete survives
	// the delete script's id guard.
	e.remove(t, "late")
	syncOnce(t, w)
	old := ConfigOf(late)
	newer := old
	newer.ID += 1000
	if _, err := redisscript.Apply(ctx, e.rdb, e.ks, newer, false); err != nil {
		t.Fatal(err)
	}
	if ok, err := redisscript.Delete(ctx, e.rdb, e.ks, "late", old.ID, old.Version+1); err != nil || ok {
		t.Fatalf("delete guarded by an older id removed a newer incarnation: %v %v", ok, err)
	}
}

func TestRunHealsFlushedRedis(t *testing.T) {
	// BRIEF Q6: FLUSHALL with 1000 buckets; all restored within one
	// reconcile period.
	t.Parallel()
	srv, rdb := privateRedis(t)
	_ = srv
	e := newEnv(t, rdb)
	names := e.seed(t, "q6", 1000)
	const period = 2 * time.Second
	w := e.worker(Config{ReconcileInterval: period})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	countAll := func() int {
		n := 0
		for _, chunk := range slices.Collect(slices.Chunk(names, 200)) {
			keys := make([]string, len(chunk))
			for i, name := range chunk {
				keys[i] = e.ks.Bucket(name)
			}
			c, err := rdb.Exists(context.Background(), keys...).Result()
			if err != nil {
				t.Errorf("exists: %v", err)
				return 0
			}
			n += int(c)
		}
		return n
	}
	if !eventually(10*time.Second, func() bool { return countAll() == len(names) }) {
		t.Fatalf("first reconcile: %d of %d buckets in redis", countAll(), len(names))
	}

	for round := range 2 {
		// Flush at different points of the period.
		time.Sleep(time.Duration(round) * 700 * time.Millisecond)
		if err := rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// One period is the promise; a loaded machine may stretch a
		// reconcile of 1000 buckets past it, so make test allows five and
		// the soak suite (SLUICE_SOAK=1) holds the promise itself.
		limit := 5 * period
		if os.Getenv("SLUICE_SOAK") == "1" {
			limit = period
		}
		if !eventually(limit, func() bool { return countAll() == len(names) }) {
			t.Fatalf("round %d: %d of %d buckets restored within %s", round, countAll(), len(names), limit)
		}
		t.Logf("round %d: %d buckets restored %s after FLUSHALL", round, len(names), time.Since(start).Round(time.Millisecond))
	}
	if d := e.diff(t); len(d) > 0 {
		t.Fatalf("after restoration: %d differences, first %q", len(d), d[0])
	}
}

func TestRunRetriesWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv, rdb := privateRedis(t)
	e := newEnv(t, rdb)
	b := e.create(t, "durable", 5, "1/s")
	w := e.worker(Config{PollInterval: 10 * time.Millisecond, ReconcileInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Its event acknowledged too: the reconcile at start may write the hash
	// before the event loop applies the event.
	if !eventually(5*time.Second, func() bool { return e.read(t, "durable").Exists && len(e.pending(t)) == 0 }) {
		t.Fatal("bucket never reached redis")
	}

	srv.Kill()
	e.update(t, b, 8, "1/s")
	if !eventually(10*time.Second, func() bool { return testutil.ToFloat64(w.m.errors.WithLabelValues(stageApply)) > 0 }) {
		t.Fatal("errors{stage=apply} stayed 0 while redis was down")
	}
	if p := e.pending(t); len(p) != 1 {
		t.Fatalf("an event was acknowledged while redis was down: pending %+v", p)
	}
	srv.Start() // empty: no persistence
	// The update arrives through the event, the rest through the reconcile
	// the lost marker triggers (the period is an hour). The event loop's
	// backoff may be up to 5 s by now.
	e.create(t, "second", 5, "1/s")
	if !eventually(20*time.Second, func() bool {
		st := e.read(t, "durable")
		return st.Exists && st.Config.Capacity == 8 && e.read(t, "second").Exists
	}) {
		t.Fatalf("after redis came back: %v", e.diff(t))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestInvalidEventIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	w := e.worker(Config{})
	good := e.create(t, "good", 5, "1/s")
	e.create(t, "bad", 5, "1/s")
	evs := e.pending(t)
	if _, err := e.db.Exec(`DELETE FROM bucket_events`); err != nil {
		t.Fatal(err)
	}
	// Redis refuses a zero capacity: a row written around the store.
	if _, err := e.db.Exec(`UPDATE buckets SET max_permits = 0 WHERE name = 'bad'`); err != nil {
		t.Fatal(err)
	}
	bad := evs[1]
	weird := evs[0]
	weird.Op = "rename"
	gone := evs[0]
	gone.BucketID = 999_999 // a bucket deleted since: its delete follows
	e.replay(t, bad, weird, gone)
	e.update(t, good, 6, "1/s")
	if n := syncOnce(t, w); n != 4 {
		t.Fatalf("applied %d events, want 4 (3 skipped, 1 applied)", n)
	}
	if st := e.read(t, "good"); st.Config.Capacity != 6 {
		t.Fatalf("an event behind a poisoned one was not applied: %+v", st.Config)
	}
	if e.read(t, "bad").Exists || len(e.pending(t)) != 0 {
		t.Fatal("the invalid event was applied or left pending")
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	w := e.worker(Config{})
	if err := New(Config{}).Run(context.Background()); err == nil {
		t.Fatal("Run without stores succeeded")
	}
	if _, err := New(Config{}).SyncOnce(context.Background()); err == nil {
		t.Fatal("SyncOnce without stores succeeded")
	}
	if _, err := New(Config{}).Reconcile(context.Background()); err == nil {
		t.Fatal("Reconcile without stores succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if !eventually(5*time.Second, func() bool { return !w.LastPoll().IsZero() && !w.LastReconcile().IsZero() }) {
		t.Fatal("the worker never polled and reconciled")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	prev := time.Duration(0)
	for i := range 10 {
		d := b.next()
		if d < b.cur/2 || d > b.cur || d > time.Second {
			t.Fatalf("attempt %d: wait %v outside [%v, %v]", i, d, b.cur/2, b.cur)
		}
		if b.cur < prev {
			t.Fatalf("attempt %d: backoff shrank", i)
		}
		prev = b.cur
	}
	if b.cur != time.Second {
		t.Fatalf("backoff did not reach its max: %v", b.cur)
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}

func TestSameConfig(t *testing.T) {
	a := redisscript.Config{Name: "x", ID: 1, Version: 2, Capacity: 3, PermitsMicro: 4, PeriodSeconds: 5, Apps: []string{"b", "a"}}
	b := a
	b.Apps = []string{"a", "b"}
	if !sameConfig(a, b) {
		t.Fatal("app order must not matter")
	}
	for _, mut := range []func(*redisscript.Config){
		func(c *redisscript.Config) { c.ID++ },
		func(c *redisscript.Config) { c.Version++ },
		func(c *redisscript.Config) { c.Capacity++ },
		func(c *redisscript.Config) { c.PermitsMicro++ },
		func(c *redisscript.Config) { c.PeriodSeconds++ },
		func(c *redisscript.Config) { c.LeaseMillis = 100 },
		func(c *redisscript.Config) { c.Shadow = true },
		func(c *redisscript.Config) { c.Reserve = 1 },
		func(c *redisscript.Config) { c.Apps = []string{"a"} },
		func(c *redisscript.Config) { c.Apps = []string{"a", "c"} },
	} {
		c := a
		c.Apps = slices.Clone(a.Apps)
		mut(&c)
		if sameConfig(a, c) {
			t.Fatalf("%+v reported equal to %+v", c, a)
		}
	}
}

// lagOf is a sanity check of the lag histogram: one observation per event.
func TestLagObserved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	reg := prometheus.NewRegistry()
	w := e.worker(Config{Metrics: reg})
	e.create(t, "lag", 1, "1/s")
	syncOnce(t, w)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_sync_propagation_lag_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() < 0 || math.IsNaN(h.GetSampleSum()) || h.GetSampleSum() > 60 {
				t.Fatalf("lag histogram: count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
	}
	t.Fatal("no propagation lag histogram")
}

func TestRunRetriesWhileMySQLIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private MariaDB server")
	}
	t.Parallel()
	srv := testenv.StartMariaDB(t)
	db, err := database.Open(context.Background(), srv.FreshDatabase(t), database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, prefix := testenv.Redis(t)
	e := &env{db: db, store: buckets.NewStore(db), rdb: c, ks: redisscript.Keyspace{Prefix: prefix}}
	if err := apps.NewStore(db).Create(context.Background(), actor, &apps.App{Name: ownerApp}); err != nil {
		t.Fatal(err)
	}
	b := e.create(t, "through", 5, "1/s")
	w := e.worker(Config{PollInterval: 20 * time.Millisecond, ReconcileInterval: 500 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if !eventually(5*time.Second, func() bool { return e.read(t, "through").Exists }) {
		t.Fatal("bucket never reached redis")
	}

	srv.Kill()
	if !eventually(10*time.Second, func() bool {
		return testutil.ToFloat64(w.m.errors.WithLabelValues(stagePoll)) > 0 &&
			testutil.ToFloat64(w.m.errors.WithLabelValues(stageReconcile)) > 0
	}) {
		t.Fatal("no poll and reconcile errors counted while mysql was down")
	}
	stale := w.LastPoll()
	srv.Start()
	e.update(t, b, 9, "1/s")
	if !eventually(15*time.Second, func() bool { return e.read(t, "through").Config.Capacity == 9 }) {
		t.Fatal("the worker did not resume after mysql came back")
	}
	if !eventually(10*time.Second, func() bool { return w.LastPoll().After(stale) }) {
		t.Fatal("LastPoll did not move after recovery")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestReconcileSkipsInvalidDefinition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	names := e.seed(t, "inv", 40)
	// A row without allowed apps cannot be written to Redis.
	if _, err := e.db.Exec(`DELETE FROM bucket_apps WHERE bucket_id = (SELECT id FROM buckets WHERE name = ?)`, names[0]); err != nil {
		t.Fatal(err)
	}
	w := e.worker(Config{})
	rep, err := w.Reconcile(context.Background())
	if err != nil {
		t.Fatalf("one invalid definition failed the whole reconcile: %v", err)
	}
	if rep.Missing != len(names)-1 {
		t.Fatalf("report %+v, want %d missing repaired", rep, len(names)-1)
	}
	if v := testutil.ToFloat64(w.m.errors.WithLabelValues(stageReconcile)); v != 1 {
		t.Fatalf("errors{stage=reconcile} = %v, want 1", v)
	}
}

func TestStopFinishesTheBatchInHand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const n, batch = 1050, 100
	// Real rows behind the events: the reconcile that runs at start would
	// rightly delete hashes of buckets MySQL does not have.
	names := e.seed(t, "drain", n)
	if _, err := e.db.Exec(`INSERT INTO bucket_events (bucket_id, bucket_name, op, version, created_at)
		SELECT id, name, 'upsert', version, UTC_TIMESTAMP(6) FROM buckets WHERE name LIKE 'drain-%' ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	w := e.worker(Config{BatchSize: batch, ReconcileInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Stop as soon as the first batch was acknowledged: the next one is
	// likely in hand. The bound only turns a hang into a failure: with the
	// start-up reconcile of every bucket beside it, a loaded machine takes
	// seconds over the first batch.
	if !eventually(time.Minute, func() bool {
		var left int
		_ = e.db.Get(&left, `SELECT COUNT(*) FROM bucket_events`)
		return left < n
	}) {
		cancel()
		<-done
		t.Fatal("no batch acknowledged within a minute")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	left := e.pending(t)
	if len(left)%batch != n%batch || len(left) == n {
		t.Fatalf("%d events left after stopping; a batch was cut short", len(left))
	}
	pending := map[string]bool{}
	for _, ev := range left {
		pending[ev.Name] = true
	}
	for _, name := range names {
		if !pending[name] && !e.read(t, name).Exists {
			t.Fatalf("event for %s acknowledged but not applied", name)
		}
	}
	t.Logf("stopped with %d of %d events pending", len(left), n)
}

// TestUpsertEventReadsTheCurrentRow: an event names the change and the
// worker applies the definition stored when it reads the event, so the
// first of two pending upserts already writes the second version (the
// second then changes nothing), and an upsert whose bucket is gone writes
// nothing at all.
func TestUpsertEventReadsTheCurrentRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	w := e.worker(Config{})
	b := e.create(t, "api", 5, "1/s")
	e.update(t, b, 7, "2/s")
	evs := e.pending(t)
	if len(evs) != 2 || evs[0].Version != 1 {
		t.Fatalf("pending %+v, want the events of versions 1 and 2", evs)
	}
	if err := w.applyEvent(context.Background(), evs[0]); err != nil {
		t.Fatal(err)
	}
	if st := e.read(t, "api"); st.Config.Version != 2 || st.Config.Capacity != 7 {
		t.Fatalf("after the version 1 event: %+v, want version 2 with capacity 7", st.Config)
	}
	if n := syncOnce(t, w); n != 2 {
		t.Fatalf("applied %d events, want both again", n)
	}
	if v := testutil.ToFloat64(w.m.applied.WithLabelValues(string(buckets.OpUpsert), "unchanged")); v != 2 {
		t.Fatalf("upserts unchanged = %v, want 2", v)
	}
	// Deleted meanwhile: the pending upsert is superseded, the delete
	// removes the hash, and nothing brings it back.
	gone := e.create(t, "gone", 5, "1/s")
	if err := e.store.Delete(context.Background(), actor, gone.Name, buckets.Expect{}); err != nil {
		t.Fatal(err)
	}
	for syncOnce(t, w) > 0 {
	}
	if v := testutil.ToFloat64(w.m.applied.WithLabelValues(string(buckets.OpUpsert), "superseded")); v != 1 {
		t.Fatalf("upserts superseded = %v, want 1", v)
	}
	if e.read(t, "gone").Exists {
		t.Fatal("a deleted bucket was written")
	}
}

// TestReconcileRepairsPackedLimit: a packed limit that is not the hash's
// fields' limit (the acquire decides with it) is repaired like a differing
// field, keeping the bucket's tokens.
func TestReconcileRepairsPackedLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	w := e.worker(Config{})
	e.create(t, "packed", 5, "1/day")
	e.create(t, "other", 100, "1/day")
	syncOnce(t, w)
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "packed", ownerApp, 2); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	other, err := e.rdb.HGet(ctx, e.ks.Bucket("other"), redisscript.FieldPacked).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, e.ks.Bucket("packed"), redisscript.FieldPacked, other).Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Differing != 1 || rep.Repaired() != 1 {
		t.Fatalf("report %+v, want 1 differing", rep)
	}
	st := e.read(t, "packed")
	// 1 a day refills a few millionths of a token a second.
	if st.PackedDiffers || st.Stored < 3 || st.Stored > 3.01 {
		t.Fatalf("after the reconcile: %+v, want the packed limit rewritten and 3 tokens kept", st)
	}
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "packed", ownerApp, 1); err != nil || a.Capacity != 5 {
		t.Fatalf("acquire after the repair: %+v %v", a, err)
	}
}

// TestReconcileMovesStateForm: a worker that keeps the decimal state (for
// clients of an older release) writes it; one that keeps the binary state
// moves every bucket to it in one reconcile, tokens kept, and then finds
// nothing to repair; and back.
func TestReconcileMovesStateForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	old := e.worker(Config{DecimalState: true})
	e.create(t, "moved", 5, "1/day")
	syncOnce(t, old)
	form := func(want string) {
		t.Helper()
		h, err := e.rdb.HGetAll(ctx, e.ks.Bucket("moved")).Result()
		if err != nil {
			t.Fatal(err)
		}
		_, st := h[redisscript.FieldState]
		_, tok := h[redisscript.FieldTokens]
		if got := map[bool]string{true: "binary", false: "decimal"}[st]; got != want || st == tok {
			t.Fatalf("hash %q: state form %s (tokens field %v), want %s", h, got, tok, want)
		}
	}
	form("decimal")
	if a, err := redisscript.Acquire(ctx, e.rdb, e.ks, "moved", ownerApp, 2); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	form("decimal")
	if rep, err := old.Reconcile(ctx); err != nil || rep.Repaired() != 0 {
		t.Fatalf("reconcile of the decimal worker: %+v %v, want nothing to repair", rep, err)
	}

	for _, w := range []struct {
		worker *Worker
		form   string
	}{{e.worker(Config{}), "binary"}, {old, "decimal"}} {
		rep, err := w.worker.Reconcile(ctx)
		if err != nil || rep.Differing != 1 || rep.Repaired() != 1 {
			t.Fatalf("reconcile to %s: %+v %v, want 1 differing", w.form, rep, err)
		}
		form(w.form)
		// 1 a day refills a few millionths of a token a second.
		if st := e.read(t, "moved"); st.Stored < 3 || st.Stored > 3.01 || st.Config.DecimalState != (w.form == "decimal") {
			t.Fatalf("after the reconcile to %s: %+v, want 3 tokens kept", w.form, st)
		}
		if rep, err := w.worker.Reconcile(ctx); err != nil || rep.Repaired() != 0 {
			t.Fatalf("second reconcile to %s: %+v %v, want nothing to repair", w.form, rep, err)
		}
	}
}
