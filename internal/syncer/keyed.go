package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// applyConfig writes a bucket's config: the bucket hash of a plain bucket,
// every key group of a keyed one.
func (w *Worker) applyConfig(ctx context.Context, keyed bool, cfg redisscript.Config, force bool) (redisscript.ApplyOutcome, error) {
	outs, errs := w.applyConfigs(ctx, []redisscript.Config{cfg}, []bool{keyed}, force)
	return outs[0], errs[0]
}

// applyConfigs writes the configs of several buckets, keyed[i] telling
// which kind cfgs[i] is: outs[i] and errs[i] are cfgs[i]'s outcome. Plain
// buckets go in one pipeline, in order; keyed ones one after the other,
// each in a pipeline of its groups.
func (w *Worker) applyConfigs(ctx context.Context, cfgs []redisscript.Config, keyed []bool, force bool) (outs []redisscript.ApplyOutcome, errs []error) {
	outs, errs = make([]redisscript.ApplyOutcome, len(cfgs)), make([]error, len(cfgs))
	var plain []int
	for i, cfg := range cfgs {
		if keyed[i] {
			w.hookWrite(cfg.Name)
			outs[i], errs[i] = redisscript.ApplyKeyed(ctx, w.rdb, w.ks, cfg, force)
			continue
		}
		plain = append(plain, i)
	}
	if len(plain) == 0 {
		return outs, errs
	}
	names := make([]any, len(plain))
	pcfgs := make([]redisscript.Config, len(plain))
	for k, i := range plain {
		names[k], pcfgs[k] = cfgs[i].Name, cfgs[i]
		pcfgs[k].DecimalState = w.decimal
	}
	// The registry first: a hash written before a crash is still found.
	if err := w.rdb.SAdd(ctx, w.ks.BucketRegistry(), names...).Err(); err != nil {
		for _, i := range plain {
			errs[i] = fmt.Errorf("apply bucket %q: register: %w", cfgs[i].Name, err)
		}
		return outs, errs
	}
	for _, cfg := range pcfgs {
		w.hookWrite(cfg.Name)
	}
	pouts, perrs := redisscript.ApplyMany(ctx, w.rdb, w.ks, pcfgs, force)
	var created []any
	for k, i := range plain {
		outs[i], errs[i] = pouts[k], perrs[k]
		if perrs[k] == nil && pouts[k] == redisscript.Created {
			created = append(created, cfgs[i].Name)
		}
	}
	if len(created) > 0 {
		// And again once the hash exists: an unregister that ran since the
		// first add found no hash and took the name out.
		if err := w.rdb.SAdd(ctx, w.ks.BucketRegistry(), created...).Err(); err != nil {
			for _, i := range plain {
				if errs[i] == nil && outs[i] == redisscript.Created {
					errs[i] = fmt.Errorf("apply bucket %q: register: %w", cfgs[i].Name, err)
				}
			}
		}
	}
	return outs, errs
}

// unregister removes name from the registry of bucket hashes once its
// hash is gone (a delete can be refused, a newer bucket keep the name).
// It removes the name first and looks for the hash after, adding the name
// back when the hash is there: with applyConfig's add after it creates a
// hash, no interleaving of the two leaves a hash unregistered.
func (w *Worker) unregister(ctx context.Context, name string) error {
	if err := w.rdb.SRem(ctx, w.ks.BucketRegistry(), name).Err(); err != nil {
		return err
	}
	n, err := w.rdb.Exists(ctx, w.ks.Bucket(name)).Result()
	if err != nil || n == 0 {
		return err
	}
	return w.rdb.SAdd(ctx, w.ks.BucketRegistry(), name).Err()
}

