package usage

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// counter is a go-redis hook that counts the commands a client sends and
// the largest pipeline.
type counter struct {
	mu          sync.Mutex
	commands    int
	maxPipeline int
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.commands += len(data([]redis.Cmder{cmd}))
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		n := len(data(cmds))
		c.commands += n
		c.maxPipeline = max(c.maxPipeline, n)
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// data drops the commands a new connection sends to set itself up.
func data(cmds []redis.Cmder) []redis.Cmder {
	var out []redis.Cmder
	for _, c := range cmds {
		switch c.Name() {
		case "hello", "client", "auth", "select":
			continue
		}
		out = append(out, c)
	}
	return out
}

func (c *counter) take() (commands, maxPipeline int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	commands, maxPipeline = c.commands, c.maxPipeline
	c.commands, c.maxPipeline = 0, 0
	return commands, maxPipeline
}

var _ redis.Hook = (*counter)(nil)

// rollFixture is a roll-up on a fresh database and a private key space,
// with a clock that stands still until the test moves it.
type rollFixture struct {
	rdb    *redis.Client
	ks     redisscript.Keyspace
	prefix string
	cnt    *counter
	roller *Roller
	recent *Recents
	reg    *prometheus.Registry
	now    time.Time
}

func newRollFixture(t testing.TB, batch int) *rollFixture {
	t.Helper()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	cnt := &counter{}
	counted := redis.NewClient(rdb.Options())
	t.Cleanup(func() { counted.Close() })
	counted.AddHook(cnt)
	f := &rollFixture{rdb: rdb, ks: redisscript.Keyspace{Prefix: prefix}, prefix: prefix, cnt: cnt,
		now: time.Date(2026, 3, 4, 10, 37, 20, 0, time.UTC)}
	f.reg = prometheus.NewRegistry()
	f.roller = NewRoller(RollerConfig{DB: db, Redis: counted, Keyspace: f.ks, Batch: batch, Metrics: f.reg})
	f.roller.now = func() time.Time { return f.now }
	f.recent = NewRecents(db)
	f.recent.now = func() time.Time { return f.now }
	return f
}

// record writes counts the way services do: through a Recorder.
func (f *rollFixture) record(t testing.TB, fn func(rec *usage.Recorder)) {
	t.Helper()
	rec, err := usage.NewRecorder(f.rdb, "web", usage.WithKeyPrefix(f.prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	fn(rec)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
}

func (f *rollFixture) rollUp(t *testing.T) RollStats {
	t.Helper()
	st, err := f.roller.RollUp(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRollUp(t *testing.T) {
	f := newRollFixture(t, 0)
	ctx := context.Background()
	// now is 10:37:20; with a 10 s grace the last minute rolled up is
	// 10:36, and the hour shown is 09:37..10:36.
	at := func(hhmm string) time.Time {
		tm, err := time.Parse("15:04", hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 3, 4, tm.Hour(), tm.Minute(), 30, 0, time.UTC)
	}
	f.record(t, func(rec *usage.Recorder) {
		rec.Add("busy", at("10:36"), true, 50)
		rec.Add("busy", at("10:36"), false, 7)
		rec.Add("busy", at("09:37"), true, 3) // first minute of the hour
		rec.Add("busy", at("09:36"), true, 1000)
		rec.Add("calm", at("10:00"), true, 9)
		rec.Add("old", at("09:00"), false, 4)  // before the hour
		rec.Add("now", at("10:37"), false, 99) // the minute in progress
	})

	st := f.rollUp(t)
	cmds, _ := f.cnt.take()
	// 60 minutes, each one SMEMBERS, plus one HGETALL per active bucket
	// and minute in the hour: busy x2, calm x1.
	if st.Minutes != 60 || st.RedisCommands != 63 || cmds != 63 {
		t.Fatalf("stats %+v, %d commands sent; want 60 minutes and 63 commands", st, cmds)
	}
	if got := testutil.ToFloat64(f.roller.m.commands); got != 63 {
		t.Errorf("sluice_usage_rollup_redis_commands_total = %v, want 63", got)
	}
	if got, want := testutil.ToFloat64(f.roller.m.rolledUpTo), float64(at("10:37").Truncate(time.Minute).Unix()); got != want {
		t.Errorf("sluice_usage_rollup_rolled_up_to_timestamp_seconds = %v, want %v", got, want)
	}
	if n, err := testutil.GatherAndCount(f.reg); err != nil || n != 3 {
		t.Errorf("%d collectors registered (%v), want 3", n, err)
	}

	got, err := f.recent.For(ctx, []string{"busy", "calm", "old", "now", "none"})
	if err != nil {
		t.Fatal(err)
	}
	busy := got["busy"]
	if !busy.Start.Equal(at("09:37").Truncate(time.Minute)) || len(busy.Allowed) != 60 || len(busy.Denied) != 60 {
		t.Fatalf("busy: start %v, %d/%d points", busy.Start, len(busy.Allowed), len(busy.Denied))
	}
	if busy.Allowed[59] != 50 || busy.Denied[59] != 7 || busy.Allowed[0] != 3 || busy.TotalAllowed != 53 || busy.TotalDenied != 7 {
		t.Errorf("busy = %+v, want 3 allowed at 09:37, 50/7 at 10:36", busy)
	}
	if s := busy.DeniedShare(); s < 0.1166 || s > 0.1167 {
		t.Errorf("busy denied share = %v, want 7/60", s)
	}
	if calm := got["calm"]; calm.TotalAllowed != 9 || calm.Allowed[23] != 9 {
		t.Errorf("calm = %+v, want 9 allowed at 10:00", calm)
	}
	for _, n := range []string{"old", "now", "none"} {
		if r := got[n]; r.TotalAllowed != 0 || r.TotalDenied != 0 || len(r.Allowed) != 60 {
			t.Errorf("%s = %+v, want an hour of zeros", n, r)
		}
	}

	// A second roll-up at the same time has nothing to do.
	if st := f.rollUp(t); st.Minutes != 0 || st.RedisCommands != 0 {
		t.Errorf("second roll-up: %+v, want nothing done", st)
	}

	// Late counts of 10:36 and new ones of 10:37, rolled up a minute later.
	f.record(t, func(rec *usage.Recorder) { rec.Add("calm", at("10:37"), false, 2) })
	f.now = f.now.Add(time.Minute)
	st = f.rollUp(t)
	if st.Minutes != 1 || st.RedisCommands != 3 { // SMEMBERS, "now" and "calm"
		t.Errorf("next minute: %+v, want 1 minute, 3 commands", st)
	}
	top, err := f.recent.TopDenied(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 3 || top[0].Bucket != "now" || top[0].TotalDenied != 99 || top[1].Bucket != "busy" || top[2].Bucket != "calm" {
		t.Errorf("top denied = %+v, want now (99), busy (7), calm (2)", top)
	}
	top, err = f.recent.TopDenied(ctx, []string{"calm", "old"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 1 || top[0].Bucket != "calm" || top[0].TotalDenied != 2 {
		t.Errorf("top denied among calm, old = %+v, want calm (2)", top)
	}

	// An hour later with no usage: every row moves on and, all zeros, goes.
	f.now = f.now.Add(61 * time.Minute)
	st = f.rollUp(t)
	if st.Minutes != 60 || st.RedisCommands != 60 || st.Aged == 0 {
		t.Errorf("quiet hour: %+v, want 60 minutes, 60 commands, rows aged", st)
	}
	var rows int
	if err := f.roller.cfg.DB.GetContext(ctx, &rows, "SELECT COUNT(*) FROM bucket_usage"); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d rows left after a quiet hour, want 0", rows)
	}
	if top, err := f.recent.TopDenied(ctx, nil, 10); err != nil || len(top) != 0 {
		t.Errorf("top denied after a quiet hour = %+v, %v; want none", top, err)
	}
	upTo, err := f.recent.RolledUpTo(ctx)
	if err != nil || !upTo.Equal(f.now.Add(-10*time.Second).Truncate(time.Minute)) {
		t.Errorf("RolledUpTo = %v, %v", upTo, err)
	}
}

// TestRollUpIdempotent replays a minute (a second worker, a reset cursor):
// the rows stay the same.
func TestRollUpIdempotent(t *testing.T) {
	f := newRollFixture(t, 0)
	ctx := context.Background()
	f.record(t, func(rec *usage.Recorder) {
		rec.Add("b", f.now.Add(-2*time.Minute), true, 5)
		rec.Add("b", f.now.Add(-time.Minute), false, 6)
	})
	f.rollUp(t)
	first, err := f.recent.For(ctx, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.roller.cfg.DB.ExecContext(ctx, "UPDATE usage_rollup_cursor SET minute = 0"); err != nil {
		t.Fatal(err)
	}
	f.rollUp(t)
	again, err := f.recent.For(ctx, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first["b"]) != fmt.Sprint(again["b"]) || again["b"].TotalAllowed != 5 || again["b"].TotalDenied != 6 {
		t.Errorf("after replay %+v, before %+v; want equal, 5 allowed and 6 denied", again["b"], first["b"])
	}
}

// TestRollUpCostIsBounded has 2,000 buckets active in one minute and 8,000
// others that exist but had no usage: the roll-up sends one command per
// active bucket plus one per minute, in pipelines of at most Batch, and
// reading a page of 50 buckets or the top 25 sends nothing to Redis.
func TestRollUpCostIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 2,000 buckets")
	}
	const batch = 100
	f := newRollFixture(t, batch)
	ctx := context.Background()
	m := f.now.Add(-time.Minute)
	f.record(t, func(rec *usage.Recorder) {
		for i := range 2000 {
			rec.Add(fmt.Sprintf("b%05d", i), m, i%2 == 0, int64(i+1))
		}
	})
	st := f.rollUp(t)
	cmds, maxPipe := f.cnt.take()
	if st.RedisCommands != 60+2000 || cmds != st.RedisCommands || maxPipe > batch || st.Buckets != 2000 {
		t.Fatalf("stats %+v, %d commands, largest pipeline %d; want %d commands in pipelines of <= %d",
			st, cmds, maxPipe, 60+2000, batch)
	}
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("b%05d", i*200+1))
	}
	got, err := f.recent.For(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		want := int64(0)
		if i*200+1 < 2000 {
			want = int64(i*200 + 2) // odd index: denied, i+1 of them
		}
		if got[n].TotalDenied != want {
			t.Errorf("%s denied %d, want %d", n, got[n].TotalDenied, want)
		}
	}
	top, err := f.recent.TopDenied(ctx, nil, 25)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 25 || top[0].Bucket != "b01999" || top[0].TotalDenied != 2000 {
		t.Errorf("top denied: %d, first %+v; want 25, b01999 with 2000", len(top), top[0])
	}
	if cmds, _ := f.cnt.take(); cmds != 0 {
		t.Errorf("reading the roll-up sent %d Redis commands, want 0", cmds)
	}
}

func TestRecentsRejects(t *testing.T) {
	f := newRollFixture(t, 0)
	ctx := context.Background()
	if _, err := f.recent.For(ctx, []string{"Bad Name"}); err == nil {
		t.Error("For accepted an invalid name")
	}
	if _, err := f.recent.For(ctx, make([]string, MaxRecentNames+1)); err == nil {
		t.Error("For accepted too many names")
	}
	for _, limit := range []int{0, -1, MaxRecentNames + 1} {
		if _, err := f.recent.TopDenied(ctx, nil, limit); err == nil {
			t.Errorf("TopDenied accepted limit %d", limit)
		}
	}
}

func TestRing(t *testing.T) {
	r := newRing(100)
	r.merge(100, minuteCounts{1, 2, 0, 3})
	r.merge(99, minuteCounts{3, 0, 2, 0})
	r.merge(100, minuteCounts{0, 1, 0, 1}) // an older read of the same minute: kept the larger
	if r.c[kAllowed][59] != 1 || r.c[kDenied][59] != 2 || r.c[kAllowed][58] != 3 || r.c[kWould][58] != 2 || r.c[kNear][59] != 3 {
		t.Fatalf("ring %+v", r)
	}
	r.merge(130, minuteCounts{4, 0, 0, 0})
	if r.last != 130 || r.c[kAllowed][29] != 1 || r.c[kAllowed][28] != 3 || r.c[kAllowed][59] != 4 || r.c[kNear][29] != 3 {
		t.Fatalf("after shift by 30: %+v", r)
	}
	r.merge(40, minuteCounts{100, 100, 100, 100}) // before the window: ignored
	if sum(r.c[kAllowed]) != 8 || sum(r.c[kDenied]) != 2 || sum(r.c[kWould]) != 2 || sum(r.c[kNear]) != 3 {
		t.Fatalf("sums %d/%d/%d/%d, want 8/2/2/3", sum(r.c[kAllowed]), sum(r.c[kDenied]), sum(r.c[kWould]), sum(r.c[kNear]))
	}
	r.shift(500)
	if sum(r.c[kAllowed]) != 0 || sum(r.c[kNear]) != 0 || r.last != 500 {
		t.Fatalf("after a long shift: %+v", r)
	}
	if got := parseCounts(formatCounts(r.c[kAllowed])); len(got) != 60 {
		t.Fatalf("round trip: %v", got)
	}
	for _, bad := range []string{"", "1,2", "x" + formatCounts(make([]int64, 59)), formatCounts(append(make([]int64, 59), -1))} {
		if got := parseCounts(bad); len(got) != 60 || sum(got) != 0 {
			t.Errorf("parseCounts(%q) = %v, want 60 zeros", bad, got)
		}
	}
}

// The roll-up keeps the would-deny (shadow mode) and near-limit counts per
// minute beside the others, and their sums in the row; the failure
// policy's answers are not allowed or denied acquires.
func TestRollUpWouldDenyAndNearLimit(t *testing.T) {
	f := newRollFixture(t, 0)
	ctx := context.Background()
	m := f.now.Add(-time.Minute)
	f.record(t, func(rec *usage.Recorder) {
		rec.Add("shadowed", m, true, 10)
		rec.AddNearLimit("shadowed", m, 4)
		rec.Add("tight", m.Add(-time.Minute), true, 5)
		rec.AddNearLimit("tight", m.Add(-time.Minute), 2)
		rec.Add("calm", m, true, 3)
		// The failure policy's answers are not rolled up as allowed or
		// denied acquires.
		rec.AddFallback("calm", m, true, 7)
		rec.AddFallback("calm", m, false, 8)
	})
	// A Recorder writes would-deny counts only from decisions: write them
	// as it does, into the minute hash.
	if err := f.rdb.HIncrBy(ctx, f.ks.UsageMinute("shadowed", m.Unix()/60), redisscript.UsageWouldDenyField("web"), 4).Err(); err != nil {
		t.Fatal(err)
	}
	f.rollUp(t)
	got, err := f.recent.For(ctx, []string{"shadowed", "tight", "calm"})
	if err != nil {
		t.Fatal(err)
	}
	if s := got["shadowed"]; s.WouldDeny[59] != 4 || s.TotalWouldDeny != 4 || s.TotalNear != 4 || !s.NearLimit() {
		t.Errorf("shadowed = %+v, want 4 would-deny and 4 near the limit in the last minute", s)
	}
	if s := got["tight"]; s.Near[58] != 2 || s.TotalNear != 2 || s.TotalWouldDeny != 0 || !s.NearLimit() {
		t.Errorf("tight = %+v, want 2 near the limit a minute earlier", s)
	}
	if s := got["calm"]; s.TotalNear != 0 || s.NearLimit() || len(s.Near) != RecentMinutes || s.TotalAllowed != 3 || s.TotalDenied != 0 {
		t.Errorf("calm = %+v, want never near the limit", s)
	}
	var totals []struct {
		Bucket string `db:"bucket_name"`
		Would  int64  `db:"would_total"`
		Near   int64  `db:"near_total"`
	}
	if err := f.roller.cfg.DB.SelectContext(ctx, &totals,
		"SELECT bucket_name, would_total, near_total FROM bucket_usage ORDER BY bucket_name"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(totals) != "[{calm 0 0} {shadowed 4 4} {tight 0 2}]" {
		t.Errorf("stored totals %v", totals)
	}
	// An older row without the new columns (written before the migration)
	// reads as zeros for them.
	if _, err := f.roller.cfg.DB.ExecContext(ctx,
		"UPDATE bucket_usage SET would_counts = NULL, near_counts = NULL WHERE bucket_name = 'calm'"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.recent.For(ctx, []string{"calm"}); err != nil || got["calm"].TotalAllowed != 3 || got["calm"].TotalNear != 0 {
		t.Errorf("row with NULL counts: %+v %v", got["calm"], err)
	}
}

// The rule of "near its limit in the last hour": a refusal (or a
// would-deny) is enough; otherwise at least one call in ten must have
// left the bucket near its limit.
func TestNearLimitRule(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		allowed, denied, would, near int64
		want                         bool
	}{
		{"no calls", 0, 0, 0, 0, false},
		{"calm", 500, 0, 0, 0, false},
		{"light traffic, one burst near the limit", 1200, 0, 0, 3, false},
		{"just under one in ten", 1000, 0, 0, 99, false},
		{"one in ten", 1000, 0, 0, 100, true},
		{"busy", 40, 0, 0, 30, true},
		{"one denial", 1000, 1, 0, 1, true},
		{"shadow mode, one would-deny", 1000, 0, 1, 1, true},
		{"denials counted without near (an older client)", 10, 5, 0, 0, true},
	} {
		if got := NearLimit(tc.allowed, tc.denied, tc.would, tc.near); got != tc.want {
			t.Errorf("%s: NearLimit(%d, %d, %d, %d) = %v, want %v", tc.name, tc.allowed, tc.denied, tc.would, tc.near, got, tc.want)
		}
	}
}

// The roll-up stores near_total only for an hour the rule holds for, so
// that the ranked lists' filter and the badge agree: a bucket with a few
// near-limit calls among many is stored with 0.
func TestRollUpStoresTheNearLimitRule(t *testing.T) {
	f := newRollFixture(t, 0)
	ctx := context.Background()
	m := f.now.Add(-time.Minute)
	f.record(t, func(rec *usage.Recorder) {
		rec.Add("light", m, true, 1200)
		rec.AddNearLimit("light", m, 3)
		rec.Add("busy", m, true, 40)
		rec.AddNearLimit("busy", m, 30)
	})
	f.rollUp(t)
	var totals []struct {
		Bucket string `db:"bucket_name"`
		Near   int64  `db:"near_total"`
	}
	if err := f.roller.cfg.DB.SelectContext(ctx, &totals, "SELECT bucket_name, near_total FROM bucket_usage ORDER BY bucket_name"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(totals) != "[{busy 30} {light 0}]" {
		t.Errorf("stored near totals %v, want busy 30 and light 0", totals)
	}
	got, err := f.recent.For(ctx, []string{"light", "busy"})
	if err != nil {
		t.Fatal(err)
	}
	if got["light"].NearLimit() || got["light"].TotalNear != 3 || !got["busy"].NearLimit() {
		t.Errorf("light %+v, busy %+v: want only busy near its limit, light's 3 near calls kept per minute", got["light"], got["busy"])
	}
}
