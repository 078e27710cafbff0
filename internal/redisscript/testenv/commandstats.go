package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ScriptMicrosPerCall reads EVALSHA's and FCALL's usec_per_call from
// INFO commandstats, both counted together: the time Redis spent per
// script or function call, which the script-cost benchmarks compare.
func ScriptMicrosPerCall(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var calls, usec float64
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			rest, ok = strings.CutPrefix(line, "cmdstat_fcall:")
		}
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, err := strconv.ParseFloat(v, 64)
			switch {
			case err != nil:
			case k == "calls":
				calls += f
			case k == "usec":
				usec += f
			}
		}
	}
	if calls == 0 {
		return 0, fmt.Errorf("no evalsha or fcall in commandstats")
	}
	return usec / calls, nil
}

// FCall is a Send that adds the same FCALL every time.
func FCall(ctx context.Context, fn string, keys []string, args ...any) func(redis.Pipeliner, int) {
	return func(pipe redis.Pipeliner, _ int) { pipe.FCall(ctx, fn, keys, args...) }
}

// ScriptCost is one case of a script-cost measurement: Send adds the
// case's call number i to a pipeline (see EvalSha for a call that never
// changes).
type ScriptCost struct {
	Name string
	Send func(pipe redis.Pipeliner, i int)
}

// EvalSha is a Send that adds the same EVALSHA every time.
func EvalSha(ctx context.Context, sha string, keys []string, args ...any) func(redis.Pipeliner, int) {
	return func(pipe redis.Pipeliner, _ int) { pipe.EvalSha(ctx, sha, keys, args...) }
}

// BestMicrosPerCall measures Redis's time inside the script per call
// (ScriptMicrosPerCall) of each case: calls calls sent 100 to a
// pipeline, the cases taking turns in each of rounds rounds, so that load
// from the rest of the machine falls on all of them; each figure is the
// case's best round. Every answer must be an array starting with 1
// (granted): a refusal takes a shorter path and would measure something
// else. It resets Redis's statistics: use it on a private server only.
func BestMicrosPerCall(ctx context.Context, rdb *redis.Client, cases []ScriptCost, calls, rounds int) (map[string]float64, error) {
	const batch = 100
	best := map[string]float64{}
	for range rounds {
		for _, c := range cases {
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				return nil, err
			}
			pipe := rdb.Pipeline()
			for sent := 0; sent < calls; sent += batch {
				for i := sent; i < min(sent+batch, calls); i++ {
					c.Send(pipe, i)
				}
				cmds, err := pipe.Exec(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", c.Name, err)
				}
				for _, cmd := range cmds {
					if v, _ := cmd.(*redis.Cmd).Int64Slice(); len(v) == 0 || v[0] != 1 {
						return nil, fmt.Errorf("%s answered %v, not a grant", c.Name, v)
					}
				}
			}
			us, err := ScriptMicrosPerCall(ctx, rdb)
			if err != nil {
				return nil, err
			}
			if v, ok := best[c.Name]; !ok || us < v {
				best[c.Name] = us
			}
		}
	}
	return best, nil
}