// deleteConfig removes a bucket from Redis, guarded by its id.
func (w *Worker) deleteConfig(ctx context.Context, keyed bool, name string, id, version int64) (bool, error) {
	if keyed {
		return redisscript.DeleteKeyed(ctx, w.rdb, w.ks, name, id, version)
	}
	deleted, err := redisscript.Delete(ctx, w.rdb, w.ks, name, id, version)
	if err != nil {
		return deleted, err
	}
	if err := w.unregister(ctx, name); err != nil {
		return deleted, fmt.Errorf("delete bucket %q: unregister: %w", name, err)
	}
	return deleted, nil
}

// clearTombstones removes the tombstones of a bucket before a forced write.
func (w *Worker) clearTombstones(ctx context.Context, keyed bool, name string) error {
	keys := []string{w.ks.Tombstone(name)}
	if keyed {
		keys = keys[:0]
		for g := range redisscript.KeyGroups {
			keys = append(keys, w.ks.KeyTombstone(name, g))
		}
	}
	// One DEL per key: on a cluster the groups are in different slots.
	for _, k := range keys {
		if err := w.rdb.Del(ctx, k).Err(); err != nil {
			return err
		}
	}
	return nil
}

// storedOverride is the Redis override of a stored definition.
func storedOverride(b *buckets.Bucket, o *buckets.Override) redisscript.Override {
	return redisscript.Override{
		Bucket: b.Name, BucketID: b.ID, ID: o.ID, Version: o.Version, Match: matchOf(o.Match), Key: o.Key,
		Capacity: o.MaxPermits, PermitsMicro: o.Rate.PermitsMicro, PeriodSeconds: int64(o.Rate.Period / time.Second),
		Shadow: o.Shadow,
	}
}

func matchOf(m buckets.Match) string {
	switch m {
	case buckets.MatchExact:
		return redisscript.MatchExact
	case buckets.MatchPrefix:
		return redisscript.MatchPrefix
	}
	return string(m) // refused by Validate
}

// reconcileKeyed makes every key group of keyed bucket d right: the config
// in each group, then the overrides.
func (w *Worker) reconcileKeyed(ctx context.Context, t *tally, d *buckets.Bucket) error {
	want := ConfigOf(d)
	groups := make([]redisscript.GroupState, redisscript.KeyGroups)
	missing, differing, table := false, false, false
	for g := range groups {
		st, err := redisscript.ReadGroup(ctx, w.rdb, w.ks, d.Name, g)
		if err != nil {
			return err
		}
		groups[g] = st
		switch {
		case !st.Exists:
			missing = true
		case !sameConfig(st.Config, want):
			differing = true
		case !tableCurrent(st.Config.Bounds, want.Bounds):
			table = true
		}
	}
	if missing || differing || table {
		kind := renewTable
		switch {
		case missing:
			kind = repairMissing
		case differing:
			kind = repairDiffering
		}
		if err := w.repair(ctx, t, repairJob{name: d.Name, kind: kind, keyed: true}); err != nil {
			return err
		}
		// Read again: a repair may have replaced a group (a new incarnation).
		for g := range groups {
			st, err := redisscript.ReadGroup(ctx, w.rdb, w.ks, d.Name, g)
			if err != nil {
				return err
			}
			groups[g] = st
		}
	}
	return w.reconcileOverrides(ctx, t, d, groups)
}

// overrideSet is a keyed bucket's overrides as MySQL holds them.
type overrideSet struct {
	exact  map[string]*buckets.Override
	prefix map[string]*buckets.Override
}

