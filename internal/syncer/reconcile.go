package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

	// A store failure stops the run, which the retry redoes from scratch;
	// a definition Redis refuses as invalid only skips that bucket, so one
	// bad row cannot keep every other bucket from being repaired.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan func(context.Context) error)
	var wg sync.WaitGroup
	for range reconcileWorkers {
		wg.Go(func() {
			for job := range jobs {
				err := job(ctx)
				switch {
				case err == nil:
				case errors.Is(err, redisscript.ErrInvalidConfig):
					w.m.errors.WithLabelValues(stageReconcile).Inc()
					w.log.Error("sync: reconcile skipped a bucket redis rejects", "err", err)
				default:
					cancel(err)
				}
			}
		})
	}
feed:
	for _, d := range defs {
		select {
		case jobs <- func(ctx context.Context) error {
			if d.Keyed {
				return w.reconcileKeyed(ctx, t, d)
			}
			return w.reconcileBucket(ctx, t, d)
		}:
		case <-ctx.Done():
			break feed
		}
	}
	removals := make([]func(context.Context) error, 0, len(extras)+len(keyedExtras))
	for _, name := range extras {
		removals = append(removals, func(ctx context.Context) error { return w.removeExtra(ctx, t, name) })
	}
	for _, name := range keyedExtras {
		removals = append(removals, func(ctx context.Context) error { return w.removeExtraKeyed(ctx, t, name) })
	}
	for _, job := range removals {
		if ctx.Err() != nil {
			break
		}
		select {
		case jobs <- job:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return t.rep, err
	}
	return t.rep, nil
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

// reconcileBucket makes the hash of one MySQL definition right.
func (w *Worker) reconcileBucket(ctx context.Context, t *tally, d *buckets.Bucket) error {
	st, err := redisscript.Read(ctx, w.rdb, w.ks, d.Name)
	if err != nil {
		return fmt.Errorf("read redis hash of %q: %w", d.Name, err)
	}
	want := bucketConfig(d)
	kind := repairDiffering
	switch {
	case !st.Exists:
		kind = repairMissing
	case sameConfig(st.Config, want) && tableCurrent(st.Config.Bounds, want.Bounds):
		return nil
	case sameConfig(st.Config, want):
		kind = renewTable
	}
	return w.repair(ctx, t, d.Name, kind, false)
}

// repair writes MySQL's current definition of name to Redis, after the
// snapshot showed that Redis lacks it or holds it differently. The
// snapshot may be behind, so the definition written is read again, and
// written while its row is locked (see WithDefinition): a bucket deleted
// since is not written at all, and one deleted right now is deleted only
// after the write, by the event that follows, never before it. When Redis
// refuses the definition as older than what it holds (or as deleted),
// MySQL, whose row cannot change meanwhile, has confirmed it: Redis is
// overwritten by force. MySQL is the truth; Redis can be ahead of it only
// after MySQL lost data or reused an id.
func (w *Worker) repair(ctx context.Context, t *tally, name string, kind string, keyed bool) error {
	return w.store.WithDefinition(ctx, name, func(cur *buckets.Bucket) error {
		if cur == nil || cur.Keyed != keyed {
			// Deleted since the snapshot (its delete event rules), or
			// created again as the other kind (the next run rules).
			return nil
		}
		cfg := bucketConfig(cur)
		out, err := w.applyConfig(ctx, keyed, cfg, false)
		if err != nil {
			return fmt.Errorf("repair redis hash of %q: %w", name, err)
		}
		switch out {
		case redisscript.Created, redisscript.Updated:
			t.add(kind)
			return nil
		case redisscript.Unchanged:
			return nil // someone else fixed it meanwhile
		}
		return w.force(ctx, t, cfg, out, keyed)
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
		if st.Exists && sameConfig(st.Config, bucketConfig(cur)) {
			return nil
		}
		return w.repair(ctx, t, name, repairDiffering, false)
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

// sameConfig compares configs, allowed apps as a set.
func sameConfig(a, b redisscript.Config) bool {
	if a.ID != b.ID || a.Version != b.Version || a.Capacity != b.Capacity ||
		a.PermitsMicro != b.PermitsMicro || a.PeriodSeconds != b.PeriodSeconds || a.LeaseMillis != b.LeaseMillis ||
		a.Shadow != b.Shadow || a.LimitKind() != b.LimitKind() || a.Reserve != b.Reserve ||
		len(a.Apps) != len(b.Apps) {
		return false
	}
	x, y := slices.Clone(a.Apps), slices.Clone(b.Apps)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
