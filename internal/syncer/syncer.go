// Package syncer keeps Redis equal to MySQL: it applies the buckets
// outbox (change events committed with every bucket change) to the bucket
// hashes in Redis, and periodically reconciles every definition against
// every hash, so that a flushed or restarted Redis heals by itself.
//
// Delivery is at least once. An event is acknowledged (deleted) only after
// it was applied, and applying is idempotent and guarded by the bucket's
// (id, version) in the Redis scripts, so replays, duplicates, reordering
// and several workers running at once all converge on the same state.
package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// Defaults of Config.
const (
	DefaultPollInterval      = 100 * time.Millisecond
	DefaultReconcileInterval = 30 * time.Second
	DefaultBatchSize         = 500
)

// drainTimeout bounds finishing the current batch after Run's context ends.
const drainTimeout = 10 * time.Second

// Config configures a Worker. Buckets and Redis are required.
type Config struct {
	// Buckets reads definitions and the outbox from MySQL.
	Buckets *buckets.Store
	// Redis is a single, Sentinel or Cluster client.
	Redis redis.UniversalClient
	// Keyspace names the bucket keys; the zero value uses "sluice:".
	Keyspace redisscript.Keyspace
	// PollInterval is the pause between polls of an empty outbox;
	// 0 means DefaultPollInterval.
	PollInterval time.Duration
	// ReconcileInterval is the period of the full reconcile; 0 means
	// DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// BatchSize is the most events read per poll; 0 means DefaultBatchSize.
	BatchSize int
	// Logger receives progress and errors; nil discards them.
	Logger *slog.Logger
	// Metrics, when set, receives the worker's Prometheus collectors.
	Metrics prometheus.Registerer
	// DecimalState keeps every bucket's state in the decimal form, which
	// clients of releases before the binary state read, instead of the
	// binary one (the zero value): for a rolling upgrade from such a
	// release, until its last client is gone. A worker moves each bucket
	// to its form on the next write or reconcile, keeping the tokens.
	DecimalState bool
}

// Worker moves bucket definitions from MySQL to Redis. It is safe for
// concurrent use; several workers, in one process or many, may share the
// same stores.
type Worker struct {
	store        *buckets.Store
	rdb          redis.UniversalClient
	ks           redisscript.Keyspace
	poll         time.Duration
	period       time.Duration
	batch        int
	log          *slog.Logger
	m            *metrics
	marker       string
	reconcileNow chan struct{}
	decimal      bool

	lastPoll      atomic.Int64 // unix nanoseconds
	lastReconcile atomic.Int64

	// beforeWrite, when set (by tests), is called with the bucket's name
	// just before a definition of the bucket or of its overrides read
	// from MySQL is written to Redis.
	beforeWrite func(bucket string)
}

// New returns a Worker for cfg. It does not contact the stores.
func New(cfg Config) *Worker {
	w := &Worker{
		store: cfg.Buckets, rdb: cfg.Redis, ks: cfg.Keyspace,
		poll: cfg.PollInterval, period: cfg.ReconcileInterval, batch: cfg.BatchSize, decimal: cfg.DecimalState,
		log: cfg.Logger, m: newMetrics(cfg.Metrics), reconcileNow: make(chan struct{}, 1),
	}
	if w.poll <= 0 {
		w.poll = DefaultPollInterval
	}
	if w.period <= 0 {
		w.period = DefaultReconcileInterval
	}
	if w.batch <= 0 {
		w.batch = DefaultBatchSize
	}
	w.batch = min(w.batch, buckets.MaxEventLimit)
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.marker = w.ks.SyncMarker()
	return w
}

// LastPoll returns when the outbox was last read successfully (zero before
// the first time), for readiness checks.
func (w *Worker) LastPoll() time.Time { return unixNano(w.lastPoll.Load()) }

// LastReconcile returns when the last full reconcile succeeded (zero before
// the first one).
func (w *Worker) LastReconcile() time.Time { return unixNano(w.lastReconcile.Load()) }

// PollInterval returns the effective poll interval.
func (w *Worker) PollInterval() time.Duration { return w.poll }

var errNotConfigured = errors.New("syncer: Config.Buckets and Config.Redis are required")

