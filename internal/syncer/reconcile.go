package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// reconcileWorkers is how many buckets a reconcile checks at once: enough
// to hide Redis round trips, few enough to leave the pool to others.
const reconcileWorkers = 16

// Report says what a full reconcile found and did.
type Report struct {
	// Definitions is the number of buckets in MySQL; Hashes the number of
	// bucket hashes found in Redis.
	Definitions int
	Hashes      int
	// Missing hashes were created, Differing ones rewritten, Extra ones
	// (no bucket in MySQL) deleted, and Forced ones overwritten because
	// Redis held a newer (id, version) than MySQL.
	Missing   int
	Differing int
	Extra     int
	Forced    int
	// Overrides of keyed buckets written because Redis lacked them
	// (OverrideMissing) or held them differently (OverrideDiffering), and
	// removed because MySQL does not have them (OverrideExtra).
	OverrideMissing   int
	OverrideDiffering int
	OverrideExtra     int
	// Tables are quotas whose table of periods was renewed: a period has
	// begun since it was written. Routine, so not counted in Repaired.
	Tables   int
	Duration time.Duration
}

// Repaired is the number of hashes the reconcile changed.
func (r Report) Repaired() int {
	return r.Missing + r.Differing + r.Extra + r.Forced + r.OverrideMissing + r.OverrideDiffering + r.OverrideExtra
}

func (r Report) attrs() []any {
	return []any{"definitions", r.Definitions, "hashes", r.Hashes, "missing", r.Missing,
		"differing", r.Differing, "extra", r.Extra, "forced", r.Forced, "override_missing", r.OverrideMissing,
		"override_differing", r.OverrideDiffering, "override_extra", r.OverrideExtra, "tables", r.Tables, "duration", r.Duration.String()}
}

// tally collects a Report from concurrent checks.
type tally struct {
	mu  sync.Mutex
	rep Report
	m   *metrics
}

func (t *tally) add(kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch kind {
	case repairMissing:
		t.rep.Missing++
	case repairDiffering:
		t.rep.Differing++
	case repairExtra:
		t.rep.Extra++
	case repairForced:
		t.rep.Forced++
	case repairOverrideMissing:
		t.rep.OverrideMissing++
	case repairOverrideDiffering:
		t.rep.OverrideDiffering++
	case repairOverrideExtra:
		t.rep.OverrideExtra++
	case renewTable:
		t.rep.Tables++
	default:
		return
	}
	t.m.repairs.WithLabelValues(kind).Inc()
}

// Reconcile compares every bucket definition in MySQL with the hashes in
// Redis and repairs what differs: it creates missing hashes, rewrites
// hashes whose config differs (keeping their tokens), and deletes hashes
// of buckets MySQL does not have. A hash whose config is right is not
// written, so live token state is never disturbed.
//
// Reconcile is safe to run while events are applied and while other
// workers reconcile: every write is guarded by (id, version) in Redis, and
// anything that looks wrong against the snapshot is re-checked in MySQL
// before it is acted on.
func (w *Worker) Reconcile(ctx context.Context) (Report, error) {
	if err := w.check(); err != nil {
		return Report{}, err
	}
	start := time.Now()
	rep, err := w.reconcile(ctx)
	rep.Duration = time.Since(start)
	if err != nil {
		if ctx.Err() == nil {
			w.m.errors.WithLabelValues(stageReconcile).Inc()
		}
		return rep, err
	}
	w.lastReconcile.Store(time.Now().UnixNano())
	w.m.lastReconcile.SetToCurrentTime()
	w.m.reconcileDuration.Observe(rep.Duration.Seconds())
	return rep, nil
}

