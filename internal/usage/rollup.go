package usage

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// The roll-up: the console's bucket list and usage overview need, for
// every bucket on a page, the last hour of allowed and denied acquires per
// minute. Reading that from Redis per request costs one HGETALL per bucket
// and minute (600,000 commands for 10,000 buckets), on the Redis that
// serves acquires. Instead the sync worker runs a Roller: once per minute
// it reads the set of buckets that had usage in the minute just ended
// (clients name them in redisscript.Keyspace.UsageActive), reads only
// their minute hashes in pipelines of RollerConfig.Batch, and stores the
// last hour per bucket in one MySQL row (table bucket_usage): allowed,
// denied, would-deny (shadow mode) and near-limit acquires per minute.
// Pages read those rows by primary key or by index (Recents), at a cost
// that depends on the page size only, never on the number of buckets, and
// put no load on Redis at all.

// RecentMinutes is the span of a Recent: the last hour, per minute.
const RecentMinutes = 60

// Recent is a bucket's usage over the last hour, all apps together, as
// rolled up by a Roller.
type Recent struct {
	// Bucket is the bucket's name.
	Bucket string
	// Start is the first minute of the counts; the last one is the minute
	// before the one in progress when they were read.
	Start time.Time
	// Allowed and Denied hold one count per minute, oldest first
	// (RecentMinutes of them).
	Allowed, Denied []int64
	// WouldDeny holds per minute the part of Allowed that a bucket in
	// shadow mode would have denied.
	WouldDeny []int64
	// Near holds per minute the acquires (of every outcome) after which
	// the bucket had at least redisscript.NearLimitUsed of its capacity in
	// use, as the clients that record usage saw it.
	Near []int64
	// TotalAllowed, TotalDenied, TotalWouldDeny and TotalNear are their
	// sums.
	TotalAllowed, TotalDenied, TotalWouldDeny, TotalNear int64
}

// NearLimit reports whether the bucket ran near its limit in the hour (see
// NearLimit). The stored near_total says the same as of the last roll-up,
// so that a list filtered on it and its badge agree.
func (r Recent) NearLimit() bool {
	return NearLimit(r.TotalAllowed, r.TotalDenied, r.TotalWouldDeny, r.TotalNear)
}

// NearLimitShare is the share of a bucket's calls in the hour that must
// have left it near its limit for the hour to count as near the limit
// when nothing was refused: one in ten.
const NearLimitShare = 0.1

// NearLimit is the rule of "ran near its limit in the last hour", for a
// bucket's calls of an hour: allowed, denied, would-deny (shadow mode; a
// part of allowed) and near (those after which the bucket had at least
// redisscript.NearLimitUsed of its capacity in use, denials and
// would-denies included, as the clients that record usage count them). It
// did when it refused a call or would have, in shadow mode; or when at
// least NearLimitShare of its calls left it that used. One burst in an
// otherwise calm hour, a key of a keyed bucket taken to its limit among
// many that were not, or a client's leased tokens (whose answers report
// the lease's remainder, not the bucket's) do not make a bucket "near its
// limit". This is the rule's one home: the roll-up stores near_total only
// for the hours it holds for, and the ranked lists filter on that.
func NearLimit(allowed, denied, would, near int64) bool {
	if denied > 0 || would > 0 {
		return true
	}
	calls := allowed + denied
	return near > 0 && float64(near) >= NearLimitShare*float64(calls)
}

// DeniedShare is the share of the hour's acquires that were denied, from
// 0 to 1; 0 without acquires.
func (r Recent) DeniedShare() float64 {
	t := r.TotalAllowed + r.TotalDenied
	if t <= 0 {
		return 0
	}
	return float64(r.TotalDenied) / float64(t)
}

// ring is the row of one bucket: the counts of the RecentMinutes minutes
// that end with minute last.
type ring struct {
	last int64
	// c holds the counts of each kind: see the kind constants.
	c [kinds][]int64
}

// Kinds of counts of a ring, in the order of the row's columns.
const (
	kAllowed = iota
	kDenied
	kWould
	kNear
	kinds
)