// reconcileOverrides compares the overrides of keyed bucket d in MySQL
// with those in its key groups, and writes the missing and differing ones
// and deletes the extra ones, in pipelined batches. Exact overrides are
// read from Redis with HSCAN, so a bucket with hundreds of thousands of
// them never blocks Redis. MySQL is read in pages, not as one snapshot, so
// whatever looks wrong is checked once more in MySQL before it is acted on.
func (w *Worker) reconcileOverrides(ctx context.Context, t *tally, d *buckets.Bucket, groups []redisscript.GroupState) error {
	set := overrideSet{exact: map[string]*buckets.Override{}, prefix: map[string]*buckets.Override{}}
	err := w.store.OverrideDefinitions(ctx, d.ID, 5000, func(os []*buckets.Override) error {
		for _, o := range os {
			if o.Match == buckets.MatchPrefix {
				set.prefix[o.Key] = o
			} else {
				set.exact[o.Key] = o
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read overrides of %q: %w", d.Name, err)
	}
	var writes []redisscript.Override       // missing or differing
	var extras []redisscript.StoredOverride // live in Redis, not in MySQL
	var extraKeys []redisscript.Override
	cutoff := time.Now().Add(-redisscript.TombstoneTTLSeconds * time.Second)
	var purge []purgeJob

	// Prefixes: every group holds all of them.
	wrongPrefix := map[string]bool{}
	for g, st := range groups {
		for p, raw := range st.Prefixes {
			so, ok := redisscript.ParseStoredOverride(raw)
			o := set.prefix[p]
			switch {
			case !ok:
				continue
			case so.Deleted:
				if so.DeletedAt.Before(cutoff) && o == nil {
					purge = append(purge, purgeJob{redisscript.Override{Bucket: d.Name, BucketID: d.ID,
						Match: redisscript.MatchPrefix, Key: p}, g})
				}
			case o == nil:
				if !wrongPrefix[p] {
					wrongPrefix[p] = true
					extras = append(extras, so)
					extraKeys = append(extraKeys, redisscript.Override{Bucket: d.Name, BucketID: d.ID, ID: so.ID,
						Version: so.Version + 1, Match: redisscript.MatchPrefix, Key: p})
				}
			case !so.Same(storedOverride(d, o)):
				wrongPrefix[p] = true
			}
		}
		if st.Lens != st.WantLens() {
			if err := redisscript.RepairLens(ctx, w.rdb, w.ks, d.Name, g, st); err != nil {
				return err
			}
		}
	}
	for p, o := range set.prefix {
		present := true
		for _, st := range groups {
			if so, ok := redisscript.ParseStoredOverride(st.Prefixes[p]); !ok || !so.Same(storedOverride(d, o)) {
				present = false
				break
			}
		}
		if !present {
			writes = append(writes, storedOverride(d, o))
		}
	}

	// Exact overrides: each in its key's group.
	seen := make(map[string]bool, len(set.exact))
	for g := range groups {
		err := redisscript.ScanExact(ctx, w.rdb, w.ks, d.Name, g, func(batch map[string]string) error {
			for key, raw := range batch {
				so, ok := redisscript.ParseStoredOverride(raw)
				if !ok {
					continue
				}
				o := set.exact[key]
				switch {
				case so.Deleted:
					if so.DeletedAt.Before(cutoff) && o == nil {
						purge = append(purge, purgeJob{redisscript.Override{Bucket: d.Name, BucketID: d.ID,
							Match: redisscript.MatchExact, Key: key}, g})
					}
				case o == nil:
					extras = append(extras, so)
					extraKeys = append(extraKeys, redisscript.Override{Bucket: d.Name, BucketID: d.ID, ID: so.ID,
						Version: so.Version + 1, Match: redisscript.MatchExact, Key: key})
				case so.Same(storedOverride(d, o)):
					seen[key] = true
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for key, o := range set.exact {
		if !seen[key] {
			writes = append(writes, storedOverride(d, o))
		}
	}

	if err := w.writeOverrides(ctx, t, d, writes); err != nil {
		return err
	}
	if err := w.removeExtraOverrides(ctx, t, extraKeys); err != nil {
		return err
	}
	for _, p := range purge {
		if _, err := redisscript.PurgeOverrideTombstone(ctx, w.rdb, w.ks, p.o, p.group, cutoff); err != nil {
			return err
		}
	}
	return nil
}

type purgeJob struct {
	o     redisscript.Override
	group int
}

// overrideLockBatch is how many overrides writeOverrides writes under one
// lock of their bucket's row.
const overrideLockBatch = 1000

// writeOverrides writes overrides that Redis lacks or holds differently,
// as MySQL holds them now: each batch is read again and written while the
// bucket's row is locked, so an override deleted (or changed) since the
// read is not written, and one deleted right now is deleted after the
// write, never before it (see WithOverrides). Those Redis refuses as
// stale are thereby confirmed by MySQL, and forced.
func (w *Worker) writeOverrides(ctx context.Context, t *tally, d *buckets.Bucket, writes []redisscript.Override) error {
	for chunk := range slices.Chunk(writes, overrideLockBatch) {
		ids := make([]int64, len(chunk))
		for i, o := range chunk {
			ids[i] = o.ID
		}
		err := w.store.WithOverrides(ctx, d.Name, ids, func(b *buckets.Bucket, os []*buckets.Override) error {
			if b == nil || b.ID != d.ID || len(os) == 0 {
				return nil // deleted since the read: the delete events rule
			}
			now := make([]redisscript.Override, len(os))
			for i, o := range os {
				now[i] = storedOverride(b, o)
			}
			w.hookWrite(d.Name)
			outs, err := redisscript.ApplyOverrides(ctx, w.rdb, w.ks, now, false, false)
			if err != nil {
				return fmt.Errorf("repair overrides of %q: %w", d.Name, err)
			}
			for i, out := range outs {
				switch out {
				case redisscript.OverrideWritten:
					t.add(repairOverrideMissing)
				case redisscript.OverrideUpdated:
					t.add(repairOverrideDiffering)
				case redisscript.OverrideStale:
					if _, err := redisscript.ApplyOverride(ctx, w.rdb, w.ks, now[i], true); err != nil {
						return err
					}
					t.add(repairForced)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// removeExtraOverrides tombstones overrides Redis holds and the MySQL read
// did not have, unless MySQL has them now (created meanwhile).
func (w *Worker) removeExtraOverrides(ctx context.Context, t *tally, extras []redisscript.Override) error {
	var gone []redisscript.Override
	for _, o := range extras {
		_, err := w.store.OverrideByID(ctx, o.ID)
		switch {
		case err == nil:
			continue // created after the read: its event wrote it
		case !errors.Is(err, errs.ErrNotFound):
			return fmt.Errorf("re-check override %d: %w", o.ID, err)
		}
		gone = append(gone, o)
	}
	if len(gone) == 0 {
		return nil
	}
	outs, err := redisscript.ApplyOverrides(ctx, w.rdb, w.ks, gone, true, false)
	if err != nil {
		return fmt.Errorf("remove extra overrides: %w", err)
	}
	for _, out := range outs {
		if out == redisscript.OverrideWritten {
			t.add(repairOverrideExtra)
		}
	}
	return nil
}

// removeExtraKeyed deletes the key groups of keyed bucket name, which the
// snapshot of MySQL does not have as a keyed bucket, unless MySQL has it
// now. The delete spares groups of a newer incarnation.
func (w *Worker) removeExtraKeyed(ctx context.Context, t *tally, name string) error {
	cur, err := w.store.Definition(ctx, name)
	switch {
	case err == nil && cur.Keyed:
		return nil // created after the snapshot
	case err != nil && !errors.Is(err, errs.ErrNotFound):
		return fmt.Errorf("re-check bucket %q: %w", name, err)
	}
	var id, version int64
	for g := range redisscript.KeyGroups {
		st, err := redisscript.ReadGroup(ctx, w.rdb, w.ks, name, g)
		if err != nil {
			return err
		}
		if st.Exists && st.Config.ID > id {
			id, version = st.Config.ID, st.Config.Version
		}
	}
	// With no valid group left, id 0 still removes groups without a
	// config and unregisters the name.
	deleted, err := redisscript.DeleteKeyed(ctx, w.rdb, w.ks, name, id, version+1)
	if err != nil {
		return err
	}
	if deleted {
		t.add(repairExtra)
	}
	return nil
}
