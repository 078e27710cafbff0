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
	kp, kk := ks.Keyed("plain", "user-1"), ks.Keyed("kept", "user-1")
	cases := []testenv.ScriptCost{
		{Name: "plain", Send: testenv.EvalSha(ctx, acq, []string{ks.Bucket("plain")}, "app", "1", "3")},
		{Name: "reserve", Send: testenv.EvalSha(ctx, acq, []string{ks.Bucket("kept")}, "app", "1", "3")},
		{Name: "critical", Send: testenv.EvalSha(ctx, acq, []string{ks.Bucket("kept")}, "app", "1", "3", "1")},
		{Name: "keyed-plain", Send: testenv.EvalSha(ctx, keyed, []string{kp.Config, kp.State}, "app", "1", "user-1", "3")},
		{Name: "keyed-reserve", Send: testenv.EvalSha(ctx, keyed, []string{kk.Config, kk.State}, "app", "1", "user-1", "3")},
		{Name: "keyed-critical", Send: testenv.EvalSha(ctx, keyed, []string{kk.Config, kk.State}, "app", "1", "user-1", "3", "1")},
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
		cases = append(cases, testenv.ScriptCost{Name: "before", Send: testenv.EvalSha(ctx, sha, []string{ks.Bucket("plain")}, "app", "1", "2")})
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
		cases = append(cases, testenv.ScriptCost{Name: "keyed-before", Send: testenv.EvalSha(ctx, sha, []string{kp.Config, kp.State}, "app", "1", "user-1", "2")})
	}
	best := measureCosts(ctx, b, rdb, cases)
	for _, c := range cases {
		b.ReportMetric(best[c.Name], c.Name+"-µs/call")
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
