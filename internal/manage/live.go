package manage

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/usage"
)

// redisTimeout bounds every Redis read of a use case (live state, usage
// counts), so that a hung Redis costs an "unavailable", not a hung request.
const redisTimeout = 2 * time.Second

// ErrNoRedis is the answer of a Redis read when the Service has no Redis.
var ErrNoRedis = fmt.Errorf("this console is not connected to redis: %w", errs.ErrUnavailable)

// SyncStatus compares a bucket's config in Redis with its MySQL row.
type SyncStatus string

// Sync statuses.
const (
	// InSync: Redis holds the MySQL version.
	InSync SyncStatus = "in_sync"
	// Pending: Redis holds an older version, or none yet.
	Pending SyncStatus = "pending"
	// Ahead: Redis holds a newer version than this read of MySQL.
	Ahead SyncStatus = "ahead"
)

// LiveState is what Redis holds about a bucket, next to its MySQL row.
type LiveState struct {
	Sync SyncStatus
	// InRedis is false until the sync worker has written the bucket.
	InRedis bool
	// Keyed tells that the tokens are per key: Config is then the oldest
	// config among the bucket's key groups, and Tokens and Refilled are
	// unset.
	Keyed bool
	// Groups is the number of key groups of a keyed bucket, GroupsInSync
	// how many of them hold the MySQL version.
	Groups       int
	GroupsInSync int
	// Config is the config Redis holds (when InRedis).
	Config redisscript.Config
	Tokens float64
	// Refilled is when an acquire last refilled the bucket (zero: never),
	// RedisTime the Redis clock at this read.
	Refilled  time.Time
	RedisTime time.Time
	// Slots tells a shared concurrency limit's state: InUse slots held
	// (Tokens is then the free ones), the first of them expiring at
	// NextExpiry (zero when none is held).
	Slots      bool
	InUse      int64
	NextExpiry time.Time
	// Used is, for a plain quota, its count in the period containing
	// RedisTime, and PeriodStart and PeriodEnd that period (the reset);
	// zero when its table does not cover RedisTime.
	Used                   int64
	PeriodStart, PeriodEnd time.Time
}

// BucketState returns the live state of the bucket named name, for anyone
// who may see it.
func (s *Service) BucketState(ctx context.Context, c Caller, name string) (*buckets.Bucket, LiveState, error) {
	b, err := s.bucketFor(ctx, c, name, rbac.ActionView)
	if err != nil {
		return nil, LiveState{}, err
	}
	st, err := s.live(ctx, b)
	return b, st, err
}

// live reads b's state in Redis and compares its version with MySQL's.
func (s *Service) live(ctx context.Context, b *buckets.Bucket) (LiveState, error) {
	if s.rdb == nil {
		return LiveState{}, ErrNoRedis
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if b.Keyed {
		return s.liveKeyed(ctx, b)
	}
	st, err := redisscript.Read(ctx, s.rdb, s.ks, b.Name)
	if err != nil {
		return LiveState{}, fmt.Errorf("read live state of %q: %w: %w", b.Name, errs.ErrUnavailable, err)
	}
	l := LiveState{Sync: Pending, InRedis: st.Exists, RedisTime: st.Now}
	if st.Exists {
		l.Config, l.Tokens, l.Refilled = st.Config, st.Tokens, st.Refilled
		l.Used, l.PeriodStart, l.PeriodEnd = st.Used, st.PeriodStart, st.PeriodEnd
		l.Sync = syncOf(st.Config, b)
	}
	if st.Exists && st.Config.LimitKind() == redisscript.KindConcurrency {
		// A concurrency limit counts slots, not tokens: the free ones.
		sl, err := redisscript.ReadSlots(ctx, s.rdb, s.ks, b.Name, "")
		if err != nil {
			return LiveState{}, fmt.Errorf("read slots of %q: %w: %w", b.Name, errs.ErrUnavailable, err)
		}
		l.Slots, l.InUse, l.NextExpiry, l.RedisTime = true, sl.InUse, sl.NextExpiry, sl.Now
		l.Tokens, l.Refilled = float64(max(0, st.Config.Capacity-sl.InUse)), time.Time{}
	}
	return l, nil
}

// liveKeyed reads a keyed bucket's config in Redis: it has no bucket hash,
// and its tokens are per key (docs/protocol.md, "Keyed buckets"). The sync
// worker writes every key group with each change, and a group it has not
// reached yet still serves the older config to the keys of that group: so
// all KeyGroups configs are read (one pipeline of small reads, never a
// scan), the bucket is in sync only when every group is, and the config
// shown is the oldest one still in use.
func (s *Service) liveKeyed(ctx context.Context, b *buckets.Bucket) (LiveState, error) {
	gc, err := redisscript.ReadGroupConfigs(ctx, s.rdb, s.ks, b.Name)
	if err != nil {
		return LiveState{}, fmt.Errorf("read live state of %q: %w: %w", b.Name, errs.ErrUnavailable, err)
	}
	l := LiveState{Sync: Pending, Keyed: true, RedisTime: gc.Now, Groups: redisscript.KeyGroups}
	ahead := false
	for g, ok := range gc.Exists {
		if !ok {
			continue
		}
		cfg := gc.Configs[g]
		switch syncOf(cfg, b) {
		case InSync:
			l.GroupsInSync++
		case Ahead:
			ahead = true
		}
		if !l.InRedis || older(cfg, l.Config) {
			l.InRedis, l.Config = true, cfg
		}
	}
	switch {
	case ahead:
		l.Sync = Ahead
	case l.GroupsInSync == redisscript.KeyGroups:
		l.Sync = InSync
	}
	return l, nil
}

// older reports whether config a is of an older (id, version) than b.
func older(a, b redisscript.Config) bool {
	return a.ID < b.ID || (a.ID == b.ID && a.Version < b.Version)
}

// syncOf compares the config in Redis with the bucket as read from MySQL.
func syncOf(cfg redisscript.Config, b *buckets.Bucket) SyncStatus {
	switch {
	case cfg.ID > b.ID || (cfg.ID == b.ID && cfg.Version > b.Version):
		return Ahead
	case cfg.ID == b.ID && cfg.Version == b.Version:
		return InSync
	}
	return Pending
}

// BucketDetail is everything a bucket's page shows. A Redis read that
// failed leaves its part empty and says why in its error.
type BucketDetail struct {
	BucketView
	Live    LiveState
	LiveErr error
	// Window is the span of Usage.
	Window   usage.Window
	Usage    usage.Series
	UsageErr error
}

// BucketDetail returns the bucket named name with its live state and its
// usage over w, for anyone who may see it. Both Redis reads run at once:
// when Redis hangs, the page waits for one timeout, not for the sum.
func (s *Service) BucketDetail(ctx context.Context, c Caller, name string, w usage.Window) (*BucketDetail, error) {
	v, err := s.Bucket(ctx, c, name)
	if err != nil {
		return nil, err
	}
	d := &BucketDetail{BucketView: *v, Window: w}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Usage, d.UsageErr = s.series(ctx, v.Name, w)
	}()
	d.Live, d.LiveErr = s.live(ctx, v.Bucket)
	<-done
	for _, e := range []error{d.LiveErr, d.UsageErr} {
		if e != nil && e != ErrNoRedis {
			s.log.WarnContext(ctx, "read bucket state from redis", "bucket", v.Name, "err", e)
		}
	}
	return d, nil
}

