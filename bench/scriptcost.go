package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// scriptCost measures what one call costs Redis for Sluice's acquire
// script and the plain script: the time inside the script
// (usec_per_call of INFO commandstats) and redis-server's whole CPU time
// per call (INFO cpu: parsing, the script, replies and system calls),
// with calls sent 100 to a pipeline and one per round trip. Each figure
// is the best of rounds, the scripts taking turns. It resets Redis's
// statistics, so it runs only against a server this program started.
func scriptCost(ctx context.Context, out io.Writer, opts *redis.Options, w workload, calls, rounds int) error {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := defineBuckets(ctx, rdb, w); err != nil {
		return err
	}
	ks := redisscript.Keyspace{Prefix: w.prefix}
	type script struct {
		name, sha string
		keys      []string
		args      []any
	}
	acqSHA, err := rdb.ScriptLoad(ctx, redisscript.AcquireScript.Source()).Result()
	if err != nil {
		return err
	}
	plainSHA, err := rdb.ScriptLoad(ctx, plainSource).Result()
	if err != nil {
		return err
	}
	// Bucket 0 has id 1 and version 1 (defineBuckets); its rate is w.rate
	// per second, so permits_micro is w.rate x 10^6 over a period of 1 s.
	scripts := []script{
		{"sluice acquire", acqSHA, []string{ks.Bucket(w.bucketName(0))}, []any{benchApp, "1"}},
		{"plain", plainSHA, []string{w.prefix + "pl:{" + w.bucketName(0) + "}"}, []any{w.capacity, w.rate, 1}},
	}
	cpu, closeCPU := redisCPUFunc(ctx, opts)
	defer closeCPU()
	type cost struct{ inScript, server float64 }
	best := map[string]*cost{}
	for range rounds {
		for _, batch := range []int{100, 1} {
			for _, s := range scripts {
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					return err
				}
				cpu0 := cpu()
				pipe := rdb.Pipeline()
				for sent := 0; sent < calls; sent += batch {
					for range batch {
						pipe.EvalSha(ctx, s.sha, s.keys, s.args...)
					}
					if _, err := pipe.Exec(ctx); err != nil {
						return fmt.Errorf("%s: %w", s.name, err)
					}
				}
				server := float64(cpu()-cpu0) / float64(time.Microsecond) / float64(calls)
				in, err := testenv.EvalshaMicrosPerCall(ctx, rdb)
				if err != nil {
					return err
				}
				k := fmt.Sprintf("%s|%d", s.name, batch)
				if b := best[k]; b == nil {
					best[k] = &cost{in, server}
				} else {
					b.inScript, b.server = min(b.inScript, in), min(b.server, server)
				}
			}
		}
	}
	fmt.Fprintf(out, "\nRedis time per call (best of %d rounds of %d calls):\n", rounds, calls)
	fmt.Fprintf(out, "%-16s %22s %26s %26s\n", "script", "inside the script", "redis CPU, 100/pipeline", "redis CPU, 1/round trip")
	for _, s := range scripts {
		p, one := best[s.name+"|100"], best[s.name+"|1"]
		fmt.Fprintf(out, "%-16s %20.2fµs %24.2fµs %24.2fµs\n", s.name, min(p.inScript, one.inScript), p.server, one.server)
	}
	return nil
}
