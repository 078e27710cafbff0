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

// scriptCost measures what one call costs Redis for Sluice's acquire and
// the plain script: the time inside the script (usec_per_call of INFO
// commandstats, EVALSHA's and FCALL's) and redis-server's whole CPU time
// per call (INFO cpu: parsing, the script, replies and system calls),
// with calls sent 100 to a pipeline and one per round trip. Sluice's
// acquire is sent as the client sends it: FCALL of the acquire function
// where the library loads, and then also as EVALSHA, to show what the
// function saves. Each figure is the best of rounds, the cases taking
// turns. It resets Redis's statistics, so it runs only against a server
// this program started.
func scriptCost(ctx context.Context, out io.Writer, opts *redis.Options, w workload, calls, rounds int) error {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := defineBuckets(ctx, rdb, w); err != nil {
		return err
	}
	ks := redisscript.Keyspace{Prefix: w.prefix}
	type script struct {
		name string
		send func(redis.Pipeliner)
	}
	evalsha := func(sha string, keys []string, args ...any) func(redis.Pipeliner) {
		return func(pipe redis.Pipeliner) { pipe.EvalSha(ctx, sha, keys, args...) }
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
	acqKeys, acqArgs := []string{ks.Bucket(w.bucketName(0))}, []any{benchApp, "1", redisscript.ProtocolReserve}
	scripts := []script{{"sluice acquire", evalsha(acqSHA, acqKeys, acqArgs...)}}
	if loadAcquireFunction(ctx, rdb) {
		scripts = []script{
			{"sluice acquire", func(pipe redis.Pipeliner) {
				pipe.FCall(ctx, acquireFunction, acqKeys, acqArgs...)
			}},
			{"sluice evalsha", evalsha(acqSHA, acqKeys, acqArgs...)},
		}
	}
	scripts = append(scripts,
		script{"plain", evalsha(plainSHA, []string{w.prefix + "pl:{" + w.bucketName(0) + "}"}, w.capacity, w.rate, 1)})
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
						s.send(pipe)
					}
					if _, err := pipe.Exec(ctx); err != nil {
						return fmt.Errorf("%s: %w", s.name, err)
					}
				}
				server := float64(cpu()-cpu0) / float64(time.Microsecond) / float64(calls)
				in, err := testenv.ScriptMicrosPerCall(ctx, rdb)
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