func (s *Service) series(ctx context.Context, bucket string, w usage.Window) (usage.Series, error) {
	if s.usage == nil {
		return usage.Series{}, ErrNoRedis
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	series, err := s.usage.Series(ctx, bucket, w)
	if err != nil {
		return usage.Series{}, fmt.Errorf("read usage of %q: %w: %w", bucket, errs.ErrUnavailable, err)
	}
	return series, nil
}

// DeniedRow is one bucket of the usage overview.
type DeniedRow struct {
	Bucket  *buckets.Bucket
	Allowed int64
	Denied  int64
	// Recent is the bucket's last hour, per minute.
	Recent usage.Recent
}

// UsageOverview lists the buckets that denied the most lately.
type UsageOverview struct {
	// Buckets is how many buckets the caller can see, all of them read.
	Buckets int
	Rows    []DeniedRow
}

// TopDenied returns the buckets the caller can see that denied the most
// acquires in the last hour, at most limit. It reads the usage roll-up in
// MySQL (usage.Recents), never Redis: the overview puts no load on the
// Redis that serves acquires. Only visible buckets count, so the answer
// says nothing about the others, not even that they exist.
func (s *Service) TopDenied(ctx context.Context, c Caller, limit int) (UsageOverview, error) {
	byName := map[string]*buckets.Bucket{}
	var ov UsageOverview
	var top []usage.Recent
	if s.IsAdmin(c) {
		n, err := s.buckets.Count(ctx)
		if err != nil {
			return UsageOverview{}, err
		}
		ov.Buckets = n
		if top, err = s.recents.TopDenied(ctx, nil, limit); err != nil {
			return ov, err
		}
	} else {
		// A count and a ranked walk in MySQL, never the list of every
		// bucket the user sees (thousands, read a page at a time).
		apps := s.Visible(c)
		if len(apps) == 0 {
			return ov, nil
		}
		page, err := s.buckets.List(ctx, buckets.Filter{VisibleTo: apps, Limit: 1})
		if err != nil {
			return UsageOverview{}, err
		}
		ov.Buckets = page.Total
		if ov.Buckets == 0 {
			return ov, nil
		}
		if top, err = s.recents.TopDeniedOf(ctx, apps, limit); err != nil {
			return ov, err
		}
	}
	// The top buckets, read at once; one deleted since the roll-up is left
	// out.
	want := make([]string, len(top))
	for i, t := range top {
		want[i] = t.Bucket
	}
	bs, err := s.buckets.ByNames(ctx, want)
	if err != nil {
		return ov, err
	}
	for _, b := range bs {
		byName[b.Name] = b
	}
	for _, t := range top {
		b := byName[t.Bucket]
		if b != nil {
			ov.Rows = append(ov.Rows, DeniedRow{Bucket: b, Allowed: t.TotalAllowed, Denied: t.TotalDenied, Recent: t})
		}
	}
	return ov, nil
}