func (w *Worker) reconcile(ctx context.Context) (Report, error) {
	// The marker goes first: should Redis lose its data during this run,
	// its absence triggers another one.
	if err := w.rdb.Set(ctx, w.marker, time.Now().UTC().Format(time.RFC3339), 0).Err(); err != nil {
		return Report{}, fmt.Errorf("write sync marker: %w", err)
	}
	defs, err := w.store.Definitions(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("read bucket definitions: %w", err)
	}
	names, err := w.scan(ctx)
	if err != nil {
		return Report{}, err
	}
	t := &tally{rep: Report{Definitions: len(defs), Hashes: len(names)}, m: w.m}
	// Plain buckets have a bucket hash, keyed ones key groups (found
	// through the registry of keyed names, not by scanning key states).
	known := make(map[string]bool, len(defs))
	keyed := map[string]bool{}
	for _, d := range defs {
		if d.Keyed {
			keyed[d.Name] = true
		} else {
			known[d.Name] = true
		}
	}
	var extras []string
	for name := range names {
		if !known[name] {
			extras = append(extras, name)
		}
	}
	slices.Sort(extras)
	registered, err := w.rdb.SMembers(ctx, w.ks.KeyedRegistry()).Result()
	if err != nil {
		return Report{}, fmt.Errorf("read keyed bucket registry: %w", err)
	}
	var keyedExtras []string
	for _, name := range registered {
		if !keyed[name] && redisscript.ValidName(name) {
			keyedExtras = append(keyedExtras, name)
		}
	}
	slices.Sort(keyedExtras)

	// Each definition is checked against Redis, plain buckets a page of
	// hashes to a pipeline; plain buckets that need a repair are collected
	// and repaired in batches (one lock and one pipeline per batch), keyed
	// ones at once. Then the extras go.
	var mu sync.Mutex
	var repairs []repairJob
	var checks []func(context.Context) error
	var plain []*buckets.Bucket
	for _, d := range defs {
		if d.Keyed {
			checks = append(checks, func(ctx context.Context) error { return w.reconcileKeyed(ctx, t, d) })
		} else {
			plain = append(plain, d)
		}
	}
	for page := range slices.Chunk(plain, redisscript.MaxReadMany) {
		checks = append(checks, func(ctx context.Context) error {
			jobs, err := w.checkBuckets(ctx, page)
			mu.Lock()
			repairs = append(repairs, jobs...)
			mu.Unlock()
			return err
		})
	}
	if err := w.runJobs(ctx, checks); err != nil {
		return t.rep, err
	}
	slices.SortFunc(repairs, func(a, b repairJob) int { return strings.Compare(a.name, b.name) })
	var batches []func(context.Context) error
	for batch := range slices.Chunk(repairs, repairBatch) {
		batches = append(batches, func(ctx context.Context) error { return w.repair(ctx, t, batch...) })
	}
	if err := w.runJobs(ctx, batches); err != nil {
		return t.rep, err
	}
	removals := make([]func(context.Context) error, 0, len(extras)+len(keyedExtras))
	for _, name := range extras {
		removals = append(removals, func(ctx context.Context) error { return w.removeExtra(ctx, t, name) })
	}
	for _, name := range keyedExtras {
		removals = append(removals, func(ctx context.Context) error { return w.removeExtraKeyed(ctx, t, name) })
	}
	return t.rep, w.runJobs(ctx, removals)
}

// repairBatch is the most plain buckets a reconcile repairs under one lock
// of their rows and in one pipeline.
const repairBatch = 100

// runJobs runs jobs on reconcileWorkers goroutines. A store failure stops
// them and is returned (the retry redoes the run from scratch); a
// definition Redis refuses as invalid only skips that bucket, so one bad
// row cannot keep every other bucket from being repaired.
func (w *Worker) runJobs(ctx context.Context, jobs []func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	feed := make(chan func(context.Context) error)
	var wg sync.WaitGroup
	for range min(reconcileWorkers, len(jobs)) {
		wg.Go(func() {
			for job := range feed {
				err := job(ctx)
				switch {
				case err == nil:
				case errors.Is(err, redisscript.ErrInvalidConfig):
					w.skipInvalid(err)
				default:
					cancel(err)
				}
			}
		})
	}
jobs:
	for _, job := range jobs {
		select {
		case feed <- job:
		case <-ctx.Done():
			break jobs
		}
	}
	close(feed)
	wg.Wait()
	return context.Cause(ctx)
}

// skipInvalid logs and counts a definition Redis refuses as invalid.
func (w *Worker) skipInvalid(err error) {
	w.m.errors.WithLabelValues(stageReconcile).Inc()
	w.log.Error("sync: reconcile skipped a bucket redis rejects", "err", err)
}

