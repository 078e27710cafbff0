package redisscript_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// BenchmarkReserveCommandTime measures what a bucket's reserve costs Redis
// per call (usec_per_call of INFO commandstats), as
// BenchmarkAcquireCommandTime does, on a private redis-server: the acquire
// script as the client sends it (protocol 3) on a bucket without a
// reserve (the plain acquire), on a bucket with one for a request not
// marked critical and for a critical one; the same for a key of a keyed
// bucket. Every call is granted (the buckets never run dry), the scripts
// take turns in each round, each figure is the best round. With
// SLUICE_ACQUIRE_LUA_BEFORE (SLUICE_KEYED_ACQUIRE_LUA_BEFORE) set to a file
// holding an older acquire (keyed acquire) script, that one runs too (as
// the client sent it, protocol 2), on the bucket without a reserve. Run it
// alone:
//
//	go test -run '^$' -bench ReserveCommandTime -benchtime 1x ./internal/redisscript/
func BenchmarkReserveCommandTime(b *testing.B) {
	srv := testenv.StartRedis(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ks := redisscript.Keyspace{Prefix: "cost:"}
	cfg := func(name string, reserve int64) redisscript.Config {
		return redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: 1_000_000_000,
			PermitsMicro: 1_000_000_000_000, PeriodSeconds: 1, Apps: []string{"app"}, Reserve: reserve}
	}
	for _, c := range []redisscript.Config{cfg("plain", 0), cfg("kept", 100_000)} {
		if _, err := redisscript.Apply(ctx, rdb, ks, c, false); err != nil {
			b.Fatal(err)
		}
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
	type script struct {
		name, sha string
		keys      []string
		args      []any
	}
	kp, kk := ks.Keyed("plain", "user-1"), ks.Keyed("kept", "user-1")
	scripts := []script{
		{"plain", acq, []string{ks.Bucket("plain")}, []any{"app", "1", "3"}},
		{"reserve", acq, []string{ks.Bucket("kept")}, []any{"app", "1", "3"}},
		{"critical", acq, []string{ks.Bucket("kept")}, []any{"app", "1", "3", "1"}},
		{"keyed-plain", keyed, []string{kp.Config, kp.State}, []any{"app", "1", "user-1", "3"}},
		{"keyed-reserve", keyed, []string{kk.Config, kk.State}, []any{"app", "1", "user-1", "3"}},
		{"keyed-critical", keyed, []string{kk.Config, kk.State}, []any{"app", "1", "user-1", "3", "1"}},
	}
	if before := os.Getenv("SLUICE_ACQUIRE_LUA_BEFORE"); before != "" {
		src, err := os.ReadFile(before)
		if err != nil {
			b.Fatal(err)
		}
		sha, err := rdb.ScriptLoad(ctx, string(src)).Result()
		if err != nil {
			b.Fatal(err)
		}
		scripts = append(scripts, script{"before", sha, []string{ks.Bucket("plain")}, []any{"app", "1", "2"}})
	}
	if before := os.Getenv("SLUICE_KEYED_ACQUIRE_LUA_BEFORE"); before != "" {
		src, err := os.ReadFile(before)
		if err != nil {
			b.Fatal(err)
		}
		sha, err := rdb.ScriptLoad(ctx, string(src)).Result()
		if err != nil {
			b.Fatal(err)
		}
		scripts = append(scripts, script{"keyed-before", sha, []string{kp.Config, kp.State}, []any{"app", "1", "user-1", "2"}})
	}
	const calls, batch, rounds = 4_000, 100, 30
	best := map[string]float64{}
	for range b.N {
		for range rounds {
			for _, s := range scripts {
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				pipe := rdb.Pipeline()
				for sent := 0; sent < calls; sent += batch {
					for range batch {
						pipe.EvalSha(ctx, s.sha, s.keys, s.args...)
					}
					cmds, err := pipe.Exec(ctx)
					if err != nil {
						b.Fatalf("%s: %v", s.name, err)
					}
					if v, _ := cmds[0].(*redis.Cmd).Int64Slice(); len(v) < 7 || v[0] != int64(redisscript.Allowed) {
						b.Fatalf("%s answered %v", s.name, v)
					}
				}
				us, err := testenv.EvalshaMicrosPerCall(ctx, rdb)
				if err != nil {
					b.Fatal(err)
				}
				if v, ok := best[s.name]; !ok || us < v {
					best[s.name] = us
				}
			}
		}
	}
	for _, s := range scripts {
		b.ReportMetric(best[s.name], s.name+"-µs/call")
	}
	b.ReportMetric(best["reserve"]/best["plain"], "reserve/plain")
	b.ReportMetric(best["critical"]/best["plain"], "critical/plain")
	b.ReportMetric(best["keyed-reserve"]/best["keyed-plain"], "keyed-reserve/plain")
	b.ReportMetric(best["keyed-critical"]/best["keyed-plain"], "keyed-critical/plain")
	if v, ok := best["before"]; ok {
		b.ReportMetric(best["plain"]/v, "plain/before")
		b.ReportMetric(best["reserve"]/v, "reserve/before")
		b.ReportMetric(best["critical"]/v, "critical/before")
	}
	if v, ok := best["keyed-before"]; ok {
		b.ReportMetric(best["keyed-plain"]/v, "keyed-plain/before")
		b.ReportMetric(best["keyed-reserve"]/v, "keyed-reserve/before")
		b.ReportMetric(best["keyed-critical"]/v, "keyed-critical/before")
	}
}