// minuteCounts is one bucket's counts of one minute, per kind.
type minuteCounts [kinds]int64

func newRing(last int64) ring {
	r := ring{last: last}
	for k := range r.c {
		r.c[k] = make([]int64, RecentMinutes)
	}
	return r
}

// shift moves the window to end at minute last (later only), dropping the
// minutes that fall out and adding empty ones.
func (r *ring) shift(last int64) {
	d := last - r.last
	if d <= 0 {
		return
	}
	for _, v := range r.c {
		if d >= RecentMinutes {
			clear(v)
		} else {
			copy(v, v[d:])
			clear(v[RecentMinutes-d:])
		}
	}
	r.last = last
}

// merge records minute m's counts. Counts of a minute only grow (late
// flushes), so merging keeps the larger value: merging the same read
// twice, or two workers' reads in either order, gives the same row.
func (r *ring) merge(m int64, counts minuteCounts) {
	r.shift(m)
	i := RecentMinutes - 1 - int(r.last-m)
	if i < 0 {
		return // older than the window
	}
	for k, v := range r.c {
		v[i] = max(v[i], counts[k])
	}
}

func sum(v []int64) int64 {
	var t int64
	for _, x := range v {
		t = addSat(t, x)
	}
	return t
}

func addSat(a, b int64) int64 {
	if b > 0 && a > 1<<62 {
		return a // far beyond any real count: stop rather than overflow
	}
	return a + b
}

// formatCounts writes counts as "1,0,5".
func formatCounts(v []int64) string {
	b := make([]byte, 0, len(v)*2)
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, x, 10)
	}
	return string(b)
}

// parseCounts reads what formatCounts wrote into RecentMinutes counts; a
// damaged value reads as zeros rather than failing a page.
func parseCounts(s string) []int64 {
	out := make([]int64, RecentMinutes)
	parts := strings.Split(s, ",")
	if len(parts) != RecentMinutes {
		return out
	}
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return make([]int64, RecentMinutes)
		}
		out[i] = n
	}
	return out
}

// rollupRow is a bucket_usage row.
type rollupRow struct {
	Bucket  string `db:"bucket_name"`
	Last    int64  `db:"last_minute"`
	Allowed string `db:"allowed_counts"`
	Denied  string `db:"denied_counts"`
	Would   string `db:"would_counts"`
	Near    string `db:"near_counts"`
}

func (r rollupRow) ring() ring {
	rg := ring{last: r.Last}
	rg.c[kAllowed], rg.c[kDenied] = parseCounts(r.Allowed), parseCounts(r.Denied)
	rg.c[kWould], rg.c[kNear] = parseCounts(r.Would), parseCounts(r.Near)
	return rg
}

// rollupColumns reads a rollupRow; rows written before the would-deny and
// near-limit columns existed read them as zeros.
const rollupColumns = "bucket_name, last_minute, allowed_counts, denied_counts," +
	" COALESCE(would_counts, '') AS would_counts, COALESCE(near_counts, '') AS near_counts"

// Recents reads the roll-up for the console. It is safe for concurrent
// use and reads MySQL only.
type Recents struct {
	db  *sqlx.DB
	now func() time.Time
}

// NewRecents returns a reader of the roll-up in db.
func NewRecents(db *sqlx.DB) *Recents { return &Recents{db: db, now: time.Now} }

// MaxRecentNames bounds the names of one For call: a page of buckets.
const MaxRecentNames = 1000

// lastComplete is the last minute that has ended at t.
func lastComplete(t time.Time) int64 { return floorDiv(t.Unix(), 60) - 1 }

// recent turns a row into a Recent whose window ends at minute last.
func recent(name string, rg ring, last int64) Recent {
	rg.shift(last)
	rc := Recent{Bucket: name, Start: time.Unix((last-RecentMinutes+1)*60, 0).UTC(),
		Allowed: rg.c[kAllowed], Denied: rg.c[kDenied], WouldDeny: rg.c[kWould], Near: rg.c[kNear]}
	if rg.last > last {
		// Rolled up by a worker whose clock runs ahead: show its window.
		rc.Start = time.Unix((rg.last-RecentMinutes+1)*60, 0).UTC()
	}
	rc.TotalAllowed, rc.TotalDenied = sum(rc.Allowed), sum(rc.Denied)
	rc.TotalWouldDeny, rc.TotalNear = sum(rc.WouldDeny), sum(rc.Near)
	return rc
}