// scan returns the names of the bucket hashes in Redis: the registry the
// worker keeps of the hashes it writes (redisscript.Keyspace.BucketRegistry),
// read with SSCAN, so that the cost follows the number of buckets, not of
// keys (keyed buckets keep a key per active caller key, millions of them).
// When the registry is missing (a flushed Redis, or hashes written before
// the registry existed) it falls back to a SCAN of every master and
// registers what it finds.
func (w *Worker) scan(ctx context.Context) (map[string]bool, error) {
	n, err := w.rdb.Exists(ctx, w.ks.BucketRegistry()).Result()
	if err != nil {
		return nil, fmt.Errorf("read bucket registry: %w", err)
	}
	if n == 0 {
		return w.scanAll(ctx)
	}
	names := map[string]bool{}
	iter := w.rdb.SScan(ctx, w.ks.BucketRegistry(), 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		if redisscript.ValidName(iter.Val()) {
			names[iter.Val()] = true
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("read bucket registry: %w", err)
	}
	return names, nil
}

// scanAll returns the names of every bucket hash in Redis, from every
// master of a cluster, and adds them to the registry.
func (w *Worker) scanAll(ctx context.Context) (map[string]bool, error) {
	names := map[string]bool{}
	var mu sync.Mutex
	scanNode := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, w.ks.Pattern(), 1000).Iterator()
		for iter.Next(ctx) {
			if name, ok := w.ks.NameOf(iter.Val()); ok {
				mu.Lock()
				names[name] = true
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	if cc, ok := w.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scanNode(ctx, node) })
	} else {
		err = scanNode(ctx, w.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("scan redis for bucket hashes: %w", err)
	}
	// "" (no valid name, skipped when read) makes the set exist even
	// without any bucket hash, so the next run reads it and scans nothing.
	all := make([]any, 0, len(names)+1)
	all = append(all, "")
	for name := range names {
		all = append(all, name)
	}
	for chunk := range slices.Chunk(all, 1000) {
		if err := w.rdb.SAdd(ctx, w.ks.BucketRegistry(), chunk...).Err(); err != nil {
			return nil, fmt.Errorf("register bucket hashes: %w", err)
		}
	}
	return names, nil
}

// checkBuckets compares the hashes of MySQL definitions ds (plain
// buckets, at most redisscript.MaxReadMany) with them, read in one
// pipeline, and names the repairs they need: repairMissing,
// repairDiffering or renewTable (a quota's table of period boundaries).
func (w *Worker) checkBuckets(ctx context.Context, ds []*buckets.Bucket) ([]repairJob, error) {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	sts, err := redisscript.ReadMany(ctx, w.rdb, w.ks, names)
	if err != nil {
		return nil, fmt.Errorf("read redis hashes: %w", err)
	}
	var jobs []repairJob
	for _, d := range ds {
		st, want := sts[d.Name], ConfigOf(d)
		kind := ""
		switch {
		case !st.Exists:
			kind = repairMissing
		case !w.hashCurrent(st, want):
			kind = repairDiffering
		case !tableCurrent(st.Config.Bounds, want.Bounds):
			kind = renewTable
		}
		if kind != "" {
			jobs = append(jobs, repairJob{name: d.Name, kind: kind})
		}
	}
	return jobs, nil
}

// repairJob is a bucket a reconcile found missing or differing in Redis.
type repairJob struct {
	name  string
	kind  string // repairMissing, repairDiffering or renewTable
	keyed bool
}

