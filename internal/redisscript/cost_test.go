package redisscript_test

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// BenchmarkAcquireCommandTime measures Redis's time inside the acquire
// script per call (usec_per_call of INFO commandstats) against the
// minimal token bucket of bench/plain.lua, on a private redis-server, with
// calls sent 100 to a pipeline. The scripts take turns within each round,
// so that load from the rest of the machine falls on both; each figure is
// the best of the rounds. Run it alone:
//
//	go test -run '^$' -bench AcquireCommandTime -benchtime 1x ./internal/redisscript/
func BenchmarkAcquireCommandTime(b *testing.B) {
	ctx, rdb, ks, cfg, plainSHA := costSetup(b)
	src := redisscript.AcquireScript.Source()
	if alt := os.Getenv("SLUICE_ACQUIRE_LUA"); alt != "" {
		raw, err := os.ReadFile(alt)
		if err != nil {
			b.Fatal(err)
		}
		src = string(raw)
	}
	acqSHA, err := rdb.ScriptLoad(ctx, src).Result()
	if err != nil {
		b.Fatal(err)
	}
	if err := rdb.FunctionLoadReplace(ctx, redisscript.Functions.Source).Err(); err != nil {
		b.Fatal(err)
	}
	cases := []testenv.ScriptCost{
		{Name: "acquire", Send: testenv.FCall(ctx, redisscript.Functions.Function(redisscript.AcquireScript), []string{ks.Bucket(cfg.Name)}, "app", "1", "2")},
		{Name: "acquire-evalsha", Send: testenv.EvalSha(ctx, acqSHA, []string{ks.Bucket(cfg.Name)}, "app", "1", "2")},
		{Name: "plain", Send: testenv.EvalSha(ctx, plainSHA, []string{"cost:plain"}, 1_000_000_000, 1_000_000, 1)},
	}
	best := measureCosts(ctx, b, rdb, cases)
	b.ReportMetric(best["acquire"], "acquire-µs/call")
	b.ReportMetric(best["acquire-evalsha"], "acquire-evalsha-µs/call")
	b.ReportMetric(best["plain"], "plain-µs/call")
	b.ReportMetric(best["acquire"]/best["plain"], "ratio")
}

// BenchmarkIdleKeyBytes records Redis used_memory per idle key of a keyed
// bucket with a 16-character name: SLUICE_IDLE_KEYS keys (100,000 unless
// set) each take one token, then used_memory's growth over the count is
// the cost of one idle key. Run it alone:
//
//	go test -run '^$' -bench IdleKeyBytes -benchtime 1x ./internal/redisscript/
func BenchmarkIdleKeyBytes(b *testing.B) {
	count := 100_000
	if s := os.Getenv("SLUICE_IDLE_KEYS"); s != "" {
		var err error
		if count, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	srv := testenv.StartRedis(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	var ks redisscript.Keyspace
	// A token takes a million seconds to refill: no key expires during
	// the measurement.
	cfg := redisscript.Config{Name: "per-user-api-v01", ID: 1, Version: 1, Capacity: 100,
		PermitsMicro: 1, PeriodSeconds: 1, Apps: []string{"app"}}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, cfg, false); err != nil {
		b.Fatal(err)
	}
	sha, err := rdb.ScriptLoad(ctx, redisscript.KeyedAcquireScript.Source()).Result()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, cfg, false); err != nil {
			b.Fatal(err)
		}
		before, err := usedMemory(ctx, rdb)
		if err != nil {
			b.Fatal(err)
		}
		pipe := rdb.Pipeline()
		for i := range count {
			key := "user-" + strconv.Itoa(i)
			k := ks.Keyed(cfg.Name, key)
			pipe.EvalSha(ctx, sha, []string{k.Config, k.State}, "app", "1", key)
			if pipe.Len() == 1000 || i == count-1 {
				cmds, err := pipe.Exec(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range cmds {
					if v, _ := c.(*redis.Cmd).Int64Slice(); len(v) != 8 || v[0] != 1 {
						b.Fatalf("acquire answered %v", v)
					}
				}
			}
		}
		if n, err := rdb.DBSize(ctx).Result(); err != nil || n < int64(count) {
			b.Fatalf("dbsize %d, %v", n, err)
		}
		after, err := usedMemory(ctx, rdb)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(after-before)/float64(count), "bytes/idle-key")
	}
}

// usedMemory reads used_memory from INFO memory.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO")
}