// For returns the last hour of each bucket of names (a page: at most
// MaxRecentNames), in one query by primary key. A bucket without usage in
// the last hour gets a Recent of zeros. Too many or invalid names give an
// error matching errs.ErrInvalid; MySQL failing, one matching
// errs.ErrUnavailable.
func (r *Recents) For(ctx context.Context, names []string) (map[string]Recent, error) {
	if len(names) > MaxRecentNames {
		v := &errs.Validation{}
		v.Add("names", fmt.Sprintf("at most %d buckets at once", MaxRecentNames))
		return nil, v
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	last := lastComplete(r.now())
	out := make(map[string]Recent, len(names))
	for _, n := range names {
		out[n] = recent(n, newRing(last), last)
	}
	if len(names) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In("SELECT "+rollupColumns+" FROM bucket_usage WHERE bucket_name IN (?)", names)
	if err != nil {
		return nil, fmt.Errorf("usage: recent: %w", err)
	}
	var rows []rollupRow
	if err := r.db.SelectContext(ctx, &rows, r.db.Rebind(q), args...); err != nil {
		return nil, fmt.Errorf("usage: recent: %w", database.Translate(err))
	}
	for _, row := range rows {
		if _, ok := out[row.Bucket]; ok {
			out[row.Bucket] = recent(row.Bucket, row.ring(), last)
		}
	}
	return out, nil
}

// TopDeniedOf is TopDenied for the buckets a member of apps sees: those
// whose owner app or one of whose allowed apps is among apps (the
// visibility rule of package buckets). It walks the index on the hour's
// denials from the top and checks each bucket's apps by key, so it stops
// after limit visible buckets: one statement, whatever the number of
// buckets the user sees.
func (r *Recents) TopDeniedOf(ctx context.Context, apps []string, limit int) ([]Recent, error) {
	if limit < 1 || limit > MaxRecentNames {
		v := &errs.Validation{}
		v.Add("limit", fmt.Sprintf("must be from 1 to %d", MaxRecentNames))
		return nil, v
	}
	if len(apps) == 0 {
		return []Recent{}, nil
	}
	last := lastComplete(r.now())
	q, args, err := sqlx.In(strings.ReplaceAll(visibleTop, "TOTAL", "denied_total"), apps, apps, limit)
	if err != nil {
		return nil, fmt.Errorf("usage: top denied: %w", err)
	}
	var rows []rollupRow
	if err := r.db.SelectContext(ctx, &rows, r.db.Rebind(q), args...); err != nil {
		return nil, fmt.Errorf("usage: top denied: %w", database.Translate(err))
	}
	// The same walk for buckets in shadow mode, on their would-deny total.
	q, args, err = sqlx.In(strings.ReplaceAll(visibleTop, "TOTAL", "would_total"), apps, apps, limit)
	if err != nil {
		return nil, fmt.Errorf("usage: top denied: %w", err)
	}
	var would []rollupRow
	if err := r.db.SelectContext(ctx, &would, r.db.Rebind(q), args...); err != nil {
		return nil, fmt.Errorf("usage: top denied: %w", database.Translate(err))
	}
	return topRefused(append(rows, would...), last, limit), nil
}

// visibleTop is TopDeniedOf's query, TOTAL standing for the column ranked.
const visibleTop = `SELECT u.bucket_name, u.last_minute, u.allowed_counts, u.denied_counts,
		COALESCE(u.would_counts, '') AS would_counts, COALESCE(u.near_counts, '') AS near_counts
		FROM bucket_usage u JOIN buckets b ON b.name = u.bucket_name JOIN apps o ON o.id = b.owner_app_id
		WHERE u.TOTAL > 0 AND (o.name IN (?) OR EXISTS (SELECT 1 FROM bucket_apps ba JOIN apps a ON a.id = ba.app_id
			WHERE ba.bucket_id = b.id AND a.name IN (?)))
		ORDER BY u.TOTAL DESC, u.bucket_name DESC LIMIT ?`

// topRefused turns rows (read by denials and by would-denials, perhaps
// twice) into the limit buckets that refused or would have refused the
// most, most first.
func topRefused(rows []rollupRow, last int64, limit int) []Recent {
	seen := map[string]bool{}
	out := make([]Recent, 0, len(rows))
	for _, row := range rows {
		if seen[row.Bucket] {
			continue
		}
		seen[row.Bucket] = true
		out = append(out, recent(row.Bucket, row.ring(), last))
	}
	return mostDenied(out, limit, refused)
}

// refused ranks a Recent in the overview: its denials, and the acquires a
// bucket in shadow mode would have denied.
func refused(r Recent) (int64, int64, string) { return r.TotalDenied + r.TotalWouldDeny, 0, r.Bucket }

// TopDenied returns the buckets that denied the most acquires in the last
// hour, at most limit of them (1 to MaxRecentNames), most denials first.
// For every bucket (visible nil), buckets in shadow mode rank by the
// acquires they would have denied, read from their own index.
// It reads the index on the hour's denials: the cost depends on limit, not
// on the number of buckets. When visible is not nil, only those bucket
// names count (a user who is not an admin); it is then read by primary key
// in chunks, at a cost that grows with len(visible) but stays in MySQL.
// The order is by the denials as of the last roll-up; a bucket whose
// denials left the window since counts as of then.
func (r *Recents) TopDenied(ctx context.Context, visible []string, limit int) ([]Recent, error) {
	if limit < 1 || limit > MaxRecentNames {
		v := &errs.Validation{}
		v.Add("limit", fmt.Sprintf("must be from 1 to %d", MaxRecentNames))
		return nil, v
	}
	last := lastComplete(r.now())
	var rows []rollupRow
	if visible == nil {
		// Both keys descending: a backward scan of the index, no sort.
		err := r.db.SelectContext(ctx, &rows, "SELECT "+rollupColumns+
			" FROM bucket_usage WHERE denied_total > 0 ORDER BY denied_total DESC, bucket_name DESC LIMIT ?", limit)
		if err != nil {
			return nil, fmt.Errorf("usage: top denied: %w", database.Translate(err))
		}
		// And the top buckets in shadow mode, by what they would have denied.
		var would []rollupRow
		err = r.db.SelectContext(ctx, &would, "SELECT "+rollupColumns+
			" FROM bucket_usage WHERE would_total > 0 ORDER BY would_total DESC, bucket_name DESC LIMIT ?", limit)
		if err != nil {
			return nil, fmt.Errorf("usage: top denied: %w", database.Translate(err))
		}
		return topRefused(append(rows, would...), last, limit), nil
	} else {
		// Rank the visible names by their stored totals (by primary key
		// only: a condition on denied_total would tempt the planner into
		// scanning that index), then read the counts of the top ones.
		type total struct {
			Bucket string `db:"bucket_name"`
			Denied int64  `db:"denied_total"`
		}
		var ranked []total
		for chunk := range slices.Chunk(visible, MaxRecentNames) {
			q, args, err := sqlx.In("SELECT bucket_name, denied_total FROM bucket_usage WHERE bucket_name IN (?)", chunk)
			if err != nil {
				return nil, fmt.Errorf("usage: top denied: %w", err)
			}
			var part []total
			if err := r.db.SelectContext(ctx, &part, r.db.Rebind(q), args...); err != nil {
				return nil, fmt.Errorf("usage: top denied: %w", database.Translate(err))
			}
			ranked = append(ranked, part...)
		}
		ranked = mostDenied(ranked, limit, func(t total) (int64, int64, string) { return t.Denied, 0, t.Bucket })
		if len(ranked) > 0 {
			top := make([]string, len(ranked))
			for i, t := range ranked {
				top[i] = t.Bucket
			}
			q, args, err := sqlx.In("SELECT "+rollupColumns+" FROM bucket_usage WHERE bucket_name IN (?)", top)
			if err != nil {
				return nil, fmt.Errorf("usage: top denied: %w", err)
			}
			if err := r.db.SelectContext(ctx, &rows, r.db.Rebind(q), args...); err != nil {
				return nil, fmt.Errorf("usage: top denied: %w", database.Translate(err))
			}
		}
	}
	out := make([]Recent, 0, len(rows))
	for _, row := range rows {
		out = append(out, recent(row.Bucket, row.ring(), last))
	}
	return mostDenied(out, limit, func(r Recent) (int64, int64, string) { return r.TotalDenied, 0, r.Bucket }), nil
}

// mostDenied keeps the items with denials, most denied first, ties by
// most allowed and then by bucket name, at most limit of them (all when
// limit <= 0). It reuses items' array.
func mostDenied[T any](items []T, limit int, key func(T) (denied, allowed int64, bucket string)) []T {
	top := items[:0]
	for _, it := range items {
		if d, _, _ := key(it); d > 0 {
			top = append(top, it)
		}
	}
	slices.SortFunc(top, func(a, b T) int {
		da, aa, na := key(a)
		db, ab, nb := key(b)
		return cmp.Or(cmp.Compare(db, da), cmp.Compare(ab, aa), cmp.Compare(na, nb))
	})
	if limit > 0 && len(top) > limit {
		top = top[:limit]
	}
	return slices.Clip(top)
}

// RolledUpTo returns the end of the last minute rolled up (zero time when
// none was), for a page to say how fresh its counts are.
func (r *Recents) RolledUpTo(ctx context.Context) (time.Time, error) {
	var m int64
	if err := r.db.GetContext(ctx, &m, "SELECT minute FROM usage_rollup_cursor WHERE id = 1"); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("usage: roll-up cursor: %w", database.Translate(err))
	}
	if m <= 0 {
		return time.Time{}, nil
	}
	return time.Unix((m+1)*60, 0).UTC(), nil
}

