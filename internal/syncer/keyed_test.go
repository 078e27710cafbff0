package syncer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

func (e *env) createKeyed(t testing.TB, name string, capacity int64, rate string) *buckets.Bucket {
	t.Helper()
	b := &buckets.Bucket{Name: name, OwnerApp: ownerApp, MaxPermits: capacity, Rate: mustRate(t, rate), Keyed: true}
	if err := e.store.Create(context.Background(), actor, b); err != nil {
		t.Fatalf("create keyed bucket %s: %v", name, err)
	}
	return b
}

func (e *env) createOverride(t testing.TB, bucket string, m buckets.Match, key string, capacity int64) *buckets.Override {
	t.Helper()
	o := &buckets.Override{Bucket: bucket, Match: m, Key: key, MaxPermits: capacity, Rate: mustRate(t, "1/h")}
	if err := e.store.CreateOverride(context.Background(), actor, o); err != nil {
		t.Fatalf("create override %q: %v", key, err)
	}
	return o
}

// limit is the capacity Redis applies to key, or a negative code.
func (e *env) limit(t testing.TB, bucket, key string) int64 {
	t.Helper()
	a, err := redisscript.AcquireKey(context.Background(), e.rdb, e.ks, bucket, key, ownerApp, 1)
	if err != nil {
		t.Fatalf("acquire %s[%q]: %v", bucket, key, err)
	}
	if a.Code < 0 && a.Code != redisscript.ExceedsCapacity {
		return int64(a.Code)
	}
	return a.Capacity
}

// keyedDiff lists how Redis differs from MySQL for keyed bucket name: the
// config of every group and every override, checked through the limits
// the acquire script applies to sample keys.
func (e *env) keyedDiff(t testing.TB, name string) []string {
	t.Helper()
	ctx := context.Background()
	b, err := e.store.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for g := range redisscript.KeyGroups {
		st, err := redisscript.ReadGroup(ctx, e.rdb, e.ks, name, g)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Exists || !sameConfig(st.Config, ConfigOf(b)) {
			out = append(out, fmt.Sprintf("group %d: %+v", g, st.Config))
		}
		if st.Lens != st.WantLens() {
			out = append(out, fmt.Sprintf("group %d lens %q, want %q", g, st.Lens, st.WantLens()))
		}
	}
	return out
}

func TestKeyedEventsApplied(t *testing.T) {
	e := newEnv(t, nil)
	w := e.worker(Config{})
	e.createKeyed(t, "api", 5, "1/h")
	created := e.pending(t)
	exact := e.createOverride(t, "api", buckets.MatchExact, "tenant:acme", 50)
	prefix := e.createOverride(t, "api", buckets.MatchPrefix, "tenant:", 20)
	e.createOverride(t, "api", buckets.MatchPrefix, "tenant:acme", 30)
	syncOnce(t, w)
	if d := e.keyedDiff(t, "api"); len(d) > 0 {
		t.Fatalf("after sync: %v", d)
	}
	for key, want := range map[string]int64{"tenant:acme": 50, "tenant:acme-eu": 30, "tenant:x": 20, "bob": 5} {
		if got := e.limit(t, "api", key); got != want {
			t.Errorf("limit of %q = %d; want %d", key, got, want)
		}
	}
	// A keyed bucket has no plain bucket hash, so a plain acquire fails.
	if st := e.read(t, "api"); st.Exists {
		t.Errorf("keyed bucket has a plain hash: %+v", st)
	}

	// Edit and delete: the keys follow; replayed events change nothing.
	exact.MaxPermits = 60
	if err := e.store.UpdateOverride(context.Background(), actor, exact); err != nil {
		t.Fatal(err)
	}
	if err := e.store.DeleteOverride(context.Background(), actor, "api", prefix.ID, 0); err != nil {
		t.Fatal(err)
	}
	evs := e.pending(t)
	syncOnce(t, w)
	e.replay(t, evs...)
	syncOnce(t, w)
	for key, want := range map[string]int64{"tenant:acme": 60, "tenant:acme-eu": 30, "tenant:x": 5} {
		if got := e.limit(t, "api", key); got != want {
			t.Errorf("after edits, limit of %q = %d; want %d", key, got, want)
		}
	}

	// Deleting the bucket removes every group; a stale upsert after it
	// does not bring it back.
	e.remove(t, "api")
	syncOnce(t, w)
	e.replay(t, created...)
	e.replay(t, evs...)
	syncOnce(t, w)
	if got := e.limit(t, "api", "tenant:acme"); got != int64(redisscript.UnknownBucket) {
		t.Fatalf("after delete and stale replays: %d", got)
	}
	if n, _ := e.rdb.Exists(context.Background(), e.ks.KeyGroup("api", 0), e.ks.KeyGroup("api", 1)).Result(); n != 0 {
		t.Fatalf("%d group keys left", n)
	}
}