// BenchmarkIdleKeyLayouts records what layouts of a key's state cost per
// idle key, written directly with SET ... PX (no script): the layout of
// earlier releases ("<prefix>k{<name>:<g>}" and 16 hex digits, "<id>
// <full_at>" in decimal), a 9-byte value, a 23-byte name
// ("<prefix>{<3 characters>}<11 base64url characters>"), and both. The
// 3-character tag here is drawn from the key's hash; a slot's tag costs
// the same. SLUICE_IDLE_KEYS sets the count (100,000 unless set).
//
//	go test -run '^$' -bench IdleKeyLayouts -benchtime 1x ./internal/redisscript/
func BenchmarkIdleKeyLayouts(b *testing.B) {
	count := 100_000
	if s := os.Getenv("SLUICE_IDLE_KEYS"); s != "" {
		var err error
		if count, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	srv := testenv.StartRedis(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	const fullAt = 1764570000123456.5
	textValue := func(i int) string { return "1 " + strconv.FormatFloat(fullAt+float64(i), 'g', 17, 64) }
	binValue := func(i int) string {
		return string(binary.LittleEndian.AppendUint64(nil, math.Float64bits(fullAt+float64(i)))) + "1"
	}
	oldKey := func(i int) string {
		key := "user-" + strconv.Itoa(i)
		sum := sha1.Sum([]byte(key))
		return "sluice:k{per-user-api-v01:" + strconv.Itoa(redisscript.GroupOf(key)) + "}" + hex.EncodeToString(sum[:8])
	}
	shortKey := func(i int) string {
		sum := sha1.Sum([]byte("user-" + strconv.Itoa(i)))
		return "sluice:{" + base64.RawURLEncoding.EncodeToString(sum[10:13])[:3] + "}" +
			base64.RawURLEncoding.EncodeToString(sum[:8])
	}
	layouts := []struct {
		name       string
		key, value func(int) string
	}{
		{"before", oldKey, textValue},
		{"binary-value", oldKey, binValue},
		{"short-key", shortKey, textValue},
		{"short-key+binary-value", shortKey, binValue},
	}
	for range b.N {
		for _, l := range layouts {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			before, err := usedMemory(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			pipe := rdb.Pipeline()
			for i := range count {
				pipe.Set(ctx, l.key(i), l.value(i), time.Hour+time.Duration(i%60_000)*time.Millisecond)
				if pipe.Len() == 1000 || i == count-1 {
					if _, err := pipe.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if n, err := rdb.DBSize(ctx).Result(); err != nil || n != int64(count) {
				b.Fatalf("%s: dbsize %d, %v", l.name, n, err)
			}
			after, err := usedMemory(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(after-before)/float64(count), l.name+"-bytes/key")
		}
	}
}

// BenchmarkSlotCommandTime measures Redis's time inside the slot script
// per call against the acquire script's, as BenchmarkAcquireCommandTime
// does: a take and a release of one slot id, alternating in the pipeline
// ("pair", the figure per call of a take+release), and takes of distinct
// ids then their releases ("take", "release"), on a limit that holds 100
// other slots meanwhile (its set is not empty, as under load). Run it
// alone:
//
//	go test -run '^$' -bench SlotCommandTime -benchtime 1x ./internal/redisscript/
func BenchmarkSlotCommandTime(b *testing.B) {
	srv := testenv.StartRedis(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ks := redisscript.Keyspace{Prefix: "cost:"}
	cfg := redisscript.Config{Name: "cost", ID: 1, Version: 1, Capacity: 1_000_000_000,
		PermitsMicro: 1_000_000_000_000, PeriodSeconds: 1, Apps: []string{"app"}}
	if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
		b.Fatal(err)
	}
	slots := redisscript.Config{Name: "slots", ID: 2, Version: 1, Capacity: 1_000_000_000, Apps: []string{"app"},
		Kind: redisscript.KindConcurrency, SlotMillis: redisscript.MaxSlotMillis}
	if _, err := redisscript.Apply(ctx, rdb, ks, slots, false); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if _, err := redisscript.RunSlot(ctx, rdb, ks, slots.Name, "", "app", redisscript.SlotTake, "held-"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	acqSHA, err := rdb.ScriptLoad(ctx, redisscript.AcquireScript.Source()).Result()
	if err != nil {
		b.Fatal(err)
	}
	slotSHA, err := rdb.ScriptLoad(ctx, redisscript.SlotScript.Source()).Result()
	if err != nil {
		b.Fatal(err)
	}
	slotKeys := ks.SlotKeys(slots.Name, "")
	ids := make([]string, costCalls)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}
	cases := []testenv.ScriptCost{
		{Name: "acquire", Send: testenv.EvalSha(ctx, acqSHA, []string{ks.Bucket(cfg.Name)}, "app", "1", "2")},
		{Name: "pair", Send: func(pipe redis.Pipeliner, i int) {
			op := redisscript.SlotTake
			if i%2 == 1 {
				op = redisscript.SlotRelease
			}
			pipe.EvalSha(ctx, slotSHA, slotKeys, redisscript.SlotArgs("app", op, ids[i/2], "")...)
		}},
		{Name: "take", Send: func(pipe redis.Pipeliner, i int) {
			pipe.EvalSha(ctx, slotSHA, slotKeys, redisscript.SlotArgs("app", redisscript.SlotTake, ids[i], "")...)
		}},
		{Name: "release", Send: func(pipe redis.Pipeliner, i int) {
			pipe.EvalSha(ctx, slotSHA, slotKeys, redisscript.SlotArgs("app", redisscript.SlotRelease, ids[i], "")...)
		}},
	}
	best := measureCosts(ctx, b, rdb, cases)
	b.ReportMetric(best["acquire"], "acquire-µs/call")
	b.ReportMetric(best["pair"], "take+release-µs/call")
	b.ReportMetric(best["take"], "take-µs/call")
	b.ReportMetric(best["release"], "release-µs/call")
	b.ReportMetric(best["pair"]/best["acquire"], "ratio")
}

// BenchmarkQuotaCommandTime measures Redis's time per call (usec_per_call
// of INFO commandstats) of the acquire script on a calendar quota against
// the same script on a token bucket, and of the keyed acquire script on a
// keyed quota against a keyed bucket, with the harness of
// BenchmarkAcquireCommandTime (calls sent 100 to a pipeline, the scripts
// taking turns, the best of the rounds). The quota's table is an hourly
// one, the longest a table gets (51 boundaries), so the bisection is at
// its deepest. Run it alone:
//
//	go test -run '^$' -bench QuotaCommandTime -benchtime 1x ./internal/redisscript/
func BenchmarkQuotaCommandTime(b *testing.B) {
	srv := testenv.StartRedis(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ks := redisscript.Keyspace{Prefix: "cost:"}
	tm, err := rdb.Time(ctx).Result()
	if err != nil {
		b.Fatal(err)
	}
	table := quota.Table(quota.Hour, time.UTC, tm)
	bucket := redisscript.Config{Name: "bucket", ID: 1, Version: 1, Capacity: 1_000_000_000,
		PermitsMicro: 1_000_000_000_000, PeriodSeconds: 1, Apps: []string{"app"}}
	quotaCfg := redisscript.Config{Name: "quota", ID: 1, Version: 1, Capacity: 1_000_000_000, Apps: []string{"app"},
		Kind: redisscript.KindQuota, Bounds: table}
	for _, c := range []redisscript.Config{bucket, quotaCfg} {
		if _, err := redisscript.Apply(ctx, rdb, ks, c, false); err != nil {
			b.Fatal(err)
		}
		c.Name = "k" + c.Name
		if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, c, false); err != nil {
			b.Fatal(err)
		}
	}
	acq, err := rdb.ScriptLoad(ctx, redisscript.AcquireScript.Source()).Result()
	if err != nil {
		b.Fatal(err)
	}
	keyed, err := rdb.ScriptLoad(ctx, redisscript.KeyedAcquireScript.Source()).Result()
	if err != nil {
		b.Fatal(err)
	}
	kb, kq := ks.Keyed("kbucket", "user-1"), ks.Keyed("kquota", "user-1")
	cases := []testenv.ScriptCost{
		{Name: "bucket", Send: testenv.EvalSha(ctx, acq, []string{ks.Bucket("bucket")}, "app", "1", "2")},
		{Name: "quota", Send: testenv.EvalSha(ctx, acq, []string{ks.Bucket("quota")}, "app", "1", "2")},
		{Name: "keyed-bucket", Send: testenv.EvalSha(ctx, keyed, []string{kb.Config, kb.State}, "app", "1", "user-1", "2")},
		{Name: "keyed-quota", Send: testenv.EvalSha(ctx, keyed, []string{kq.Config, kq.State}, "app", "1", "user-1", "2")},
	}
	best := measureCosts(ctx, b, rdb, cases)
	// Every call was granted: the quota counted them all.
	if st, err := redisscript.Read(ctx, rdb, ks, "quota"); err != nil || st.Used < costCalls {
		b.Fatalf("the quota counted %d: %v", st.Used, err)
	}
	for _, n := range []string{"bucket", "quota", "keyed-bucket", "keyed-quota"} {
		b.ReportMetric(best[n], n+"-µs/call")
	}
	b.ReportMetric(best["quota"]/best["bucket"], "ratio")
	b.ReportMetric(best["keyed-quota"]/best["keyed-bucket"], "keyed-ratio")
}

// costCalls and costRounds: the script-cost benchmarks send short rounds
// and many of them, since the best of many short samples is the figure
// least disturbed by other work on the machine.
const costCalls, costRounds = 4_000, 30

// measureCosts runs testenv.BestMicrosPerCall b.N times and returns the
// last run's figures.
func measureCosts(ctx context.Context, b *testing.B, rdb *redis.Client, cases []testenv.ScriptCost) map[string]float64 {
	b.Helper()
	var best map[string]float64
	for range b.N {
		var err error
		if best, err = testenv.BestMicrosPerCall(ctx, rdb, cases, costCalls, costRounds); err != nil {
			b.Fatal(err)
		}
	}
	return best
}

// BenchmarkKeyedCommandTime measures Redis's time inside the keyed acquire
// per call, as the client sends it (FCALL, protocol 3), against the plain
// acquire and the minimal token bucket of bench/plain.lua, the way
// BenchmarkAcquireCommandTime does: a thousand keys taken in turn, each
// state already written, as a busy keyed bucket's are. Run it alone:
//
//	go test -run '^$' -bench KeyedCommandTime -benchtime 1x ./internal/redisscript/
func BenchmarkKeyedCommandTime(b *testing.B) {
	ctx, rdb, ks, cfg, plainSHA := costSetup(b)
	kcfg := cfg
	kcfg.Name, kcfg.ID = "cost-keyed", 2
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, kcfg, false); err != nil {
		b.Fatal(err)
	}
	if err := rdb.FunctionLoadReplace(ctx, redisscript.Functions.Source).Err(); err != nil {
		b.Fatal(err)
	}
	keyedFn := redisscript.Functions.Function(redisscript.KeyedAcquireScript)
	type keyed struct {
		keys []string
		key  string
	}
	users := make([]keyed, 1000)
	for i := range users {
		key := "user-" + strconv.Itoa(i)
		k := ks.Keyed(kcfg.Name, key)
		users[i] = keyed{[]string{k.Config, k.State}, key}
	}
	cases := []testenv.ScriptCost{
		{Name: "keyed", Send: func(pipe redis.Pipeliner, i int) {
			u := users[i%len(users)]
			pipe.FCall(ctx, keyedFn, u.keys, "app", "1", u.key, "3")
		}},
		{Name: "acquire", Send: testenv.FCall(ctx, redisscript.Functions.Function(redisscript.AcquireScript), []string{ks.Bucket(cfg.Name)}, "app", "1", "3")},
		{Name: "plain", Send: testenv.EvalSha(ctx, plainSHA, []string{"cost:plain"}, 1_000_000_000, 1_000_000, 1)},
	}
	best := measureCosts(ctx, b, rdb, cases)
	b.ReportMetric(best["keyed"], "keyed-µs/call")
	b.ReportMetric(best["acquire"], "acquire-µs/call")
	b.ReportMetric(best["plain"], "plain-µs/call")
	b.ReportMetric(best["keyed"]/best["acquire"], "keyed/acquire")
}

// costSetup starts a private redis-server for a script-cost benchmark,
// with the bucket "cost" (granting every call) applied and the minimal
// script of bench/plain.lua loaded; the client is closed at the end.
func costSetup(b *testing.B) (context.Context, *redis.Client, redisscript.Keyspace, redisscript.Config, string) {
	b.Helper()
	plain, err := os.ReadFile("../../bench/plain.lua")
	if err != nil {
		b.Fatal(err)
	}
	srv := testenv.StartRedis(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { rdb.Close() })
	ks := redisscript.Keyspace{Prefix: "cost:"}
	cfg := redisscript.Config{Name: "cost", ID: 1, Version: 1, Capacity: 1_000_000_000,
		PermitsMicro: 1_000_000_000_000, PeriodSeconds: 1, Apps: []string{"app"}}
	if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
		b.Fatal(err)
	}
	plainSHA, err := rdb.ScriptLoad(ctx, string(plain)).Result()
	if err != nil {
		b.Fatal(err)
	}
	return ctx, rdb, ks, cfg, plainSHA
}