// RollerConfig configures a Roller.
type RollerConfig struct {
	DB       *sqlx.DB
	Redis    redis.UniversalClient
	Keyspace redisscript.Keyspace
	// Interval is how often the Roller looks for minutes to roll up
	// (default 15 s).
	Interval time.Duration
	// Grace is how long after a minute ends the Roller waits for the last
	// client flushes of it (default 10 s; clients flush every second and
	// give up on a flush after 5 s).
	Grace time.Duration
	// Batch is the most Redis commands in one pipeline and the most rows
	// in one MySQL transaction (default 200). It bounds how long Redis
	// spends on the roll-up before serving other clients again.
	Batch int
	// Logger reports failed roll-ups (default slog.Default()).
	Logger *slog.Logger
	// Metrics, if set, receives the sluice_usage_rollup_* collectors.
	Metrics prometheus.Registerer
}

// Roller rolls the per-minute usage counts in Redis up into MySQL (see
// the package comment above RecentMinutes). Several Rollers may run at
// once (one per sync worker): merging is idempotent, and a shared cursor
// in MySQL keeps them from redoing minutes already done.
type Roller struct {
	cfg RollerConfig
	now func() time.Time
	m   *rollMetrics
}

// NewRoller returns a Roller; defaults fill the zero fields of cfg.
func NewRoller(cfg RollerConfig) *Roller {
	if cfg.Interval <= 0 {
		cfg.Interval = 15 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 200
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Roller{cfg: cfg, now: time.Now, m: newRollMetrics(cfg.Metrics)}
}

// RollStats says what one RollUp did.
type RollStats struct {
	// Minutes is how many minutes were rolled up.
	Minutes int
	// RedisCommands is how many commands were sent to Redis: one SMEMBERS
	// per minute plus one HGETALL per bucket active in it.
	RedisCommands int
	// Buckets is how many bucket rows were written, Aged how many of them
	// only moved their window on (no usage in the minute).
	Buckets, Aged int
}

// Run rolls up every Interval until ctx ends. Failures are logged and
// retried at the next tick; it returns ctx's error.
func (r *Roller) Run(ctx context.Context) error {
	periodic.NowAndEvery(ctx, r.cfg.Interval, func(ctx context.Context) {
		if _, err := r.RollUp(ctx); err != nil && ctx.Err() == nil {
			r.m.failures.Inc()
			r.cfg.Logger.WarnContext(ctx, "usage roll-up failed; retrying", "err", err)
		}
	})
	return ctx.Err()
}

// RollUp rolls up every minute that ended at least Grace ago and is not
// rolled up yet, at most the last RecentMinutes of them.
func (r *Roller) RollUp(ctx context.Context) (st RollStats, err error) {
	defer func() { r.m.commands.Add(float64(st.RedisCommands)) }()
	target := lastComplete(r.now().Add(-r.cfg.Grace))
	var cursor int64
	if err := r.cfg.DB.GetContext(ctx, &cursor, "SELECT minute FROM usage_rollup_cursor WHERE id = 1"); err != nil &&
		!errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("usage: roll-up cursor: %w", database.Translate(err))
	}
	for m := max(cursor+1, target-RecentMinutes+1); m <= target; m++ {
		if err := r.rollMinute(ctx, m, &st); err != nil {
			return st, err
		}
		if _, err := r.cfg.DB.ExecContext(ctx,
			"UPDATE usage_rollup_cursor SET minute = ? WHERE id = 1 AND minute < ?", m, m); err != nil {
			return st, fmt.Errorf("usage: roll-up cursor: %w", database.Translate(err))
		}
		r.m.rolledUpTo.Set(float64((m + 1) * 60))
		st.Minutes++
	}
	return st, nil
}