// replayOverrides writes override events again, as a redelivery would.
func (e *env) replayOverrides(t testing.TB, evs ...buckets.Event) {
	t.Helper()
	for _, ev := range evs {
		if ev.Override == nil {
			continue
		}
		if _, err := e.db.Exec(`INSERT INTO bucket_events (bucket_id, bucket_name, op, version, keyed, override_id,
			override_match, override_key, created_at) VALUES (?, ?, ?, ?, TRUE, ?, ?, ?, ?)`,
			ev.BucketID, ev.Name, string(ev.Op), ev.Version, ev.Override.ID, string(ev.Override.Match),
			[]byte(ev.Override.Key), ev.CreatedAt); err != nil {
			t.Fatalf("replay event: %v", err)
		}
	}
}

func TestKeyedReconcileRepairs(t *testing.T) {
	e := newEnv(t, nil)
	w := e.worker(Config{})
	ctx := context.Background()
	e.createKeyed(t, "api", 5, "1/h")
	e.createOverride(t, "api", buckets.MatchExact, "tenant:acme", 50)
	e.createOverride(t, "api", buckets.MatchPrefix, "tenant:", 20)
	gone := e.createKeyed(t, "old", 5, "1/h")
	syncOnce(t, w)

	// Lose half the groups and an exact override, corrupt a config, add
	// an override MySQL does not have, and drop the bucket "old" from
	// MySQL behind the worker's back (no event).
	for g := 0; g < redisscript.KeyGroups; g += 2 {
		if err := e.rdb.Del(ctx, e.ks.KeyGroup("api", g)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	k := e.ks.Keyed("api", "tenant:acme")
	if err := e.rdb.HDel(ctx, k.Config, "e:tenant:acme").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, e.ks.KeyGroup("api", 1), redisscript.FieldCapacity, "999").Err(); err != nil {
		t.Fatal(err)
	}
	bogus := redisscript.Override{Bucket: "api", BucketID: 1, ID: 9999, Version: 1, Match: redisscript.MatchExact,
		Key: "free-lunch", Capacity: 1000000, PermitsMicro: 1, PeriodSeconds: 1}
	b, _ := e.store.Get(ctx, "api")
	bogus.BucketID = b.ID
	if _, err := redisscript.ApplyOverride(ctx, e.rdb, e.ks, bogus, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(`DELETE FROM bucket_apps WHERE bucket_id = ?`, gone.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(`DELETE FROM buckets WHERE id = ?`, gone.ID); err != nil {
		t.Fatal(err)
	}

	rep, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v", rep)
	if rep.Missing != 1 || rep.Extra != 1 || rep.OverrideMissing < 1 || rep.OverrideExtra != 1 {
		t.Errorf("report %+v; want 1 missing, 1 extra bucket, missing overrides and 1 extra override", rep)
	}
	if d := e.keyedDiff(t, "api"); len(d) > 0 {
		t.Fatalf("after reconcile: %v", d)
	}
	for key, want := range map[string]int64{"tenant:acme": 50, "tenant:x": 20, "free-lunch": 5, "bob": 5} {
		if got := e.limit(t, "api", key); got != want {
			t.Errorf("limit of %q = %d; want %d", key, got, want)
		}
	}
	if got := e.limit(t, "old", "k"); got != int64(redisscript.UnknownBucket) {
		t.Errorf("bucket deleted from mysql still answers %d", got)
	}
	if members, _ := e.rdb.SMembers(ctx, e.ks.KeyedRegistry()).Result(); !slices.Equal(members, []string{"api"}) {
		t.Errorf("registry = %v", members)
	}
	// A second run finds nothing to do.
	rep, err = w.Reconcile(ctx)
	if err != nil || rep.Repaired() != 0 {
		t.Fatalf("second reconcile: %+v, %v", rep, err)
	}
}

// A key group whose prefix lengths were edited by hand no longer finds its
// prefix overrides; the reconcile rebuilds the lengths from the group's
// live prefix overrides.
func TestKeyedReconcileRepairsPrefixLengths(t *testing.T) {
	e := newEnv(t, nil)
	w := e.worker(Config{})
	ctx := context.Background()
	e.createKeyed(t, "api", 5, "1/h")
	e.createOverride(t, "api", buckets.MatchPrefix, "tenant:", 20)
	syncOnce(t, w)

	// The group of "tenant:acme" claims prefixes of 3 characters, none of
	// 7 ("tenant:"), and counts that match neither.
	k := e.ks.Keyed("api", "tenant:acme")
	if err := e.rdb.HSet(ctx, k.Config, redisscript.FieldLens, "3,", "#3", "2", "#7", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if got := e.limit(t, "api", "tenant:acme"); got != 5 {
		t.Fatalf("with corrupt lengths, limit of %q = %d; want the bucket's 5", "tenant:acme", got)
	}

	if _, err := w.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := redisscript.ReadGroup(ctx, e.rdb, e.ks, "api", k.Group)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lens != "7," || st.WantLens() != "7," {
		t.Errorf("group %d lens %q; want \"7,\" (its prefix overrides call for %q)", k.Group, st.Lens, st.WantLens())
	}
	counts, err := e.rdb.HMGet(ctx, k.Config, "#3", "#7").Result()
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] != nil || counts[1] != "1" {
		t.Errorf("group %d counts #3 = %v, #7 = %v; want none and 1", k.Group, counts[0], counts[1])
	}
	if d := e.keyedDiff(t, "api"); len(d) > 0 {
		t.Errorf("after reconcile: %v", d)
	}
	if got := e.limit(t, "api", "tenant:acme"); got != 20 {
		t.Errorf("after reconcile, limit of %q = %d; want the override's 20", "tenant:acme", got)
	}
}

// 100,000 exact overrides of one bucket: the reconcile writes them all
// after Redis lost them, then compares them without writing anything.
func TestKeyedReconcileManyOverrides(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 overrides")
	}
	e := newEnv(t, nil)
	w := e.worker(Config{})
	ctx := context.Background()
	b := e.createKeyed(t, "api", 5, "1/h")
	const n = 100_000
	for start := 0; start < n; start += 2000 {
		var rows []string
		var args []any
		for i := start; i < min(n, start+2000); i++ {
			rows = append(rows, "(?, 'exact', ?, ?, 1, 3600, 1, 'seed', NOW(6), 'seed', NOW(6))")
			args = append(args, b.ID, fmt.Sprintf("user-%06d", i), 10+i%1000)
		}
		if _, err := e.db.Exec(`INSERT INTO bucket_overrides (bucket_id, match_kind, override_key, max_permits,
			rate_permits, rate_period_seconds, version, created_by, created_at, updated_by, updated_at) VALUES `+
			strings.Join(rows, ","), args...); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	rep, err := w.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reconcile writing %d overrides: %v", n, time.Since(start))
	if rep.OverrideMissing != n {
		t.Fatalf("report %+v; want %d missing overrides", rep, n)
	}
	start = time.Now()
	rep, err = w.Reconcile(ctx)
	if err != nil || rep.Repaired() != 0 {
		t.Fatalf("second reconcile: %+v, %v", rep, err)
	}
	t.Logf("reconcile comparing %d overrides: %v", n, time.Since(start))
	for range 20 {
		i := rand.IntN(n)
		if got := e.limit(t, "api", fmt.Sprintf("user-%06d", i)); got != int64(10+i%1000) {
			t.Fatalf("limit of user-%06d = %d; want %d", i, got, 10+i%1000)
		}
	}
}

// An override edited under load: its keys follow the new limit once the
// worker applies the event, other keys keep theirs. Propagation times are
// logged; SLUICE_SOAK=1 also asserts a p99 under one second.
func TestOverrideEditPropagates(t *testing.T) {
	e := newEnv(t, nil)
	w := e.worker(Config{PollInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.createKeyed(t, "api", 5, "1/h")
	o := e.createOverride(t, "api", buckets.MatchExact, "tenant:acme", 100)
	p := e.createOverride(t, "api", buckets.MatchPrefix, "vip:", 100)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if !eventually(10*time.Second, func() bool { return e.limit(t, "api", "tenant:acme") == 100 }) {
		t.Fatal("override never applied")
	}

	// Load: other keys keep taking tokens meanwhile.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go func() {
		for i := 0; loadCtx.Err() == nil; i++ {
			_, _ = redisscript.AcquireKey(loadCtx, e.rdb, e.ks, "api", fmt.Sprintf("k%d", i%100), ownerApp, 1)
		}
	}()

	var lags []time.Duration
	for i := range 10 {
		ov := o
		if i%2 == 1 {
			ov = p
		}
		ov.MaxPermits = int64(200 + i)
		edited := time.Now()
		if err := e.store.UpdateOverride(context.Background(), actor, ov); err != nil {
			t.Fatal(err)
		}
		key := "tenant:acme"
		if ov == p {
			key = "vip:42"
		}
		if !eventually(10*time.Second, func() bool { return e.limit(t, "api", key) == ov.MaxPermits }) {
			t.Fatalf("edit %d never applied", i)
		}
		lags = append(lags, time.Since(edited))
		if got := e.limit(t, "api", "someone-else"); got != 5 {
			t.Fatalf("another key's limit moved to %d", got)
		}
	}
	slices.Sort(lags)
	p99 := lags[len(lags)-1]
	t.Logf("edit to effective: median %v, max %v over %d edits", lags[len(lags)/2], p99, len(lags))
	if os.Getenv("SLUICE_SOAK") == "1" && p99 > time.Second {
		t.Errorf("edit to effective took %v; want at most 1s", p99)
	}
}
