package redisscript_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

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
	slots := redisscript.Config{Name: "slots"}
	if err := rdb.HSet(ctx, ks.Bucket("slots"), "id", 2, "version", 1, "capacity", 1000000000, "permits", 1, "period", 1, "apps", ",app,", "kind", "concurrency", "slot_ms", redisscript.MaxSlotMillis, "shadow", 0).Err(); err != nil {
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
	slotSrc := redisscript.SlotScript.Source()
	if alt := os.Getenv("SLUICE_SLOT_LUA"); alt != "" {
		raw, err := os.ReadFile(alt)
		if err != nil {
			b.Fatal(err)
		}
		slotSrc = string(raw)
	}
	slotSHA, err := rdb.ScriptLoad(ctx, slotSrc).Result()
	if err != nil {
		b.Fatal(err)
	}
	slotKeys := ks.SlotKeys(slots.Name, "")
	const calls, batch, rounds = 4_000, 100, 30
	ids := make([]string, calls)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}
	type run struct {
		name string
		send func(pipe redis.Pipeliner, i int)
	}
	runs := []run{
		{"acquire", func(pipe redis.Pipeliner, i int) {
			pipe.EvalSha(ctx, acqSHA, []string{ks.Bucket(cfg.Name)}, "app", "1", "2")
		}},
		{"pair", func(pipe redis.Pipeliner, i int) {
			op := redisscript.SlotTake
			if i%2 == 1 {
				op = redisscript.SlotRelease
			}
			pipe.EvalSha(ctx, slotSHA, slotKeys, redisscript.SlotArgs("app", op, ids[i/2], "")...)
		}},
		{"take", func(pipe redis.Pipeliner, i int) {
			pipe.EvalSha(ctx, slotSHA, slotKeys, redisscript.SlotArgs("app", redisscript.SlotTake, ids[i], "")...)
		}},
		{"release", func(pipe redis.Pipeliner, i int) {
			pipe.EvalSha(ctx, slotSHA, slotKeys, redisscript.SlotArgs("app", redisscript.SlotRelease, ids[i], "")...)
		}},
	}
	best := map[string]float64{}
	for range b.N {
		for range rounds {
			for _, r := range runs {
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				pipe := rdb.Pipeline()
				for sent := 0; sent < calls; sent += batch {
					for i := sent; i < sent+batch; i++ {
						r.send(pipe, i)
					}
					cmds, err := pipe.Exec(ctx)
					if err != nil {
						b.Fatalf("%s: %v", r.name, err)
					}
					for _, c := range cmds {
						v, _ := c.(*redis.Cmd).Int64Slice()
						if len(v) < 7 || v[0] != 1 {
							b.Fatalf("%s answered %v", r.name, v)
						}
					}
				}
				us, err := testenv.EvalshaMicrosPerCall(ctx, rdb)
				if err != nil {
					b.Fatal(err)
				}
				if v, ok := best[r.name]; !ok || us < v {
					best[r.name] = us
				}
			}
		}
	}
	b.ReportMetric(best["acquire"], "acquire-µs/call")
	b.ReportMetric(best["pair"], "take+release-µs/call")
	b.ReportMetric(best["take"], "take-µs/call")
	b.ReportMetric(best["release"], "release-µs/call")
	b.ReportMetric(best["pair"]/best["acquire"], "ratio")
}