// rollMinute merges minute m's counts of its active buckets, then moves
// on the window of the buckets with usage in the last hour but not in m.
func (r *Roller) rollMinute(ctx context.Context, m int64, st *RollStats) error {
	names, err := r.cfg.Redis.SMembers(ctx, r.cfg.Keyspace.UsageActive(m)).Result()
	st.RedisCommands++
	if err != nil {
		return fmt.Errorf("usage: roll-up: active buckets: %w: %w", errs.ErrUnavailable, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !redisscript.ValidName(n) })
	slices.Sort(names) // one lock order for every worker
	for chunk := range slices.Chunk(names, r.cfg.Batch) {
		keys := make([]string, len(chunk))
		for i, n := range chunk {
			keys[i] = r.cfg.Keyspace.UsageMinute(n, m)
		}
		hashes, err := readAll(ctx, r.cfg.Redis, keys)
		st.RedisCommands += len(keys)
		if err != nil {
			return fmt.Errorf("usage: roll-up: %w", err)
		}
		counts := make(map[string]minuteCounts, len(chunk))
		for i, h := range hashes {
			var c minuteCounts
			for field, val := range h {
				_, kind, ok := redisscript.ParseUsageCount(field)
				n, err := strconv.ParseInt(val, 10, 64)
				if !ok || err != nil || n <= 0 {
					continue
				}
				k, rolled := kindIndex[kind]
				if !rolled {
					continue // the failure policy's answers: read per bucket only
				}
				c[k] = addSat(c[k], n)
			}
			counts[chunk[i]] = c
		}
		n, err := r.merge(ctx, chunk, func(rg *ring, name string) { rg.merge(m, counts[name]) })
		st.Buckets += n
		if err != nil {
			return err
		}
	}
	// Rows whose window ends before m (no usage in m): move them on, so
	// that the index on the hour's denials stays true for quiet buckets.
	// A row that becomes all zeros is deleted, so this reads only the
	// buckets with usage in the last hour.
	for {
		var stale []string
		err := r.cfg.DB.SelectContext(ctx, &stale, "SELECT bucket_name FROM bucket_usage"+
			" WHERE last_minute < ? ORDER BY bucket_name LIMIT ?", m, r.cfg.Batch)
		if err != nil {
			return fmt.Errorf("usage: roll-up: quiet buckets: %w", database.Translate(err))
		}
		if len(stale) == 0 {
			return nil
		}
		n, err := r.merge(ctx, stale, func(rg *ring, _ string) { rg.shift(m) })
		st.Buckets += n
		st.Aged += n
		if err != nil {
			return err
		}
		if len(stale) < r.cfg.Batch {
			return nil
		}
	}
}

