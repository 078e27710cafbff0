package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// kindsGoal is the most a call of another kind may cost Redis, as a
// multiple of a plain acquire's time inside the script.
const kindsGoal = 1.2

// kindCase is one call measured by kindsCost: what is sent at index i of
// a round's calls (every such call must be granted).
type kindCase struct {
	name string
	send func(pipe redis.Pipeliner, i int)
	base string // the case of the ratio: "" for the plain acquire
	note string // printed beside the figure
}

// kindsCost measures Redis's time inside the script per call (usec_per_call
// of INFO commandstats) of every kind of limit against a plain acquire, as
// the client sends them, calls sent 100 to a pipeline: a plain and a keyed
// acquire of a token bucket (the keyed cases' base), an acquire of a quota and of a keyed quota
// (an hourly table, the longest: its bisection is the deepest), a slot
// take of a concurrency limit (distinct ids, then their releases as the
// slot release case) and a take and release of one id in turn (the
// take+release pair, per call), an acquire of a bucket with a reserve not
// marked critical and a critical one; a slot take and release of a key of
// a keyed concurrency limit. Each concurrency limit holds 100
// other slots meanwhile, as under load. The cases take turns within each
// round, so that load from the rest of the machine falls on all of them;
// each figure is the best round. With slotBefore (a file holding another
// build of the slot script) its takes, releases and pairs run too. It
// resets Redis's statistics, so it runs only against a server this
// program started.
func kindsCost(ctx context.Context, out io.Writer, opts *redis.Options, calls, rounds int, slotBefore string) error {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ks := redisscript.Keyspace{Prefix: "kinds:"}
	tm, err := rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	bucket := func(name string, reserve int64) redisscript.Config {
		return redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: 1_000_000_000,
			PermitsMicro: 1_000_000_000_000, PeriodSeconds: 1, Apps: []string{benchApp}, Reserve: reserve}
	}
	quotaCfg := redisscript.Config{Name: "quota", ID: 1, Version: 1, Capacity: 1_000_000_000, Apps: []string{benchApp},
		Kind: redisscript.KindQuota, Bounds: quota.Table(quota.Hour, time.UTC, tm)}
	slotCfg := redisscript.Config{Name: "slots", ID: 1, Version: 1, Capacity: 1_000_000_000, Apps: []string{benchApp},
		Kind: redisscript.KindConcurrency, SlotMillis: redisscript.MaxSlotMillis}
	for _, c := range []redisscript.Config{bucket("bucket", 0), bucket("kept", 100_000), quotaCfg, slotCfg} {
		if _, err := redisscript.Apply(ctx, rdb, ks, c, true); err != nil {
			return fmt.Errorf("define %s: %w", c.Name, err)
		}
		c.Name = "k" + c.Name
		if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, c, true); err != nil {
			return fmt.Errorf("define %s: %w", c.Name, err)
		}
	}
	// The token scripts run as the client runs them: FCALL of their
	// functions in one library.
	if err := rdb.FunctionLoadReplace(ctx, redisscript.Functions.Source).Err(); err != nil {
		return fmt.Errorf("load the function library: %w", err)
	}
	load := func(src string) (string, error) { return rdb.ScriptLoad(ctx, src).Result() }
	fn := redisscript.Functions.Function
	acq, keyed, slot, keyedSlot := fn(redisscript.AcquireScript), fn(redisscript.KeyedAcquireScript),
		fn(redisscript.SlotScript), fn(redisscript.KeyedSlotScript)
	kslotKeys := ks.SlotKeys("kslots", "user-1")
	before := ""
	if slotBefore != "" {
		src, err := os.ReadFile(slotBefore)
		if err != nil {
			return err
		}
		if before, err = load(string(src)); err != nil {
			return err
		}
	}
	slotKeys := ks.SlotKeys(slotCfg.Name, "")
	for i := range 100 {
		if _, err := redisscript.RunSlot(ctx, rdb, ks, slotCfg.Name, "", benchApp, redisscript.SlotTake, "held-"+strconv.Itoa(i)); err != nil {
			return err
		}
	}
	ids := make([]string, calls)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}
	kb, kq := ks.Keyed("kbucket", "user-1"), ks.Keyed("kquota", "user-1")
	proto := redisscript.ProtocolReserve
	fcall := func(name string, keys []string, args ...any) func(redis.Pipeliner, int) {
		return testenv.FCall(ctx, name, keys, args...)
	}
	// call sends a call of the function name, or of the script of SHA1
	// sha when name is "" (the -slot-lua-before build).
	call := func(pipe redis.Pipeliner, name, sha string, keys []string, args ...any) {
		if name == "" {
			pipe.EvalSha(ctx, sha, keys, args...)
			return
		}
		pipe.FCall(ctx, name, keys, args...)
	}
	// slotSend sends op of slot ids[i] (of key, for a keyed limit).
	slotSend := func(name, sha string, keys []string, op redisscript.SlotOp, key string) func(redis.Pipeliner, int) {
		return func(pipe redis.Pipeliner, i int) {
			call(pipe, name, sha, keys, redisscript.SlotArgs(benchApp, op, ids[i], key)...)
		}
	}
	slotCases := func(suffix, name, sha string) []kindCase {
		return []kindCase{
			{name: "slot take" + suffix, send: slotSend(name, sha, slotKeys, redisscript.SlotTake, "")},
			{name: "slot release" + suffix, send: slotSend(name, sha, slotKeys, redisscript.SlotRelease, ""),
				note: "releases the takes just before"},
			{name: "take+release" + suffix, send: func(pipe redis.Pipeliner, i int) {
				op := redisscript.SlotTake
				if i%2 == 1 {
					op = redisscript.SlotRelease
				}
				call(pipe, name, sha, slotKeys, redisscript.SlotArgs(benchApp, op, ids[i/2], "")...)
			}, note: "per call: a take and a release of one id in turn"},
		}
	}
	cases := []kindCase{
		{name: "acquire", send: fcall(acq, []string{ks.Bucket("bucket")}, benchApp, "1", proto)},
		{name: "keyed acquire", send: fcall(keyed, []string{kb.Config, kb.State}, benchApp, "1", "user-1", proto),
			note: "the base of the keyed cases"},
		{name: "quota", send: fcall(acq, []string{ks.Bucket("quota")}, benchApp, "1", proto)},
		{name: "keyed quota", send: fcall(keyed, []string{kq.Config, kq.State}, benchApp, "1", "user-1", proto),
			base: "keyed acquire"},
	}
	cases = append(cases, slotCases("", slot, "")...)
	cases = append(cases,
		kindCase{name: "keyed slot take", base: "keyed acquire", send: slotSend(keyedSlot, "", kslotKeys, redisscript.SlotTake, "user-1")},
		kindCase{name: "keyed slot release", base: "keyed acquire",
			send: slotSend(keyedSlot, "", kslotKeys, redisscript.SlotRelease, "user-1")})
	cases = append(cases,
		kindCase{name: "reserve", send: fcall(acq, []string{ks.Bucket("kept")}, benchApp, "1", proto),
			note: "a bucket with a reserve, not critical"},
		kindCase{name: "critical", send: fcall(acq, []string{ks.Bucket("kept")}, benchApp, "1", proto, "1"),
			note: "the same bucket, critical"})
	if before != "" {
		cases = append(cases, slotCases(" (before, EVALSHA)", "", before)...)
	}

	costs := make([]testenv.ScriptCost, len(cases))
	for i, c := range cases {
		costs[i] = testenv.ScriptCost{Name: c.name, Send: c.send}
	}
	best, err := testenv.BestMicrosPerCall(ctx, rdb, costs, calls, rounds)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nRedis time inside the function per call (FCALL, as the client sends it), by kind (best of %d rounds of %d calls, 100 to a pipeline, cases in turn):\n",
		rounds, calls)
	fmt.Fprintf(out, "%-26s %10s %9s  %s\n", "call", "µs/call", "ratio", "(to the acquire; keyed cases to the keyed acquire)")
	for _, c := range cases {
		base := c.base
		if base == "" {
			base = "acquire"
		}
		ratio := best[c.name] / best[base]
		mark := ""
		if c.name != "acquire" && c.name != "keyed acquire" {
			mark = fmt.Sprintf("ok (<= %.1fx)", kindsGoal)
			if ratio > kindsGoal {
				mark = fmt.Sprintf("OVER %.1fx", kindsGoal)
			}
		}
		if c.note != "" {
			mark += "  " + c.note
		}
		fmt.Fprintf(out, "%-26s %10.3f %8.2fx  %s\n", c.name, best[c.name], ratio, mark)
	}
	return nil
}