func (w *Worker) check() error {
	if w.store == nil || w.rdb == nil {
		return errNotConfigured
	}
	return nil
}

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Run applies change events as they appear and reconciles every
// ReconcileInterval (and at once when it notices that Redis lost its
// data), until ctx ends. Failures are logged and retried with backoff;
// Run never gives up. When ctx ends it finishes the batch in hand, then
// returns nil.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.check(); err != nil {
		return err
	}
	w.log.Info("sync worker started", "poll_interval", w.poll.String(), "reconcile_interval", w.period.String(),
		"key_prefix", w.ks.Prefix)
	var wg sync.WaitGroup
	wg.Go(func() { w.eventLoop(ctx) })
	wg.Go(func() { w.reconcileLoop(ctx) })
	wg.Wait()
	w.log.Info("sync worker stopped")
	return nil
}

func (w *Worker) eventLoop(ctx context.Context) {
	bo := backoff{min: w.poll, max: 5 * time.Second}
	for ctx.Err() == nil {
		_, full, err := w.batchOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return // stopping: the batch in hand was finished
		case err != nil:
			wait := bo.next()
			w.log.Warn("sync: applying change events failed; retrying", "err", err, "retry_in", wait.String())
			sleep(ctx, wait)
		case full:
			bo.reset() // a backlog: no pause
		default:
			bo.reset()
			w.checkMarker(ctx)
			sleep(ctx, w.poll)
		}
	}
}

func (w *Worker) reconcileLoop(ctx context.Context) {
	bo := backoff{min: 500 * time.Millisecond, max: 30 * time.Second}
	for ctx.Err() == nil {
		rep, err := w.Reconcile(ctx)
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			wait = min(bo.next(), w.period)
			w.log.Warn("sync: reconcile failed; retrying", "err", err, "retry_in", wait.String())
		default:
			bo.reset()
			wait = w.period
			if rep.Repaired() > 0 {
				w.log.Info("sync: reconcile repaired redis", rep.attrs()...)
			} else {
				w.log.Debug("sync: reconcile found redis in sync", rep.attrs()...)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-w.reconcileNow:
			t.Stop()
		}
	}
}