// kindIndex maps a usage field's kind to its place in a ring.
var kindIndex = map[redisscript.UsageKind]int{redisscript.UsageAllowed: kAllowed, redisscript.UsageDenied: kDenied,
	redisscript.UsageWouldDeny: kWould, redisscript.UsageNearLimit: kNear}

// merge applies fn to the rows of names (sorted) in one transaction,
// creating missing rows, and writes them back.
func (r *Roller) merge(ctx context.Context, names []string, fn func(rg *ring, name string)) (int, error) {
	if len(names) == 0 {
		return 0, nil
	}
	err := database.InTx(ctx, r.cfg.DB, func(tx *database.Tx) error {
		q, args, err := sqlx.In("SELECT "+rollupColumns+
			" FROM bucket_usage WHERE bucket_name IN (?) ORDER BY bucket_name FOR UPDATE", names)
		if err != nil {
			return err
		}
		var rows []rollupRow
		if err := tx.SelectContext(ctx, &rows, tx.Rebind(q), args...); err != nil {
			return fmt.Errorf("usage: roll-up: read rows: %w", database.Translate(err))
		}
		have := make(map[string]ring, len(rows))
		for _, row := range rows {
			have[row.Bucket] = row.ring()
		}
		var sb strings.Builder
		sb.WriteString("INSERT INTO bucket_usage (bucket_name, last_minute, allowed_counts, denied_counts, would_counts," +
			" near_counts, allowed_total, denied_total, would_total, near_total) VALUES ")
		vals := make([]any, 0, len(names)*10)
		var empty []string
		for _, n := range names {
			rg, ok := have[n]
			if !ok {
				rg = newRing(0)
			}
			fn(&rg, n)
			a, d := sum(rg.c[kAllowed]), sum(rg.c[kDenied])
			if a == 0 && d == 0 {
				// A quiet hour: the row goes, so the table holds only the
				// buckets with usage in the last hour.
				if ok {
					empty = append(empty, n)
				}
				continue
			}
			if len(vals) > 0 {
				sb.WriteString(",")
			}
			w, near := sum(rg.c[kWould]), sum(rg.c[kNear])
			if !NearLimit(a, d, w, near) {
				near = 0 // the ranked lists' filter: see NearLimit
			}
			sb.WriteString("(?,?,?,?,?,?,?,?,?,?)")
			vals = append(vals, n, rg.last, formatCounts(rg.c[kAllowed]), formatCounts(rg.c[kDenied]),
				formatCounts(rg.c[kWould]), formatCounts(rg.c[kNear]), a, d, w, near)
		}
		if len(vals) > 0 {
			sb.WriteString(" ON DUPLICATE KEY UPDATE last_minute = VALUES(last_minute), allowed_counts = VALUES(allowed_counts)," +
				" denied_counts = VALUES(denied_counts), would_counts = VALUES(would_counts), near_counts = VALUES(near_counts)," +
				" allowed_total = VALUES(allowed_total), denied_total = VALUES(denied_total)," +
				" would_total = VALUES(would_total), near_total = VALUES(near_total)")
			if _, err := tx.ExecContext(ctx, sb.String(), vals...); err != nil {
				return fmt.Errorf("usage: roll-up: write rows: %w", database.Translate(err))
			}
		}
		if len(empty) > 0 {
			q, args, err := sqlx.In("DELETE FROM bucket_usage WHERE bucket_name IN (?)", empty)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, tx.Rebind(q), args...); err != nil {
				return fmt.Errorf("usage: roll-up: delete rows: %w", database.Translate(err))
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(names), nil
}