// repair writes MySQL's current definitions of the jobs' buckets to Redis,
// after the snapshot showed that Redis lacks them or holds them
// differently. The snapshot may be behind, so the definitions written are
// read again, and written while their rows are locked (see
// WithDefinitions): a bucket deleted since is not written at all, and one
// deleted right now is deleted only after the write, by the event that
// follows, never before it. When Redis refuses a definition as older than
// what it holds (or as deleted), MySQL, whose row cannot change meanwhile,
// has confirmed it: Redis is overwritten by force. MySQL is the truth;
// Redis can be ahead of it only after MySQL lost data or reused an id.
func (w *Worker) repair(ctx context.Context, t *tally, jobs ...repairJob) error {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.name
	}
	return w.store.WithDefinitions(ctx, names, func(defs map[string]*buckets.Bucket) error {
		var todo []repairJob
		var cfgs []redisscript.Config
		var keyed []bool
		for _, j := range jobs {
			// Gone since the snapshot (its delete event rules), or created
			// again as the other kind (the next run rules): nothing.
			if cur := defs[j.name]; cur != nil && cur.Keyed == j.keyed {
				todo, cfgs, keyed = append(todo, j), append(cfgs, ConfigOf(cur)), append(keyed, j.keyed)
			}
		}
		outs, errs := w.applyConfigs(ctx, cfgs, keyed, false)
		for i, j := range todo {
			switch err := errs[i]; {
			case errors.Is(err, redisscript.ErrInvalidConfig):
				w.skipInvalid(err)
				continue
			case err != nil:
				return fmt.Errorf("repair redis hash of %q: %w", j.name, err)
			}
			switch outs[i] {
			case redisscript.Created, redisscript.Updated:
				t.add(j.kind)
			case redisscript.Unchanged: // someone else fixed it meanwhile
			default:
				if err := w.force(ctx, t, cfgs[i], outs[i], j.keyed); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// force overwrites Redis with cfg, which MySQL holds locked, after Apply
// refused it with out (Stale or Tombstoned). A tombstone never yields to
// a forced write, so it is removed first: it can only be there because
// MySQL reused the id or was restored from a backup.
func (w *Worker) force(ctx context.Context, t *tally, cfg redisscript.Config, out redisscript.ApplyOutcome, keyed bool) error {
	if out == redisscript.Tombstoned {
		if err := w.clearTombstones(ctx, keyed, cfg.Name); err != nil {
			return fmt.Errorf("clear tombstone of %q: %w", cfg.Name, err)
		}
	}
	res, err := w.applyConfig(ctx, keyed, cfg, true)
	if err != nil {
		return fmt.Errorf("force redis hash of %q: %w", cfg.Name, err)
	}
	if res == redisscript.Created || res == redisscript.Updated {
		t.add(repairForced)
		w.log.Warn("sync: redis held a newer or deleted version of a bucket; overwrote it with mysql's",
			"bucket", cfg.Name, "id", cfg.ID, "version", cfg.Version, "refused_as", out.String())
	}
	return nil
}

// removeExtra deletes the hash of name, which the snapshot of MySQL does
// not have, unless MySQL has it now (created after the snapshot). The
// delete is guarded by the id read from Redis, so a newer incarnation of
// the name written meanwhile survives.
func (w *Worker) removeExtra(ctx context.Context, t *tally, name string) error {
	st, err := redisscript.Read(ctx, w.rdb, w.ks, name)
	if err != nil {
		return fmt.Errorf("read redis hash of %q: %w", name, err)
	}
	if !st.Exists {
		// Either gone already, or a hash without a valid config, which no
		// client can use: delete the latter whatever MySQL says, the
		// check of its definition (if any) rewrites it.
		n, err := w.rdb.Exists(ctx, w.ks.Bucket(name)).Result()
		if err != nil {
			return err
		}
		if n == 0 {
			return w.unregister(ctx, name)
		}
	}
	cur, err := w.store.Definition(ctx, name)
	switch {
	case err == nil && cur.Keyed:
		// A keyed bucket has no bucket hash: this one goes.
	case err == nil:
		if st.Exists && w.hashCurrent(st, ConfigOf(cur)) {
			return nil
		}
		return w.repair(ctx, t, repairJob{name: name, kind: repairDiffering})
	case !errors.Is(err, errs.ErrNotFound):
		return fmt.Errorf("re-check bucket %q: %w", name, err)
	}
	id := st.Config.ID
	if !st.Exists {
		// The delete script spares hashes with a larger id than it is
		// given, so a garbage hash is deleted under its own id, if any.
		raw, err := w.rdb.HGet(ctx, w.ks.Bucket(name), redisscript.FieldID).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("read id of redis hash %q: %w", name, err)
		}
		id, _ = strconv.ParseInt(raw, 10, 64) // garbage reads as 0
		id = max(id, 0)
	}
	// Version is the deletion's, as a delete event would carry it.
	deleted, err := redisscript.Delete(ctx, w.rdb, w.ks, name, id, st.Config.Version+1)
	if err != nil {
		return fmt.Errorf("delete extra redis hash of %q: %w", name, err)
	}
	if deleted {
		t.add(repairExtra)
	}
	return w.unregister(ctx, name)
}

// hashCurrent reports whether the existing hash read as st holds want as
// the worker writes it: the same config, a packed limit that agrees with
// it, and the state in the worker's form.
func (w *Worker) hashCurrent(st redisscript.State, want redisscript.Config) bool {
	return sameConfig(st.Config, want) && !st.PackedDiffers && st.StateFormRight(w.decimal)
}

// sameConfig compares configs, allowed apps as a set.
func sameConfig(a, b redisscript.Config) bool {
	if a.ID != b.ID || a.Version != b.Version || a.Capacity != b.Capacity ||
		a.PermitsMicro != b.PermitsMicro || a.PeriodSeconds != b.PeriodSeconds || a.LeaseMillis != b.LeaseMillis ||
		a.Shadow != b.Shadow || a.LimitKind() != b.LimitKind() || a.SlotMillis != b.SlotMillis || a.Reserve != b.Reserve ||
		len(a.Apps) != len(b.Apps) {
		return false
	}
	x, y := slices.Clone(a.Apps), slices.Clone(b.Apps)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