// SyncOnce applies every pending change event, batch after batch, and
// returns how many it applied.
func (w *Worker) SyncOnce(ctx context.Context) (int, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, full, err := w.batchOnce(ctx)
		total += n
		if err != nil || !full {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// batchOnce applies one batch of events in id order and acknowledges those
// it applied. full reports that the batch was full, so more may be pending.
// Once the events are read, the batch is finished even if ctx ends (a
// graceful stop), within drainTimeout.
func (w *Worker) batchOnce(ctx context.Context) (n int, full bool, err error) {
	events, err := w.store.PendingEvents(ctx, w.batch)
	if err != nil {
		if ctx.Err() == nil {
			w.m.errors.WithLabelValues(stagePoll).Inc()
		}
		return 0, false, err // the store's error names what failed
	}
	w.lastPoll.Store(time.Now().UnixNano())
	w.m.lastSync.SetToCurrentTime()
	if len(events) == 0 {
		return 0, false, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	// Later events wait behind one that fails: they must not overtake it.
	n, applyErr := w.applyEvents(dctx, events)
	if applyErr != nil {
		w.m.errors.WithLabelValues(stageApply).Inc()
		e := events[n]
		applyErr = fmt.Errorf("apply change event %d (%s %q v%d): %w", e.ID, e.Op, e.Name, e.Version, applyErr)
	}
	done := make([]int64, n)
	for i, e := range events[:n] {
		done[i] = e.ID
	}
	if len(done) > 0 {
		// A time of its own: when the drain time ran out applying the rest,
		// what was applied is still acknowledged, so the next batch starts
		// after it instead of redoing it all, and a loaded worker advances.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
		defer acancel()
		if err := w.store.AckEvents(actx, done); err != nil {
			w.m.errors.WithLabelValues(stageAck).Inc()
			// Not acknowledged means applied again later: harmless.
			return len(done), false, errors.Join(applyErr, fmt.Errorf("acknowledge change events: %w", err))
		}
	}
	return len(done), applyErr == nil && len(events) == w.batch, applyErr
}

// upsertRun is the most bucket upserts applied under one lock of their
// rows (see applyUpserts).
const upsertRun = 100

// applyEvents applies events in order, and returns how many it applied;
// when it fails, the error is that of events[n]. A run of bucket upserts
// is applied together, by applyUpserts.
func (w *Worker) applyEvents(ctx context.Context, events []buckets.Event) (n int, err error) {
	for n < len(events) {
		run := 0
		for n+run < len(events) && events[n+run].Op == buckets.OpUpsert && run < upsertRun {
			run++
		}
		if run > 0 {
			k, err := w.applyUpserts(ctx, events[n:n+run])
			n += k
			if err != nil {
				return n, err
			}
			continue
		}
		if err := w.applyEvent(ctx, events[n]); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// applyEvent applies one event. An event Redis refuses as invalid would
// block every later one forever, so it is logged and skipped: the
// reconcile repairs that bucket from MySQL.
func (w *Worker) applyEvent(ctx context.Context, e buckets.Event) error {
	if e.Op == buckets.OpUpsert {
		_, err := w.applyUpserts(ctx, []buckets.Event{e})
		return err
	}
	outcome, err := w.applyOp(ctx, e)
	if errors.Is(err, redisscript.ErrInvalidConfig) {
		w.log.Error("sync: skipping an event redis rejects", "event", e.ID, "bucket", e.Name, "err", err)
		outcome, err = "rejected", nil
	}
	if err != nil {
		return err
	}
	w.applied(e, outcome)
	return nil
}

// applyUpserts applies bucket upserts, in order, and returns how many it
// applied; when it fails, the error is that of run[n]. An upsert names the
// change; the definition written is the current one, read and written
// while its row is locked (see WithDefinitions), so that a delete or
// change committing meanwhile waits for the write. A row that is gone, or
// is another bucket now, was deleted after the event: its delete event
// follows and nothing is written (superseded). The order of upserts among
// themselves does not matter: each writes the current row.
func (w *Worker) applyUpserts(ctx context.Context, run []buckets.Event) (n int, err error) {
	names := make([]string, len(run))
	for i, e := range run {
		names[i] = e.Name
	}
	wrote := false
	err = w.store.WithDefinitions(ctx, names, func(defs map[string]*buckets.Bucket) error {
		var cfgs []redisscript.Config
		var keyed []bool
		var writes []int // the events of cfgs
		for i, e := range run {
			if d := defs[e.Name]; d != nil && d.ID == e.BucketID {
				cfgs, keyed, writes = append(cfgs, ConfigOf(d)), append(keyed, d.Keyed), append(writes, i)
			}
		}
		outs, errs := w.applyConfigs(ctx, cfgs, keyed, false)
		wrote = true
		k := 0
		for i, e := range run {
			outcome := "superseded"
			if k < len(writes) && writes[k] == i {
				switch err := errs[k]; {
				case errors.Is(err, redisscript.ErrInvalidConfig):
					// Skipped, as in applyEvent.
					w.log.Error("sync: skipping an event redis rejects", "event", e.ID, "bucket", e.Name, "err", err)
					outcome = "rejected"
				case err != nil:
					return err
				default:
					outcome = outs[k].String()
				}
				k++
			}
			w.applied(e, outcome)
			n++
		}
		return nil
	})
	if err != nil && wrote && n == len(run) {
		// Only the commit of the read failed, after every write: done.
		return n, nil
	}
	return n, err
}

// applied records an applied event in the metrics and the log.
func (w *Worker) applied(e buckets.Event, outcome string) {
	w.m.applied.WithLabelValues(string(e.Op), outcome).Inc()
	// created_at comes from the clock of the process that made the change;
	// a skewed clock must not produce negative lags.
	w.m.lag.Observe(max(time.Since(e.CreatedAt), 0).Seconds())
	w.log.Debug("sync: applied change event", "event", e.ID, "op", string(e.Op), "bucket", e.Name,
		"id", e.BucketID, "version", e.Version, "outcome", outcome)
}

// applyOp applies one event other than a bucket upsert to Redis and names
// the outcome.
func (w *Worker) applyOp(ctx context.Context, e buckets.Event) (string, error) {
	switch e.Op {
	case buckets.OpDelete:
		deleted, err := w.deleteConfig(ctx, e.Keyed, e.Name, e.BucketID, e.Version)
		if !deleted {
			return "absent", err
		}
		return "deleted", err
	case buckets.OpOverrideUpsert, buckets.OpOverrideDelete:
		if e.Override == nil {
			w.log.Error("sync: skipping an override event without its override", "event", e.ID, "bucket", e.Name)
			return "unknown", nil
		}
		var out redisscript.OverrideOutcome
		var err error
		if e.Op == buckets.OpOverrideUpsert {
			// As for a bucket: the current override, written while the
			// bucket's row is locked, or nothing when it is gone (its
			// delete event follows).
			superseded := true
			err = w.store.WithOverrides(ctx, e.Name, []int64{e.Override.ID}, func(b *buckets.Bucket, os []*buckets.Override) error {
				if b == nil || b.ID != e.BucketID || len(os) == 0 {
					return nil
				}
				superseded = false
				w.hookWrite(e.Name)
				var err error
				out, err = redisscript.ApplyOverride(ctx, w.rdb, w.ks, storedOverride(b, os[0]), false)
				return err
			})
			if err == nil && superseded {
				return "superseded", nil
			}
		} else {
			b := &buckets.Bucket{Name: e.Name, ID: e.BucketID}
			out, err = redisscript.DeleteOverride(ctx, w.rdb, w.ks, storedOverride(b, &buckets.Override{
				ID: e.Override.ID, Match: e.Override.Match, Key: e.Override.Key, Stamp: database.Stamp{Version: e.Version}}))
		}
		if err == nil && out == redisscript.OverrideNoBucket {
			// The bucket's own event was refused or skipped; the reconcile
			// writes both once MySQL and Redis agree on the bucket.
			w.log.Warn("sync: override of a bucket redis does not hold", "event", e.ID, "bucket", e.Name,
				"override", e.Override.ID)
		}
		return out.String(), err
	default:
		// Written by a newer Sluice: this one cannot apply it, and
		// holding it back would stall everything behind it.
		w.log.Error("sync: skipping an event of unknown operation", "event", e.ID, "bucket", e.Name, "op", string(e.Op))
		return "unknown", nil
	}
}

func (w *Worker) hookWrite(bucket string) {
	if w.beforeWrite != nil {
		w.beforeWrite(bucket)
	}
}

// ConfigOf is the Redis config the worker writes for a stored definition; a quota's
// carries the table of its periods around the worker's clock.
func ConfigOf(b *buckets.Bucket) redisscript.Config {
	c := redisscript.Config{
		Name: b.Name, ID: b.ID, Version: b.Version, Capacity: b.MaxPermits,
		PermitsMicro: b.Rate.PermitsMicro, PeriodSeconds: int64(b.Rate.Period / time.Second),
		Apps: b.AllowedApps, LeaseMillis: b.LeaseMillis, Shadow: b.Shadow, Kind: string(b.Kind.Or()), Reserve: b.Reserve,
		SlotMillis: b.SlotMillis,
	}
	if b.Kind == buckets.KindQuota {
		c.Bounds = quotaTable(b, time.Now())
	}
	return c
}

// quotaTable is the table of quota b's periods around now, or nil when
// its period or zone is unknown (stored by a newer Sluice, or a zone this
// machine's time-zone database lacks): the quota then answers as an
// unknown bucket rather than by a guessed calendar.
func quotaTable(b *buckets.Bucket, now time.Time) []int64 {
	loc := b.Location()
	if loc == nil || !b.QuotaPeriod.Valid() {
		return nil
	}
	return quota.Table(b.QuotaPeriod, loc, now)
}

// tableCurrent reports whether a quota's stored table need not be
// rewritten for want, the table of the worker's clock: it follows the
// same calendar where the two overlap and no period has begun on the
// worker's clock since it was written. So a table is renewed once per
// period (every hour for an hourly quota) and always reaches Ahead and
// MinAhead periods past the last period start the worker saw; a worker
// whose clock is behind another's does not write an older table back.
func tableCurrent(stored, want []int64) bool {
	if len(want) < 2 {
		return len(stored) == 0
	}
	if len(stored) < 2 || stored[1] < want[1] {
		return false
	}
	lo, hi := max(stored[0], want[0]), min(stored[len(stored)-1], want[len(want)-1])
	in := func(b []int64, x int64) bool { _, ok := slices.BinarySearch(b, x); return ok }
	for _, x := range stored {
		if x >= lo && x <= hi && !in(want, x) {
			return false
		}
	}
	for _, x := range want {
		if x >= lo && x <= hi && !in(stored, x) {
			return false
		}
	}
	return true
}

// checkMarker notices that Redis lost its data (FLUSHALL, a restart
// without persistence, a failover to an empty replica) by the absence of
// the marker key the reconcile writes, and asks for a reconcile at once
// instead of waiting for the next period.
func (w *Worker) checkMarker(ctx context.Context) {
	n, err := w.rdb.Exists(ctx, w.marker).Result()
	if err != nil {
		if ctx.Err() == nil {
			w.m.errors.WithLabelValues(stageMarker).Inc()
		}
		return
	}
	if n == 0 && !w.LastReconcile().IsZero() {
		select {
		case w.reconcileNow <- struct{}{}:
			w.log.Warn("sync: redis lost its data; reconciling now")
		default:
		}
	}
}

// backoff yields growing, jittered waits between min and max.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	// Full jitter in the upper half keeps workers that failed together
	// from retrying in lockstep.
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
